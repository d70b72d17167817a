import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseLedger

/// `POST /v1/offers/sign`: the signatures StoreKit needs from the app's server, for the signed-in customer, made with
/// the app's In-App Purchase key — a promotional offer (`.promotionalOffer(_:compactJWS:)`, or the original API's
/// signature) when the configured rules let the customer have it, or introductory-offer eligibility
/// (`.introductoryOfferEligibility(compactJWS:)`) as the server judges it across the customer's Apple IDs.
struct OfferRoutes {
    let services: PurchaseServer.Services

    struct SignRequest: Decodable {
        enum Kind: String, Decodable { case promotionalOffer, introductoryOfferEligibility }
        enum Format: String, Decodable { case jws, legacy }
        var kind: Kind
        var productId: String
        /// Promotional offers: the offer's identifier.
        var offerIdentifier: String?
        /// Promotional offers: `jws` (the default) or `legacy`, the original API's signature.
        var format: Format?
        /// The legacy signature signs the purchase's `appAccountToken` (its application username).
        var appAccountToken: UUID?
    }

    struct SignReply: Encodable {
        var kind: String
        var productId: String
        var offerIdentifier: String?
        /// The JWS to hand StoreKit.
        var signature: String?
        /// The original API's signature.
        var legacySignature: LegacyPromotionalOfferSignature?
        /// Introductory-offer eligibility: what the signature says.
        var allowIntroductoryOffer: Bool?
    }

    func add(to router: Router<BasicRequestContext>) {
        router.post("v1/offers/sign", use: sign)
    }

    @Sendable func sign(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try await AppRoutes(services: services).authenticate(request)
        let body = try await request.decodeJSON(SignRequest.self, limit: 4 * 1024)
        guard body.productId.utf8.count <= 200, (body.offerIdentifier?.utf8.count ?? 0) <= 200 else { throw APIError.badRequest("ids are at most 200 bytes") }
        guard let credentials = services.verifier.apple.serverAPI?.credentials else {
            throw APIError(.serviceUnavailable, code: "offers_not_configured", "offer signatures need the In-App Purchase key (appStore.serverAPIBaseURL and its key)")
        }
        let signer = OfferSigner(credentials: credentials)
        let ledger = services.ledger
        let purchases = try await ledgerCall { try await ledger.purchases(accountId: account) }
        let now = Date()
        switch body.kind {
        case .promotionalOffer:
            guard let offer = body.offerIdentifier else { throw APIError.badRequest("offerIdentifier is required for a promotional offer") }
            let owned = try await ledgerCall { try await ledger.entitlements(accountId: account, now: services.now()) }
            if case .failure(let refusal) = OfferRules.promotionalOffer(offer, productId: body.productId, rules: services.promotionalOffers,
                                                                         catalog: ledger.catalog, purchases: purchases, owned: owned) {
                throw Self.error(refusal)
            }
            var reply = SignReply(kind: "promotionalOffer", productId: body.productId, offerIdentifier: offer)
            if body.format == .legacy {
                reply.legacySignature = try signer.legacyPromotionalOffer(productId: body.productId, offerIdentifier: offer,
                                                                          applicationUsername: body.appAccountToken?.uuidString ?? "", now: now)
            } else {
                reply.signature = try signer.promotionalOffer(productId: body.productId, offerIdentifier: offer,
                                                              transactionId: try await customerTransactionId(account), now: now)
            }
            services.metrics.offerSigned("promotional")
            return try JSONReply.encode(reply)
        case .introductoryOfferEligibility:
            let allowed: Bool
            switch OfferRules.introductoryOfferAllowed(productId: body.productId, catalog: ledger.catalog, purchases: purchases) {
            case .success(let allow): allowed = allow
            case .failure(let refusal): throw Self.error(refusal)
            }
            guard let transactionId = try await customerTransactionId(account) else {
                throw APIError(.conflict, code: "no_customer_transaction",
                               "introductory-offer eligibility names a transaction of the customer's: send the app transaction first (POST /v1/purchases)")
            }
            let signature = try signer.introductoryOfferEligibility(productId: body.productId, allowIntroductoryOffer: allowed,
                                                                    transactionId: transactionId, now: now)
            services.metrics.offerSigned("introductory")
            return try JSONReply.encode(SignReply(kind: "introductoryOfferEligibility", productId: body.productId, signature: signature,
                                                  allowIntroductoryOffer: allowed))
        }
    }

    /// The customer's app transaction (the same on every device and reinstall), else any transaction of theirs.
    func customerTransactionId(_ account: String) async throws -> String? {
        if let app = try await ledgerCall({ try await services.ledger.appTransactions(accountId: account) }).last?.appTransactionId,
           !app.hasPrefix("purchase-") {
            return app
        }
        return try await ledgerCall { try await services.ledger.anyTransactionId(accountId: account) }
    }

    static func error(_ refusal: OfferRules.Refusal) -> APIError {
        switch refusal {
        case .unknownProduct: APIError(.notFound, code: refusal.rawValue, "not an auto-renewable subscription sold here")
        case .unknownOffer: APIError(.notFound, code: refusal.rawValue, "no such promotional offer for this product")
        case .notEligible: APIError(.forbidden, code: refusal.rawValue, "the customer may not have this offer")
        }
    }
}
