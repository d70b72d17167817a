import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `POST /v1/offers/sign`: the signatures StoreKit needs from the app's server, for the signed-in customer, made with
/// the app's In-App Purchase key — a promotional offer (`.promotionalOffer(_:compactJWS:)`, or the original API's
/// signature) when the configured rules let the customer have it, or introductory-offer eligibility
/// (`.introductoryOfferEligibility(compactJWS:)`) as the server judges it across the customer's Apple IDs.
/// A product the catalog retired (no longer sold) gets neither: `410 product_retired`, since an offer only serves a new
/// purchase of it, which the App Store no longer makes.
struct OfferRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices


    func add(to router: some RouterMethods<Context>) {
        router.post("v1/offers/sign", use: sign)
    }

    @Sendable func sign(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let body = try await request.decodeJSON(OfferSignRequest.self, limit: 16 * 1024)
        guard body.productId.utf8.count <= 200, (body.offerIdentifier?.utf8.count ?? 0) <= 200 else { throw APIError.badRequest("ids are at most 200 bytes") }
        guard let credentials = services.verifier.apple.serverAPI?.credentials else {
            // Not a passing outage (no retry will help): this deployment signs no offers, as if the endpoint did not exist.
            throw APIError(.notFound, code: .offersNotConfigured, "offer signatures need the In-App Purchase key (appStore.serverAPIBaseURL and its key)")
        }
        let signer = OfferSigner(credentials: credentials)
        let ledger = services.ledger
        var presented: String?
        if let appTransaction = body.appTransaction {
            let payload = try await services.verifier.signedData.verifyAppTransaction(appTransaction).payload
            try await ledger.recordAppTransaction(payload, accountId: account, now: services.now())
            presented = payload.appTransactionId
        }
        let purchases = try await ledger.entitlingPurchases(accountId: account)
        let now = Date()
        // Every signature names a transaction of the buyer's, so that the App Store takes it from this customer only.
        let named = try await customerTransactionId(account, presented: presented)
        switch body.kind {
        case .promotionalOffer:
            guard let offer = body.offerIdentifier else { throw APIError.badRequest("offerIdentifier is required for a promotional offer") }
            let owned = try await ledger.entitlements(accountId: account, now: services.now())
            if case .failure(let refusal) = OfferRules.promotionalOffer(offer, productId: body.productId, rules: services.promotionalOffers,
                                                                         catalog: ledger.catalog, purchases: purchases, owned: owned) {
                throw Self.error(refusal)
            }
            var reply = OfferSignReply(kind: .promotionalOffer, productId: body.productId, offerIdentifier: offer)
            if body.format == .legacy {
                // The original signature names no customer, only the payment's appAccountToken: it must be this account's
                // order for this product, or the signature would serve anyone who pays with the same (or no) token.
                guard let token = body.appAccountToken, let order = try await ledger.order(appAccountToken: token),
                      order.accountId == account, order.productId == body.productId else {
                    throw APIError(.conflict, code: .orderRequired, "the original signature needs the appAccountToken of this account's order for this product")
                }
                reply.legacySignature = .init(try signer.legacyPromotionalOffer(productId: body.productId, offerIdentifier: offer,
                                                                          applicationUsername: token.uuidString, now: now))
            } else {
                guard let named else { throw Self.noCustomerTransaction }
                reply.signature = try signer.promotionalOffer(productId: body.productId, offerIdentifier: offer, transactionId: named, now: now)
            }
            services.metrics.offerSigned(.promotional)
            return try JSONReply.encode(reply)
        case .introductoryOfferEligibility:
            let allowed: Bool
            switch OfferRules.introductoryOfferAllowed(productId: body.productId, catalog: ledger.catalog, purchases: purchases) {
            case .success(let allow): allowed = allow
            case .failure(let refusal): throw Self.error(refusal)
            }
            var reply = OfferSignReply(kind: .introductoryOfferEligibility, productId: body.productId, allowIntroductoryOffer: allowed)
            if !allowed {
                guard let named else { throw Self.noCustomerTransaction }
                reply.signature = try signer.introductoryOfferEligibility(productId: body.productId, allowIntroductoryOffer: false, transactionId: named, now: now)
                services.metrics.offerSigned(.introductory)
            }
            return try JSONReply.encode(reply)
        }
    }

    static var noCustomerTransaction: APIError {
        APIError(.conflict, code: .noCustomerTransaction,
                 "the signature names a transaction of the customer's: send the device's app transaction with the request")
    }

    /// The app transaction the device sent, else the customer's newest app transaction (the same on every device and
    /// reinstall of one Apple ID), else any transaction of theirs.
    func customerTransactionId(_ account: String, presented: String?) async throws -> String? {
        if let presented { return presented }
        if let app = try await services.ledger.appTransactions(accountId: account).last?.appTransactionId,
           !app.hasPrefix("purchase-") {
            return app
        }
        return try await services.ledger.anyTransactionId(accountId: account)
    }

    static func error(_ refusal: OfferRules.Refusal) -> APIError {
        switch refusal {
        case .unknownProduct: APIError(.notFound, code: ErrorCode(rawValue: refusal.rawValue), "not an auto-renewable subscription sold here")
        case .productRetired: APIError(.gone, code: .productRetired, "the product is no longer sold: no offer is signed for it")
        case .unknownOffer: APIError(.notFound, code: ErrorCode(rawValue: refusal.rawValue), "no such promotional offer for this product")
        case .notEligible: APIError(.forbidden, code: ErrorCode(rawValue: refusal.rawValue), "the customer may not have this offer")
        }
    }
}
