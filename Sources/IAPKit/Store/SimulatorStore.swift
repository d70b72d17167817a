import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The simulated App Store as the app's store, over HTTP (`/sim/...`): one account on one device. Any platform.
/// `updates()` polls the device's unfinished queue, as StoreKit pushes transactions.
///
/// The App Store's own sheets (manage subscriptions, refund request, offer code) have no customer to tap in them here:
/// a test or demo scripts beforehand what the customer does in the next one shown, and the simulator records each
/// sheet shown (`GET /sim/accounts/{account}/sheets`).
public actor SimulatorStore: StoreAdapter {
    /// The simulator's address (`iap dev` prints it; `http://127.0.0.1:8090` by default).
    public let baseURL: URL
    /// The store account (the Apple ID) that pays, as the simulator names it.
    public let account: String
    /// The device this store runs on: transactions are finished per device, as StoreKit's queue is per device.
    public let device: String
    let pollInterval: Duration
    /// Sends one request: URLSession, or whatever another HTTP stack (an in-process router in the history explorer) supplies.
    let transport: @Sendable (URLRequest) async throws -> (Data, URLResponse)
    /// How the next purchase ends (the simulator's `outcome`): tests and demos choose; nil is success.
    private var nextOutcome: String?
    private let promoted = AsyncStream.makeStream(of: PromotedPurchase.self)
    private var manageSubscriptionsAction: ManageSubscriptionsAction?
    private var refundRequestAction = RefundRequestAction.submit
    private var offerCodeToRedeem: (productId: String, offerId: String)?

    /// What the customer does in the manage-subscriptions sheet before closing it.
    public enum ManageSubscriptionsAction: Sendable, Hashable {
        /// Cancels the subscription whose original transaction id this is (its auto-renewal goes off).
        case turnOffAutoRenew(String)
        /// Renews it again.
        case turnOnAutoRenew(String)
    }

    /// What the customer does in the refund sheet.
    public enum RefundRequestAction: Sendable, Hashable {
        /// Submits the request: Apple decides later (`POST /sim/transactions/{id}/refund-request/decide`).
        case submit
        /// Closes the sheet without submitting.
        case close
    }

    /// The simulator at `baseURL`, paying as `account` on `device`; `pollInterval` paces ``updates()``.
    public init(baseURL: URL, account: String, device: String, pollInterval: Duration = .milliseconds(250)) {
        self.baseURL = baseURL
        self.account = account
        self.device = device
        self.pollInterval = pollInterval
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 20
        let session = URLSession(configuration: configuration)
        transport = { request in try await session.uncancelledData(for: request) }
    }

    /// The simulator reached through `transport` instead of URLSession.
    public init(baseURL: URL, account: String, device: String, pollInterval: Duration = .milliseconds(250),
                transport: @escaping @Sendable (URLRequest) async throws -> (Data, URLResponse)) {
        self.baseURL = baseURL
        self.account = account
        self.device = device
        self.pollInterval = pollInterval
        self.transport = transport
    }

    /// Makes the next purchase end in `outcome`: `userCancelled`, `failed`, `deferred` (Ask to Buy) or `interrupted`.
    public func setNextOutcome(_ outcome: String?) { nextOutcome = outcome }

    /// What the customer does in the next manage-subscriptions sheet; nil: looks and closes it.
    public func setManageSubscriptionsAction(_ action: ManageSubscriptionsAction?) { manageSubscriptionsAction = action }

    /// What the customer does in the next refund sheet (submitting, unless scripted otherwise).
    public func setRefundRequestAction(_ action: RefundRequestAction) { refundRequestAction = action }

    /// The code the customer types in the next offer-code sheet: `offerId` (the code's reference name) for `productId`.
    /// Nothing scripted: the customer closes the sheet.
    public func setOfferCodeToRedeem(productId: String, offerId: String) { offerCodeToRedeem = (productId, offerId) }

    /// The customer taps Buy on `productId`'s App Store product page, with the win-back offer the App Store showed, if
    /// any: a promoted purchase for the app.
    public nonisolated func promote(_ productId: String, winBackOfferId: String? = nil) {
        promoted.continuation.yield(PromotedPurchase(productId: productId, winBackOfferId: winBackOfferId))
    }

    public nonisolated func promotedPurchases() -> AsyncStream<PromotedPurchase> { promoted.stream }

    /// Priced in the account's storefront; `displayPrice` formatted from the price (the simulator has no localized text).
    public nonisolated func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        var components = URLComponents(url: baseURL.appendingPathComponent("sim/products"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "ids", value: productIds.joined(separator: ",")), URLQueryItem(name: "account", value: account)]
        struct Product: Decodable {
            var productId: String
            var type: StoreProduct.ProductType
            var displayName: String
            var price: Int64
            var currency: String
            var subscriptionPeriod: String?
            var introductoryOffer: StoreProduct.Offer?
            var familyShareable: Bool?
        }
        struct Reply: Decodable { var products: [Product]; var invalidProductIds: [String] }
        let reply: Reply = try await call("GET", components.url!)
        let products = reply.products.map {
            StoreProduct(productId: $0.productId, type: $0.type, displayName: $0.displayName, price: $0.price, currency: $0.currency,
                         subscriptionPeriod: $0.subscriptionPeriod, introductoryOffer: $0.introductoryOffer, familyShareable: $0.familyShareable)
        }
        return (products, reply.invalidProductIds)
    }

    /// The account's own switch. An account the simulator does not know is not a device that may not pay: it is a
    /// store that cannot answer for this customer, so it throws.
    public nonisolated func canMakePayments() async throws -> Bool {
        struct Reply: Decodable { var canMakePayments: Bool }
        let (data, status) = try await send("GET", baseURL.appendingPathComponent("sim/accounts/\(account)"))
        if status == 404 { throw StoreError.systemError("no store account \(account) in the simulator") }
        return try decode(Reply.self, data, status: status, path: "sim/accounts").canMakePayments
    }

    public func purchase(_ purchase: StorePurchaseRequest) async throws -> StorePurchaseResult {
        let offers = purchase.offers
        struct Offer: Encodable { var kind: String; var id: String; var signature: String? }
        struct Request: Encodable {
            var account, device, productId: String; var appAccountToken: UUID?; var quantity: Int; var outcome: String?
            /// As StoreKit 2: the transaction alone (the app receipt is read when asked for, ``receipt()``).
            var withReceipt = false
            var offer: Offer?
            var introductoryOfferEligibility: String?
            /// As StoreKit carries it (`{"signatureInfo": {"token": …}}`).
            var advancedCommerceData: String?
        }
        if purchase.winBackOfferId != nil, offers.promotionalOfferJWS != nil {
            return .failed("one offer per purchase: a promotional offer and a win-back offer were both asked for")
        }
        let outcome = nextOutcome
        nextOutcome = nil
        var request = Request(account: account, device: device, productId: purchase.productId, appAccountToken: purchase.appAccountToken,
                              quantity: purchase.quantity, outcome: outcome)
        if let id = offers.promotionalOfferId, let jws = offers.promotionalOfferJWS { request.offer = Offer(kind: "promotional", id: id, signature: jws) }
        if let id = purchase.winBackOfferId { request.offer = Offer(kind: "winBack", id: id) }
        request.introductoryOfferEligibility = offers.introductoryOfferEligibilityJWS
        request.advancedCommerceData = offers.advancedCommerceData.map { String(decoding: $0, as: UTF8.self) }
        return try await pay(request)
    }

    /// Sends a payment and reads the simulator's answer as StoreKit would hand it to the app: what StoreKit throws
    /// (`Product.PurchaseError`) thrown, other refusals `.failed`.
    private nonisolated func pay(_ request: any Encodable & Sendable) async throws -> StorePurchaseResult {
        let reply: PurchaseReply = try await call("POST", baseURL.appendingPathComponent("sim/purchases"), body: request)
        switch reply.status {
        case "purchased":
            guard let jws = reply.signedTransaction else { return .failed("the store answered without a transaction") }
            // Without the series' renewal info, as StoreKitStore hands a purchase over (it is journaled first; the restore
            // sends the renewal info).
            return .purchased(try StoreTransaction(signedTransaction: jws))
        case "pending", "interrupted": return .pending(requestId: reply.requestId)
        case "userCancelled": return .cancelled
        default:
            let reason = reply.reason ?? reply.status
            if let error = Self.storeError(reason) { throw error }
            return .failed(reason)
        }
    }

    /// `requestId`: the Ask to Buy (or interrupted) request a `pending` answer waits on, listed by `GET /sim/requests`.
    private struct PurchaseReply: Decodable { var status: String; var signedTransaction: String?; var requestId: String?; var reason: String? }

    /// The StoreKit error a simulator refusal stands for: the simulator starts a refusal with the name of the
    /// `Product.PurchaseError` case StoreKit throws for it (`ineligibleForOffer: …`).
    static func storeError(_ reason: String) -> StoreError? {
        if reason.hasPrefix("unknown account") { return .systemError("no store account in the simulator: \(reason)") }
        guard let colon = reason.firstIndex(of: ":") else { return nil }
        return switch reason[..<colon] {
        case "ineligibleForOffer": .ineligibleForOffer
        case "invalidOfferIdentifier": .invalidOfferIdentifier
        case "invalidOfferPrice": .invalidOfferPrice
        case "invalidOfferSignature": .invalidOfferSignature
        case "missingOfferParameters": .missingOfferParameters
        case "productUnavailable": .productUnavailable
        case "purchaseNotAllowed": .purchaseNotAllowed
        case "invalidQuantity": .invalidQuantity
        default: nil
        }
    }

    public nonisolated func unfinished() async throws -> [StoreTransaction] {
        try await signedTransactions("GET", "sim/accounts/\(account)/devices/\(device)/unfinished")
    }

    /// One the simulator no longer lists as unfinished here answers `{"finished": false}`: done all the same.
    public nonisolated func finish(_ transaction: StoreTransaction) async throws {
        struct Request: Encodable { var device: String }
        struct Reply: Decodable { var finished: Bool }
        let _: Reply = try await call("POST", baseURL.appendingPathComponent("sim/transactions/\(transaction.transactionId)/finish"), body: Request(device: device))
    }

    /// With each auto-renewable series' signed renewal info, as StoreKitStore's restore reads it from StoreKit.
    public nonisolated func restore() async throws -> [StoreTransaction] {
        try await signedTransactions("POST", "sim/accounts/\(account)/restore", withRenewalInfo: true)
    }

    /// `Transaction.currentEntitlements` as the simulator lists it for the account.
    public nonisolated func currentEntitlements() async throws -> [StoreTransaction] {
        try await signedTransactions("GET", "sim/accounts/\(account)/currentEntitlements")
    }

    /// `Transaction.all` as the simulator lists it for the account (finished consumables left out, as Apple does).
    public nonisolated func transactionHistory() async throws -> [StoreTransaction]? {
        try await signedTransactions("GET", "sim/accounts/\(account)/transactions")
    }

    public nonisolated func receipt() async throws -> String? {
        struct Reply: Decodable { var receipt: String }
        let reply: Reply = try await call("GET", baseURL.appendingPathComponent("sim/accounts/\(account)/receipt"))
        return reply.receipt
    }

    public nonisolated func updates() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                var seen: Set<String> = []
                while !Task.isCancelled {
                    if let pending = try? await self.unfinished() {
                        for transaction in pending where !seen.contains(transaction.transactionId) {
                            seen.insert(transaction.transactionId)
                            continuation.yield(transaction)
                        }
                    }
                    try? await Task.sleep(for: pollInterval)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: The App Store's sheets

    /// Shows the sheet; the customer does what was scripted (``setManageSubscriptionsAction(_:)``), then closes it.
    public func showManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws {
        let action = manageSubscriptionsAction
        manageSubscriptionsAction = nil
        try await recordSheet("manageSubscriptions")
        struct Body: Encodable { var enabled: Bool }
        switch action {
        case .turnOffAutoRenew(let original)?:
            _ = try await send("POST", baseURL.appendingPathComponent("sim/subscriptions/\(original)/autoRenew"), body: Body(enabled: false), expect: 200..<300)
        case .turnOnAutoRenew(let original)?:
            _ = try await send("POST", baseURL.appendingPathComponent("sim/subscriptions/\(original)/autoRenew"), body: Body(enabled: true), expect: 200..<300)
        case nil:
            break
        }
    }

    /// Shows the refund sheet for `transactionId`; submitted (unless scripted to close), the simulator holds the request
    /// as Apple does until it decides. Throws when the simulator refuses it (not this customer's, refunded, or one
    /// already open: StoreKit's `Transaction.RefundRequestError`).
    public func beginRefundRequest(for transactionId: String, in confirmation: PurchaseConfirmation?) async throws -> RefundRequestStatus {
        let action = refundRequestAction
        refundRequestAction = .submit
        try await recordSheet("refundRequest", transactionId: transactionId)
        guard action == .submit else { return .userCancelled }
        struct Body: Encodable { var account: String; var fromApp = true }
        let (_, status) = try await send("POST", baseURL.appendingPathComponent("sim/transactions/\(transactionId)/refund-request"), body: Body(account: account))
        guard (200..<300).contains(status) else {
            throw StoreError.systemError("the App Store refused a refund request for \(transactionId) (the simulator answered \(status))")
        }
        return .success
    }

    /// Shows the offer-code sheet; the customer types the scripted code (``setOfferCodeToRedeem(productId:offerId:)``)
    /// or closes it. What is redeemed is bought without the app's token and waits in the device's unfinished queue,
    /// reaching the app through ``updates()``, as StoreKit delivers it; a code the App Store refuses is shown to the
    /// customer in the sheet, and the app hears nothing.
    public func presentOfferCodeRedeemSheet(in confirmation: PurchaseConfirmation?) async throws {
        let code = offerCodeToRedeem
        offerCodeToRedeem = nil
        try await recordSheet("offerCodeRedemption")
        guard let code else { return }
        struct Offer: Encodable { var kind = "offerCode"; var id: String }
        struct Request: Encodable { var account, device, productId: String; var offer: Offer; var withReceipt = false }
        _ = try? await pay(Request(account: account, device: device, productId: code.productId, offer: Offer(id: code.offerId)))
    }

    private nonisolated func recordSheet(_ sheet: String, transactionId: String? = nil) async throws {
        struct Body: Encodable { var sheet: String; var device: String; var transactionId: String? }
        let (_, status) = try await send("POST", baseURL.appendingPathComponent("sim/accounts/\(account)/sheets"),
                                         body: Body(sheet: sheet, device: device, transactionId: transactionId))
        if status == 404 { throw StoreError.systemError("no store account \(account) in the simulator") }
        guard (200..<300).contains(status) else { throw StoreError.systemError("the simulator answered \(status) to a \(sheet) sheet") }
    }

    // MARK: HTTP

    /// The listing's transactions; `withRenewalInfo`, each auto-renewable one with its series' signed renewal info.
    private nonisolated func signedTransactions(_ method: String, _ path: String, withRenewalInfo: Bool = false) async throws -> [StoreTransaction] {
        struct Reply: Decodable { var signedTransactions: [String]; var signedRenewalInfos: [String: String]? }
        let reply: Reply = try await call(method, baseURL.appendingPathComponent(path))
        return try reply.signedTransactions.map {
            var transaction = try StoreTransaction(signedTransaction: $0)
            if withRenewalInfo { transaction.signedRenewalInfo = transaction.originalTransactionId.flatMap { reply.signedRenewalInfos?[$0] } }
            return transaction
        }
    }

    nonisolated func call<T: Decodable>(_ method: String, _ url: URL, body: (any Encodable & Sendable)? = nil) async throws -> T {
        let (data, status) = try await send(method, url, body: body)
        return try decode(T.self, data, status: status, path: url.path)
    }

    private nonisolated func decode<T: Decodable>(_ type: T.Type, _ data: Data, status: Int, path: String) throws -> T {
        // The simulator answering at all but not with success is the store failing, not the network.
        guard (200..<300).contains(status) else { throw StoreError.systemError("the simulator answered \(status) to \(path)") }
        return try JSONDecoder().decode(T.self, from: data)
    }

    /// One request: the body and status as answered. Not reaching the simulator is StoreKit's network error.
    private nonisolated func send(_ method: String, _ url: URL, body: (any Encodable & Sendable)? = nil,
                                  expect: Range<Int>? = nil) async throws -> (Data, Int) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body {
            request.httpBody = try JSONEncoder().encode(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await transport(request)
        } catch let failure as PurchaseFailure {
            throw failure
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw StoreError.networkError("the simulator at \(baseURL.host ?? "?"):\(baseURL.port.map(String.init) ?? "-") is unreachable (\(Self.brief(error)))")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        if let expect, !expect.contains(status) { throw StoreError.systemError("the simulator answered \(status) to \(url.path)") }
        return (data, status)
    }

    /// A transport error in a few words: its code, not a page of user info.
    private static func brief(_ error: any Error) -> String {
        if let url = error as? URLError { return "URLError \(url.code.rawValue)" }
        let nsError = error as NSError
        return "\(nsError.domain) \(nsError.code)"
    }
}
