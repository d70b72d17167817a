import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The simulated App Store as the app's store, over HTTP (`/sim/...`): one account on one device. Any platform.
/// `updates()` polls the device's unfinished queue, as StoreKit pushes transactions.
public actor SimulatorStore: StoreAdapter {
    public let baseURL: URL
    public let account: String
    public let device: String
    let pollInterval: Duration
    /// Sends one request: URLSession, or whatever another HTTP stack (an in-process router in the history explorer) supplies.
    let transport: @Sendable (URLRequest) async throws -> (Data, URLResponse)
    /// How the next purchase ends (the simulator's `outcome`): tests and demos choose; nil is success.
    private var nextOutcome: String?
    private let promoted = AsyncStream.makeStream(of: PromotedPurchase.self)

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

    /// The customer taps Buy on `productId`'s App Store product page: a promoted purchase for the app.
    public nonisolated func promote(_ productId: String, winBackOfferId: String? = nil) {
        promoted.continuation.yield(PromotedPurchase(productId: productId, winBackOfferId: winBackOfferId))
    }

    public nonisolated func promotedPurchases() -> AsyncStream<PromotedPurchase> { promoted.stream }

    public nonisolated func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        var components = URLComponents(url: baseURL.appendingPathComponent("sim/products"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "ids", value: productIds.joined(separator: ","))]
        struct Reply: Decodable { var products: [StoreProduct]; var invalidProductIds: [String] }
        let reply: Reply = try await call("GET", components.url!)
        return (reply.products, reply.invalidProductIds)
    }

    public func canMakePayments() async throws -> Bool {
        struct Reply: Decodable { var canMakePayments: Bool }
        let reply: Reply = try await call("GET", baseURL.appendingPathComponent("sim/accounts/\(account)"))
        return reply.canMakePayments
    }

    public func purchase(_ purchase: StorePurchaseRequest) async throws -> StorePurchaseResult {
        let (productId, appAccountToken, quantity, offers) = (purchase.productId, purchase.appAccountToken, purchase.quantity, purchase.offers)
        struct Offer: Encodable { var kind = "promotional"; var id: String; var signature: String }
        struct Request: Encodable {
            var account, device, productId: String; var appAccountToken: UUID; var quantity: Int; var outcome: String?
            /// As StoreKit 2: the transaction alone (the app receipt is read when asked for, ``receipt()``).
            var withReceipt = false
            var offer: Offer?
            var introductoryOfferEligibility: String?
            /// As StoreKit carries it (`{"signatureInfo": {"token": …}}`).
            var advancedCommerceData: String?
        }
        struct Reply: Decodable { var status: String; var signedTransaction: String?; var reason: String? }
        let outcome = nextOutcome
        nextOutcome = nil
        var request = Request(account: account, device: device, productId: productId, appAccountToken: appAccountToken, quantity: quantity, outcome: outcome)
        if let id = offers.promotionalOfferId, let jws = offers.promotionalOfferJWS { request.offer = Offer(id: id, signature: jws) }
        request.introductoryOfferEligibility = offers.introductoryOfferEligibilityJWS
        request.advancedCommerceData = offers.advancedCommerceData.map { String(decoding: $0, as: UTF8.self) }
        let reply: Reply = try await call("POST", baseURL.appendingPathComponent("sim/purchases"), body: request)
        switch reply.status {
        case "purchased":
            guard let jws = reply.signedTransaction else { return .failed("the store answered without a transaction") }
            return .purchased(try StoreTransaction(signedTransaction: jws))
        case "pending", "interrupted": return .pending
        case "userCancelled": return .cancelled
        default: return .failed(reply.reason ?? reply.status)
        }
    }

    public nonisolated func unfinished() async throws -> [StoreTransaction] {
        struct Reply: Decodable { var signedTransactions: [String] }
        let reply: Reply = try await call("GET", baseURL.appendingPathComponent("sim/accounts/\(account)/devices/\(device)/unfinished"))
        return try reply.signedTransactions.map(StoreTransaction.init(signedTransaction:))
    }

    public nonisolated func finish(_ transaction: StoreTransaction) async throws {
        struct Request: Encodable { var device: String }
        struct Reply: Decodable { var finished: Bool }
        let _: Reply = try await call("POST", baseURL.appendingPathComponent("sim/transactions/\(transaction.transactionId)/finish"), body: Request(device: device))
    }

    public nonisolated func restore() async throws -> [StoreTransaction] {
        struct Reply: Decodable { var signedTransactions: [String] }
        let reply: Reply = try await call("POST", baseURL.appendingPathComponent("sim/accounts/\(account)/restore"))
        return try reply.signedTransactions.map(StoreTransaction.init(signedTransaction:))
    }

    /// `Transaction.currentEntitlements` as the simulator lists it for the account.
    public nonisolated func currentEntitlements() async throws -> [StoreTransaction] {
        struct Reply: Decodable { var signedTransactions: [String] }
        let reply: Reply = try await call("GET", baseURL.appendingPathComponent("sim/accounts/\(account)/currentEntitlements"))
        return try reply.signedTransactions.map(StoreTransaction.init(signedTransaction:))
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

    nonisolated func call<T: Decodable>(_ method: String, _ url: URL, body: (any Encodable & Sendable)? = nil) async throws -> T {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body { request.httpBody = try JSONEncoder().encode(body) }
        let (data, response) = try await transport(request)
        guard let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
            throw PurchaseFailure(.storeFailed, "the simulator answered \((response as? HTTPURLResponse)?.statusCode ?? 0) to \(url.path)")
        }
        return try JSONDecoder().decode(T.self, from: data)
    }
}
