import AppStoreFormats
import Foundation
import Hummingbird

/// The device side, as HTTP for clients and tests: what StoreKit does on a phone.
struct DeviceRoutes {
    let services: SimulatorServer.Services
    var engine: StoreEngine { services.engine }

    struct AccountRequest: Decodable {
        var id: String
        var storefront: String?
        var canMakePayments: Bool?
        var askToBuy: Bool?
        /// Renewals fail while set; clearing it recovers subscriptions in grace or billing retry.
        var billingFails: Bool?
    }

    struct PurchaseRequest: Decodable {
        var account: String
        var device: String
        var productId: String
        var appAccountToken: UUID?
        var quantity: Int?
        /// A promotional offer (with the app server's signature), offer code or win-back offer to redeem.
        var offer: OfferRequest?
        /// The app server's introductory-offer eligibility JWS (`.introductoryOfferEligibility(compactJWS:)`).
        var introductoryOfferEligibility: String?
        var outcome: StoreEngine.Outcome?
        /// Whether the reply carries the updated app receipt (StoreKit 1's view of a purchase; the default). StoreKit 2
        /// hands the app a transaction alone, and so does the SDK's adapter: a receipt is an RSA signature to make.
        var withReceipt: Bool?
        /// `MONTHLY`: a one-year subscription paid monthly over a 12-month commitment (2026).
        var billingPlanType: BillingPlanType?
        /// An Advanced Commerce API purchase: the JWS the app's server signed, bare or in StoreKit's
        /// `{"signatureInfo": {"token": …}}` (`advancedCommerceData`).
        var advancedCommerceData: String?
    }

    struct ProductInfo: Encodable {
        var productId: String
        var type: ProductType
        var displayName: String
        /// Milliunits.
        var price: Int64
        var currency: String
        var subscriptionGroupIdentifier: String?
        var groupLevel: Int?
        var subscriptionPeriod: String?
        var familyShareable: Bool
        var introductoryOffer: OfferInfo?
        var promotionalOffers: [OfferInfo]
        var offerCodes: [OfferInfo]
        var winBackOffers: [OfferInfo]
    }

    struct OfferInfo: Encodable {
        /// Promotional or win-back offer id, or offer-code reference name.
        var id: String?
        var discountType: OfferDiscountType
        var period: String
        var numberOfPeriods: Int
        var price: Int64
    }

    struct FinishRequest: Decodable { var device: String }
    struct AdvanceRequest: Decodable { var seconds: Double }
    struct RefundRequest: Decodable {
        var revocationPercentage: Int? = nil
        var revocationReason: Int? = nil
    }

    func add(to router: Router<BasicRequestContext>) {
        let sim = router.group("sim")
        sim.get("root.cer") { _, _ in Reply.bytes(engine.minter.authority.jws.rootDER, contentType: "application/pkix-cert") }
        sim.get("receipt-root.cer") { _, _ in Reply.bytes(engine.minter.authority.receipts.rootDER, contentType: "application/pkix-cert") }
        sim.post("accounts", use: createAccount)
        sim.get("accounts/:account", use: account)
        sim.put("accounts/:account/family", use: setFamily)
        sim.get("products", use: products)
        sim.post("purchases", use: purchase)
        sim.get("requests", use: requests)
        sim.post("requests/:id/approve", use: approve)
        sim.post("requests/:id/decline", use: decline)
        // The listings an app reads its subscriptions' state beside carry the signed renewal info of the account's series, as
        // StoreKit holds it; the unfinished queue, which apps poll, does not (signing every series on each poll).
        sim.get("accounts/:account/devices/:device/unfinished") { _, context in
            try Reply.json(SimulatedSignedTransactions(signedTransactions: try await engine.unfinished(
                account: try context.parameters.require("account"), device: try context.parameters.require("device"))))
        }
        sim.get("accounts/:account/transactions") { _, context in
            let account = try context.parameters.require("account")
            guard let history = try await engine.transactionHistory(account: account) else {
                throw HTTPError(.notFound, message: "no such account")
            }
            return try Reply.json(SimulatedSignedTransactions(signedTransactions: history, signedRenewalInfos: try await engine.signedRenewalInfos(account: account)))
        }
        sim.post("accounts/:account/sheets", use: showSheet)
        sim.get("accounts/:account/sheets", use: sheets)
        sim.get("accounts/:account/currentEntitlements") { _, context in
            let account = try context.parameters.require("account")
            return try Reply.json(SimulatedSignedTransactions(signedTransactions: try await engine.currentEntitlements(account: account),
                                                              signedRenewalInfos: try await engine.signedRenewalInfos(account: account)))
        }
        sim.post("transactions/:id/finish", use: finish)
        sim.post("transactions/:id/refund", use: refund)
        sim.post("accounts/:account/restore") { _, context in
            let account = try context.parameters.require("account")
            return try Reply.json(SimulatedSignedTransactions(signedTransactions: try await engine.restore(account: account),
                                                              signedRenewalInfos: try await engine.signedRenewalInfos(account: account)))
        }
        sim.get("accounts/:account/receipt") { _, context in
            try Reply.json(["receipt": Base64.standardEncode(try await engine.receipt(for: try context.parameters.require("account")))])
        }
        sim.post("clock/advance", use: advanceClock)
        sim.post("subscriptions/:id/autoRenew", use: setAutoRenew)
        sim.post("products/:id/price", use: raisePrice)
        sim.post("subscriptions/:id/priceConsent", use: consentToPriceIncrease)
        sim.post("transactions/:id/refund-reversal", use: reverseRefund)
        sim.post("notifications/deliver") { _, _ in
            try Reply.json(["attempted": try await services.delivery?.deliverDue() ?? 0])
        }
        sim.get("notifications", use: notifications)
        sim.post("faults", use: configureFaults)
        sim.delete("faults", use: clearFaults)
        sim.post("faults/notifications", use: configureNotificationFaults)
        sim.get("calls", use: calls)
        sim.delete("calls") { _, _ in
            services.faults.forgetCalls()
            return Reply.empty()
        }
    }

    /// `GET /sim/calls?prefix=/inApps/v1/transactions/`: how many requests reached Apple's endpoints under the prefix
    /// (all of them without one) since the start or the last `DELETE /sim/calls`, faulted ones included.
    @Sendable func calls(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try Reply.json(["count": services.faults.calls(to: request.uri.queryParameters.get("prefix") ?? "")])
    }

    /// Makes a customer's account (an Apple Account signed in on the customer's devices) with its storefront and settings.
    @Sendable func createAccount(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(AccountRequest.self)
        guard !body.id.isEmpty, body.id.utf8.count <= 128 else { throw HTTPError(.badRequest, message: "account id must be 1 to 128 bytes") }
        try await engine.createAccount(body.id, storefront: body.storefront, canMakePayments: body.canMakePayments ?? true,
                                       askToBuy: body.askToBuy ?? false, billingFails: body.billingFails ?? false)
        try await services.delivery?.deliverDue()
        return try Reply.json(["id": body.id])
    }

    /// The account's settings.
    @Sendable func account(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard let settings = await engine.account(try context.parameters.require("account")) else {
            throw HTTPError(.notFound, message: "no such account")
        }
        return try Reply.json(settings)
    }

    /// Family Sharing: the organizer's family group, whose members share the organizer's family-shareable purchases.
    @Sendable func setFamily(_ request: Request, context: BasicRequestContext) async throws -> Response {
        struct Body: Decodable { var members: [String] }
        let body = try await request.decode(Body.self)
        guard body.members.count <= 5 else { throw HTTPError(.badRequest, message: "a family has at most six people") }
        guard try await engine.setFamily(organizer: try context.parameters.require("account"), members: body.members) else {
            throw HTTPError(.notFound, message: "unknown account, or the organizer listed as a member")
        }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// StoreKit's `Product.products(for:)`: “Requests product data from the App Store.” At most 200 ids; unknown ones are
    /// listed apart. With `account`, priced in that customer's storefront, as StoreKit prices for the signed-in account.
    @Sendable func products(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let ids = request.uri.queryParameters["ids"].map { $0.split(separator: ",").map(String.init) } ?? []
        let catalog = engine.catalog
        var storefront: String?
        if let account = request.uri.queryParameters["account"] { storefront = await engine.account(String(account))?.storefront }
        var found: [ProductInfo] = []
        var invalid: [String] = []
        for id in ids.prefix(200) {
            guard let product = catalog.product(id) else { invalid.append(id); continue }
            let price = storefront.flatMap { product.storefrontPrices[$0] } ?? .init(currency: catalog.currency, price: product.price)
            found.append(ProductInfo(
                productId: id, type: product.type, displayName: product.displayName, price: price.price, currency: price.currency,
                subscriptionGroupIdentifier: product.subscriptionGroupIdentifier, groupLevel: product.groupLevel,
                subscriptionPeriod: product.period?.description, familyShareable: product.familyShareable,
                introductoryOffer: product.introductoryOffer.map(OfferInfo.init), promotionalOffers: product.promotionalOffers.map(OfferInfo.init),
                offerCodes: product.offerCodes.map(OfferInfo.init), winBackOffers: product.winBackOffers.map(OfferInfo.init)))
        }
        struct Products: Encodable { var products: [ProductInfo]; var invalidProductIds: [String] }
        return try Reply.json(Products(products: found, invalidProductIds: invalid))
    }

    /// StoreKit's `Product.purchase(options:)`: “Initiates a purchase for the product with the App Store and displays the
    /// confirmation sheet.” The app server's signatures are checked first, as the App Store does before it charges.
    /// What the Apple ID already owns (a non-consumable not refunded, the same product of a live subscription) answers
    /// `purchased` with the transaction that owns it, charging nothing; Ask to Buy answers `pending` with its `requestId`.
    @Sendable func purchase(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(PurchaseRequest.self)
        let allowIntroductoryOffer: Bool?
        switch try await checkSignatures(body) {
        case .success(let allow): allowIntroductoryOffer = allow
        case .failure(let refusal): return try Reply.json(SimulatedPurchaseAnswer(status: "failed", reason: refusal.description))
        }
        var advancedCommerce: AdvancedCommercePurchase?
        if let data = body.advancedCommerceData {
            switch OfferSignatureVerifier(services.authenticator).advancedCommerceRequest(Self.advancedCommerceToken(data)) {
            case .failure(let refusal): return try Reply.json(SimulatedPurchaseAnswer(status: "failed", reason: refusal.description))
            case .success(let (request, signature)): advancedCommerce = AdvancedCommercePurchase(request: request, nonce: signature.nonce)
            }
        }
        let result = try await engine.purchase(account: body.account, device: body.device, productId: body.productId,
                                               appAccountToken: body.appAccountToken, quantity: body.quantity ?? 1, offer: body.offer,
                                               allowIntroductoryOffer: allowIntroductoryOffer, outcome: body.outcome ?? .success,
                                               withReceipt: body.withReceipt ?? true, billingPlanType: body.billingPlanType,
                                               advancedCommerce: advancedCommerce)
        try await services.delivery?.deliverDue()
        switch result {
        case .purchased(let signed, let id, let receipt):
            return try Reply.json(SimulatedPurchaseAnswer(status: "purchased", transactionId: id, signedTransaction: signed, receipt: receipt.map { Base64.standardEncode($0) },
                                                          signedRenewalInfo: try await engine.signedRenewalInfo(transactionId: id)))
        case .userCancelled: return try Reply.json(SimulatedPurchaseAnswer(status: "userCancelled"))
        case .pending(let requestId): return try Reply.json(SimulatedPurchaseAnswer(status: "pending", requestId: requestId))
        case .interrupted(let requestId): return try Reply.json(SimulatedPurchaseAnswer(status: "interrupted", requestId: requestId))
        case .failed(let reason): return try Reply.json(SimulatedPurchaseAnswer(status: "failed", reason: reason))
        }
    }

    /// An app showed one of the App Store's own sheets on the customer's device (`{"sheet": "manageSubscriptions"}`,
    /// `refundRequest` with its `transactionId`, or `offerCodeRedemption`): recorded, so a test sees that it was shown.
    @Sendable func showSheet(_ request: Request, context: BasicRequestContext) async throws -> Response {
        struct Body: Decodable { var sheet: ShownSheet.Kind; var device: String?; var transactionId: String? }
        let body = try await request.decode(Body.self)
        guard body.sheet != .refundRequest || body.transactionId != nil else { throw HTTPError(.badRequest, message: "a refund request names its transactionId") }
        guard try await engine.recordSheet(body.sheet, account: try context.parameters.require("account"), device: body.device,
                                           transactionId: body.transactionId) else {
            throw HTTPError(.notFound, message: "no such account")
        }
        return Reply.empty()
    }

    /// The sheets shown on the account's devices, oldest first: `{"sheets": [{"sheet", "device", "transactionId", "shownAt"}]}`.
    @Sendable func sheets(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard let sheets = await engine.sheets(account: try context.parameters.require("account")) else {
            throw HTTPError(.notFound, message: "no such account")
        }
        return try Reply.json(["sheets": sheets])
    }

    /// `GET /sim/requests[?account=]`: the Ask to Buy requests waiting for a parent (and interrupted purchases waiting
    /// for the customer), oldest first, as `{"requests": [{"requestId", "account", "device", "productId", "requestedAt",
    /// "state"}]}` — what a parent's device shows, so that a test or a person approves one by its id.
    @Sendable func requests(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let account = request.uri.queryParameters["account"].map(String.init)
        return try Reply.json(["requests": await engine.waitingRequests(account: account)])
    }

    /// Ask to Buy: the parent or guardian approves the pending purchase.
    @Sendable func approve(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard let id = try await engine.approve(try context.parameters.require("id")) else {
            throw HTTPError(.notFound, message: "no such pending purchase")
        }
        return try Reply.json(["transactionId": id])
    }

    /// Ask to Buy: the parent or guardian declines the pending purchase.
    @Sendable func decline(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard try await engine.decline(try context.parameters.require("id")) else { throw HTTPError(.notFound, message: "no such pending purchase") }
        return Reply.empty()
    }

    /// StoreKit's `Transaction.finish()`: “Indicates to the App Store that the app delivered the purchased content or
    /// enabled the service to finish the transaction.”
    @Sendable func finish(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(FinishRequest.self)
        return try Reply.json(["finished": try await engine.finish(try context.parameters.require("id"), device: body.device)])
    }

    /// Apple refunds a transaction (all of it, or a part), and tells the developer (`REFUND`).
    @Sendable func refund(_ request: Request, context: BasicRequestContext) async throws -> Response {
        // An empty body refunds all of it; `{"revocationPercentage": 33333, "revocationReason": 1}` a part.
        let body = try await request.decodeIfPresent(RefundRequest.self) ?? RefundRequest()
        if let percentage = body.revocationPercentage, !(0...100_000).contains(percentage) {
            throw HTTPError(.badRequest, message: "revocationPercentage is in milliunits, 0 to 100000")
        }
        guard try await engine.refund(try context.parameters.require("id"), reason: RevocationReason(rawValue: body.revocationReason ?? 0),
                                      percentage: body.revocationPercentage) else {
            throw HTTPError(.notFound, message: "no such unrefunded transaction")
        }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// Moves the simulator's clock forward, renewing and expiring what falls due.
    @Sendable func advanceClock(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(AdvanceRequest.self)
        guard body.seconds.isFinite, body.seconds >= 0, body.seconds <= 10 * 365 * 86_400 else {
            throw HTTPError(.badRequest, message: "seconds must be between 0 and ten years")
        }
        try await engine.advanceClock(by: body.seconds)
        try await services.delivery?.deliverDue()
        return try Reply.json(["now": ReceiptDate.milliseconds(engine.clock.now)])
    }

    /// The customer turns a subscription's automatic renewal on or off.
    @Sendable func setAutoRenew(_ request: Request, context: BasicRequestContext) async throws -> Response {
        struct Body: Decodable { var enabled: Bool }
        let body = try await request.decode(Body.self)
        guard try await engine.setAutoRenew(originalTransactionId: try context.parameters.require("id"), enabled: body.enabled) else {
            throw HTTPError(.notFound, message: "no such subscription")
        }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// The developer raises a subscription's price in App Store Connect; subscribers are told, and asked to consent
    /// unless not required.
    @Sendable func raisePrice(_ request: Request, context: BasicRequestContext) async throws -> Response {
        struct Body: Decodable { var price: Int64; var consentRequired: Bool? }
        let body = try await request.decode(Body.self)
        let told = try await engine.raisePrice(productId: try context.parameters.require("id"), to: body.price, consentRequired: body.consentRequired ?? true)
        try await services.delivery?.deliverDue()
        return try Reply.json(["subscribersTold": told])
    }

    /// The customer consents to a subscription's price increase.
    @Sendable func consentToPriceIncrease(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard try await engine.consentToPriceIncrease(originalTransactionId: try context.parameters.require("id")) else {
            throw HTTPError(.notFound, message: "no price increase awaits consent")
        }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// Apple reverses a refund it granted (`REFUND_REVERSED`).
    @Sendable func reverseRefund(_ request: Request, context: BasicRequestContext) async throws -> Response {
        guard try await engine.reverseRefund(try context.parameters.require("id")) else { throw HTTPError(.notFound, message: "no such refunded transaction") }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// The notifications Apple sent or tried to send, with their attempts.
    @Sendable func notifications(_ request: Request, context: BasicRequestContext) async throws -> Response {
        struct Item: Encodable { var notificationUUID: String; var notificationType: NotificationTypeV2; var subtype: NotificationSubtype?; var sendAttempts: [SendAttemptItem] }
        return try Reply.json(await engine.notifications().map { Item(notificationUUID: $0.uuid, notificationType: $0.type, subtype: $0.subtype, sendAttempts: $0.attempts) })
    }

    /// Faults the simulator injects into its answers.
    @Sendable func configureFaults(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try services.faults.configure(try await request.decode(FaultPlan.self))
        return Reply.empty()
    }

    /// No more faults, in answers or notification delivery.
    @Sendable func clearFaults(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try services.faults.configure(FaultPlan())
        await services.delivery?.setFaults(NotificationFaults())
        return Reply.empty()
    }

    /// Faults in delivering notifications to the developer's server.
    @Sendable func configureNotificationFaults(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await services.delivery?.setFaults(try await request.decode(NotificationFaults.self))
        return Reply.empty()
    }

}

extension DeviceRoutes.OfferInfo {
    init(_ offer: SimulatorCatalog.Offer) {
        self.init(id: offer.offerId, discountType: offer.discountType, period: offer.period.description, numberOfPeriods: offer.numberOfPeriods, price: offer.price)
    }
}

extension DeviceRoutes {
    /// StoreKit takes the signed request as `{"signatureInfo": {"token": "<JWS>"}}` (`.custom(key: "advancedCommerceData", …)`);
    /// the bare JWS is taken too.
    static func advancedCommerceToken(_ data: String) -> String {
        struct Wrapper: Decodable { struct Info: Decodable { var token: String }; var signatureInfo: Info }
        return (try? JSONDecoder().decode(Wrapper.self, from: Data(data.utf8)))?.signatureInfo.token ?? data
    }

    /// The app server's signatures on a purchase, checked as the App Store does before it charges: a promotional
    /// offer needs one (JWS or the original kind), introductory-offer eligibility is taken when signed; each nonce
    /// once, each naming the buyer. Answers the introductory-offer decision the signature carries.
    func checkSignatures(_ body: PurchaseRequest) async throws -> Result<Bool?, OfferSignatureVerifier.Refusal> {
        let verifier = OfferSignatureVerifier(services.authenticator)
        var accepted: [OfferSignatureVerifier.Accepted] = []
        if let offer = body.offer, offer.kind == .promotional {
            let checked: Result<OfferSignatureVerifier.Accepted, OfferSignatureVerifier.Refusal>
            if let jws = offer.signature {
                checked = verifier.promotionalOffer(jws, productId: body.productId, offerIdentifier: offer.id)
            } else if let legacy = offer.legacySignature {
                checked = verifier.legacyPromotionalOffer(legacy, productId: body.productId, offerIdentifier: offer.id,
                                                          applicationUsername: body.appAccountToken?.uuidString ?? "")
            } else {
                checked = .failure(.init(reason: "a promotional offer needs the app server's signature"))
            }
            guard case .success(let signature) = checked else { return checked.map { _ in nil } }
            accepted.append(signature)
        }
        if let jws = body.introductoryOfferEligibility {
            let checked = verifier.introductoryOfferEligibility(jws, productId: body.productId)
            guard case .success(let signature) = checked else { return checked.map { _ in nil } }
            accepted.append(signature)
        }
        for signature in accepted {
            guard try await engine.takeOfferNonce(signature.nonce, account: body.account, transactionId: signature.transactionId) else {
                return .failure(.init(reason: "the nonce was used before, or the transaction it names is not the buyer's"))
            }
        }
        return .success(accepted.lazy.compactMap(\.allowIntroductoryOffer).first)
    }
}
