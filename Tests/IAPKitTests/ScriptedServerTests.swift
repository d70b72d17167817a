import AppStoreFormats
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PurchaseAPI
import IAPKit
import Testing

/// The body of a request the SDK sent, read as the contract's type.
func sentBody<T: Decodable>(_ type: T.Type, _ request: URLRequest) throws -> T {
    try APIJSON.decoder().decode(type, from: request.httpBody ?? Data())
}

/// A store on the device, in memory: sells anything, keeps an unfinished queue, records finishes.
actor MemoryStore: StoreAdapter {
    private(set) var unfinishedQueue: [StoreTransaction] = []
    private(set) var finished: [String] = []
    private(set) var finishAttempts = 0
    /// How many of the next finishes fail (the store's own error, as StoreKit can throw).
    private var failingFinishes = 0
    private var next = 1000

    struct FinishRefused: Error {}
    func failNextFinishes(_ count: Int) { failingFinishes = count }
    /// The device's app receipt (nil: none).
    private var receiptText: String?
    func setReceipt(_ text: String?) { receiptText = text }
    /// What a purchase answers instead of a new payment: StoreKit answers a purchase of what the Apple ID owns already
    /// with the transaction that bought it.
    private var alreadyOwned: StoreTransaction?
    func setAlreadyOwned(_ transaction: StoreTransaction?) { alreadyOwned = transaction }
    /// What the next purchase throws instead of paying (as StoreKit throws `StoreKitError` / `Product.PurchaseError`).
    private var throwOnPurchase: (any Error)?
    func throwOnNextPurchase(_ error: any Error) { throwOnPurchase = error }

    /// A transaction as the store signs it; the SDK reads its ids without verifying (the server verifies).
    static func transaction(id: String, productId: String, appAccountToken: UUID?) throws -> StoreTransaction {
        var payload: [String: Any] = ["transactionId": id, "originalTransactionId": id, "productId": productId]
        if let appAccountToken { payload["appAccountToken"] = appAccountToken.uuidString.lowercased() }
        let header = Base64.urlEncode(Array(#"{"alg":"ES256"}"#.utf8))
        let body = Base64.urlEncode(Array(try JSONSerialization.data(withJSONObject: payload)))
        return try StoreTransaction(signedTransaction: "\(header).\(body).c2ln")
    }

    func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        (productIds.map { StoreProduct(productId: $0, type: .consumable, displayName: $0, price: 990, currency: "USD") }, [])
    }
    /// The store cannot be reached (no App Store account, no network): asking whether payments are allowed throws.
    private var unreachable = false
    func setUnreachable(_ value: Bool) { unreachable = value }
    /// The store's signed history (`Transaction.all`); nil: a store without it (the receipt is used).
    private var history: [StoreTransaction]?
    func setHistory(_ transactions: [StoreTransaction]?) { history = transactions }
    func transactionHistory() async throws -> [StoreTransaction]? { history }
    /// Every payment asked for, as the client asked.
    private(set) var purchaseRequests: [StorePurchaseRequest] = []
    /// What the next purchase answers instead of paying (`.cancelled`, `.pending`, `.failed`).
    private var nextResult: StorePurchaseResult?
    func answerNextPurchase(_ result: StorePurchaseResult) { nextResult = result }
    func canMakePayments() async throws -> Bool {
        if unreachable { throw StoreError.networkError("The Internet connection appears to be offline.") }
        return true
    }
    func purchase(_ request: StorePurchaseRequest) async throws -> StorePurchaseResult {
        purchaseRequests.append(request)
        if let result = nextResult {
            nextResult = nil
            return result
        }
        if let alreadyOwned { return .purchased(alreadyOwned) }
        if let thrown = throwOnPurchase {
            throwOnPurchase = nil
            throw thrown
        }
        next += 1
        let transaction = try Self.transaction(id: String(next), productId: request.productId, appAccountToken: request.appAccountToken)
        unfinishedQueue.append(transaction)
        return .purchased(transaction)
    }
    func add(_ transaction: StoreTransaction) { unfinishedQueue.append(transaction) }
    func unfinished() async throws -> [StoreTransaction] { unfinishedQueue }
    func finish(_ transaction: StoreTransaction) async throws {
        finishAttempts += 1
        if failingFinishes > 0 {
            failingFinishes -= 1
            throw FinishRefused()
        }
        unfinishedQueue.removeAll { $0.transactionId == transaction.transactionId }
        finished.append(transaction.transactionId)
    }
    func restore() async throws -> [StoreTransaction] { [] }
    nonisolated func updates() -> AsyncStream<StoreTransaction> { AsyncStream { _ in } }
    func receipt() async throws -> String? { receiptText }
}

/// A value the scripted server's closure reads while the test changes it.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Bool
    init(_ value: Bool) { stored = value }
    var value: Bool {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A purchase server answering from a script: each request gets the reply the script gives for its method and path.
final class ScriptedServer: @unchecked Sendable {
    typealias Reply = (status: Int, body: [String: Any])
    private let lock = NSLock()
    private var script: @Sendable (URLRequest) -> Reply
    private(set) var requests: [URLRequest] = []

    init(_ script: @escaping @Sendable (URLRequest) -> Reply) { self.script = script }

    func transport(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let script = lock.withLock {
            requests.append(request)
            return self.script
        }
        let reply = script(request)
        let response = HTTPURLResponse(url: request.url!, statusCode: reply.status, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "application/json"])!
        return (try JSONSerialization.data(withJSONObject: reply.body), response)
    }

    var uploads: Int {
        lock.lock()
        defer { lock.unlock() }
        return requests.filter { $0.url?.path.hasSuffix("v1/purchases") == true }.count
    }

    func client(verifier: EntitlementsVerifier? = nil) -> PurchaseServerClient {
        PurchaseServerClient(baseURL: URL(string: "https://purchases.example")!, verifier: verifier, token: { "token" },
                             transport: { try await self.transport($0) })
    }

    /// An order's `expiresAt` as the server writes it (milliseconds since 1970): an hour from now.
    static var orderExpiry: Int64 { Int64((Date().timeIntervalSince1970 + 3600) * 1000) }

    static func entitlements(_ account: String, _ names: [String] = [], coins: Int? = nil) -> [String: Any] {
        ["accountId": account, "entitlements": names.map { ["name": $0, "productId": "p.\($0)", "transactionId": "t-\($0)", "state": "active"] },
         "balances": coins.map { ["coins": $0] } ?? [:]]
    }
}

@Suite("PurchaseClient against a scripted server: refusal classes, delivery to the owner, signed answers")
struct ScriptedServerTests {
    static func journal() throws -> FileJournal {
        try FileJournal(directory: FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)"))
    }

    @Test("deliveredToOwner: the transaction reached the account whose order it was, so it is finished and dropped, and nothing is shown here")
    func deliveredToOwner() async throws {
        let server = ScriptedServer { request in
            switch request.url?.path ?? "" {
            case let path where path.hasSuffix("v1/purchases"):
                return (200, ["outcome": "deliveredToOwner", "transactions": [["transactionId": "9", "outcome": "deliveredToOwner"]],
                              "entitlements": ScriptedServer.entitlements("bea")])
            default: return (200, ScriptedServer.entitlements("bea"))
            }
        }
        let store = MemoryStore()
        // A transaction of Ann's order, adopted after a reinstall (no journal): its account is unknown on the device.
        await store.add(try MemoryStore.transaction(id: "9", productId: "p.premium", appAccountToken: UUID()))
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "bea")
        #expect(await client.resume() == 0, "nothing granted to Bea")
        #expect(await store.finished == ["9"], "finished: it reached its owner")
        #expect(try journal.entries().isEmpty)
        #expect(await client.currentEntitlements?.has("premium") != true)
    }

    @Test("A granted transaction whose finish the store refused is finished again by this process, with backoff, not left in the queue until the next launch")
    func failedFinishIsRetried() async throws {
        let server = ScriptedServer { request in
            request.url?.path.hasSuffix("v1/orders") == true
                ? (201, ["orderId": "o1", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
                : (200, ["outcome": "granted", "transactions": [["transactionId": "1001", "outcome": "granted"]],
                         "entitlements": ScriptedServer.entitlements("ann", coins: 10)])
        }
        // Backoff long enough that no machine outruns it: a retry before it would be the client's doing.
        let store = MemoryStore()
        await store.failNextFinishes(1)
        let journal = try Self.journal()
        let patient = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann", retryDelays: [.seconds(3600)])
        guard case .granted = await patient.purchase("p.coins") else { Issue.record("not granted"); return }
        #expect(await store.finished.isEmpty, "the first finish failed")
        #expect(try journal.entries().filter { $0.kind == .paid }.isEmpty, "granted: settled, nothing left to upload")
        await patient.retryDue()
        #expect(await store.finishAttempts == 1, "not again before its backoff")
        // The store handing it over again (its updates stream, a resume) finishes it at once, whatever the backoff.
        _ = await patient.resume()
        #expect(await store.finished == ["1001"])
        #expect(try await store.unfinished().isEmpty)
        #expect(server.uploads == 1, "finishing is not uploading again")

        // Backoff that has surely passed: the retrier finishes it by itself, and stops once it is finished.
        let other = MemoryStore()
        await other.failNextFinishes(2)
        let quick = PurchaseClient(store: other, server: server.client(), journal: try Self.journal(), accountId: "ann",
                                   retryDelays: [.milliseconds(1)])
        guard case .granted = await quick.purchase("p.coins") else { Issue.record("not granted"); return }
        try await Task.sleep(for: .milliseconds(20))
        await quick.retryDue()
        #expect(await other.finishAttempts == 2, "tried again")
        #expect(await other.finished.isEmpty, "and failed again")
        try await Task.sleep(for: .milliseconds(20))
        await quick.retryDue()
        #expect(await other.finished == ["1001"], "finished by the retrier")
        try await Task.sleep(for: .milliseconds(20))
        await quick.retryDue()
        #expect(await other.finishAttempts == 3, "not tried again once finished")
        #expect(server.uploads == 2, "one upload per purchase")
    }

    @Test("A receipt is not synced under another account while this device holds a payment of the first not delivered yet: the receipt lists it, and a server without the Server API would grant it to the sender")
    func receiptWaitsForAnotherAccountsPayment() async throws {
        let down = Flag(true)
        let server = ScriptedServer { request in
            if request.url?.path.hasSuffix("v1/orders") == true { return (201, ["orderId": "o1", "productId": "p.premium", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry]) }
            if down.value { return (503, ["error": ["code": "storage", "message": "restarting", "class": "retry"]]) }
            let account = (try? sentBody(PurchaseRequest.self, request))?.expectedAccountId ?? "?"
            return (200, ["outcome": "granted", "transactions": [["transactionId": "1001", "outcome": "granted"]],
                          "entitlements": ScriptedServer.entitlements(account, account == "ann" ? ["premium"] : [])])
        }
        let store = MemoryStore()
        await store.setReceipt("MIIreceipt")
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann", retryDelays: [.seconds(3600)])
        guard case .paidPendingDelivery = await client.purchase("p.premium") else { Issue.record("expected a pending delivery"); return }
        await client.logIn("bea")
        await client.waitForBackgroundWork()
        let receipts = { server.requests.filter { (String(data: $0.httpBody ?? Data(), encoding: .utf8) ?? "").contains("MIIreceipt") }.count }
        do {
            _ = try await client.syncReceipt()
            Issue.record("synced under Bea while Ann's payment waits")
        } catch {
            #expect(error.code == .accountMismatch, "\(error)")
        }
        #expect(receipts() == 0, "the receipt was not sent")
        // Ann is back and her payment is delivered: Bea's receipt goes, and says whose it is meant to be.
        down.value = false
        await client.logIn("ann")
        await client.waitForBackgroundWork()
        #expect(await store.finished == ["1001"])
        await client.logIn("bea")
        _ = try await client.syncReceipt()
        let sent = try #require(server.requests.last { (String(data: $0.httpBody ?? Data(), encoding: .utf8) ?? "").contains("MIIreceipt") })
        #expect(try sentBody(PurchaseRequest.self, sent).expectedAccountId == "bea")
    }

    @Test("A receipt waits for an unfinished payment nothing on the device names the payer of but whose token names an order (a reinstall, another device's order): its signed upload goes first and settles it")
    func receiptWaitsForATokenedPaymentOfUnknownPayer() async throws {
        let down = Flag(true)
        let server = ScriptedServer { request in
            if down.value { return (503, ["error": ["code": "storage", "message": "restarting", "class": "retry"]]) }
            let body = String(data: request.httpBody ?? Data(), encoding: .utf8) ?? ""
            return body.contains("MIIreceipt")
                ? (200, ["outcome": "alreadyGranted", "transactions": [], "entitlements": ScriptedServer.entitlements("bea")])
                : (200, ["outcome": "deliveredToOwner", "transactions": [["transactionId": "77", "outcome": "deliveredToOwner"]],
                         "entitlements": ScriptedServer.entitlements("bea")])
        }
        let store = MemoryStore()
        await store.setReceipt("MIIreceipt")
        await store.add(try MemoryStore.transaction(id: "77", productId: "p.premium", appAccountToken: UUID()))
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "bea", retryDelays: [.seconds(3600)])
        let receipts = { server.requests.filter { (String(data: $0.httpBody ?? Data(), encoding: .utf8) ?? "").contains("MIIreceipt") }.count }
        await #expect(throws: PurchaseFailure.self) { try await client.syncReceipt() }
        #expect(receipts() == 0, "not sent while the payment's owner is unknown")
        down.value = false
        _ = try await client.syncReceipt()
        #expect(await store.finished == ["77"], "delivered to its order's account through its signed upload first")
        #expect(receipts() == 1)
    }

    @Test("A purchase StoreKit answers with what the Apple ID already owns, granted to another account of the app in this process, is that account's: delivered to its owner, not shown as this account's grant")
    func alreadyOwnedByAnotherAccount() async throws {
        let server = ScriptedServer { request in
            request.url?.path.hasSuffix("v1/orders") == true
                ? (201, ["orderId": UUID().uuidString, "productId": "p.premium", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
                : (200, ["outcome": "granted", "transactions": [["transactionId": "1001", "outcome": "granted"]],
                         "entitlements": ScriptedServer.entitlements("ann", ["premium"])])
        }
        let store = MemoryStore()
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "ann")
        guard case .granted = await client.purchase("p.premium") else { Issue.record("not granted"); return }
        await store.setAlreadyOwned(try #require(await store.finished.first.map { try MemoryStore.transaction(id: $0, productId: "p.premium", appAccountToken: nil) }))
        await client.logIn("bea")
        let outcome = await client.purchase("p.premium")
        guard case .deliveredToOwner(let transactionId) = outcome else { Issue.record("Bea was shown Ann's grant: \(outcome)"); return }
        #expect(transactionId == "1001")
        #expect(await client.currentEntitlements?.has("premium") != true)
    }

    @Test("Refusal classes: final finishes; operator and retry keep the transaction unfinished; an old server without a class is read conservatively")
    func refusalClasses() async throws {
        let cases: [(code: String, refusal: String?, finished: Bool)] = [
            ("bad_signature", "final", true),
            ("wrong_bundle", "operator", false),
            ("storage", "retry", false),
            ("wrong_bundle", nil, false),
            ("test_environment_not_allowed", nil, false),
            ("device_integrity", nil, false),
            ("something_new", nil, false),
            ("transaction_bound_elsewhere", nil, true),
        ]
        for (code, refusal, expectFinished) in cases {
            let server = ScriptedServer { request in
                request.url?.path.hasSuffix("v1/orders") == true
                    ? (201, ["orderId": "o1", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
                    : (422, ["error": ["code": code, "message": "refused"].merging(refusal.map { ["class": $0] } ?? [:]) { a, _ in a }])
            }
            let store = MemoryStore()
            let journal = try Self.journal()
            let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann", retryDelays: [.seconds(60)])
            let outcome = await client.purchase("p.coins")
            #expect(await !store.finished.isEmpty == expectFinished, "\(code) \(refusal ?? "no class"): finished \(expectFinished)")
            #expect(try journal.entries().contains { $0.kind == .paid } == !expectFinished, "\(code): journaled while unfinished")
            if expectFinished {
                guard case .failed = outcome else { Issue.record("\(code): \(outcome)"); continue }
            } else if code == "storage" {
                guard case .paidPendingDelivery = outcome else { Issue.record("\(code): \(outcome)"); continue }
            } else {
                guard case .paidDeliveryDelayed = outcome else { Issue.record("\(code): \(outcome)"); continue }
            }
        }
        #expect(RefusalClass.of(code: "malformed", status: 422) == .operator, "an old server's malformed may be Apple's own payload")
        #expect(RefusalClass.of(code: "bad_signature", status: 422) == .final)
        #expect(RefusalClass.of(code: "untrusted_chain", status: 422) == .operator)
    }

    @Test("An order refusal while the journal cannot be written: the upload goes again once without the order id and is granted, not sent with it forever", .timeLimit(.minutes(1)))
    func orderRefusalWithFullDisk() async throws {
        let server = ScriptedServer { request in
            if request.url?.path.hasSuffix("v1/orders") == true {
                return (201, ["orderId": "o1", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
            }
            let body = try? sentBody(PurchaseRequest.self, request)
            if body?.orderId != nil {
                return (422, ["error": ["code": "order_not_found", "message": "no such order", "class": "operator"]])
            }
            return (200, ["outcome": "granted", "transactions": [["transactionId": "1001", "outcome": "granted"]],
                          "entitlements": ScriptedServer.entitlements("ann", coins: 100)])
        }
        let store = MemoryStore()
        let journal = NoOrderlessWrites(inner: try Self.journal())
        let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann", retryDelays: [.seconds(60)])
        let outcome = await client.purchase("p.coins")
        guard case .granted = outcome else { Issue.record("expected a grant, got \(outcome)"); return }
        #expect(server.uploads == 2, "once with the order id, once without")
        #expect(await store.finished == ["1001"])
    }

    @Test("An order is asked for the account that pays; a payment journaled with another account's order (ordered while the sign-in changed) goes again without the order id and reaches that order's account, then is finished")
    func orderOfAnotherAccount() async throws {
        let server = ScriptedServer { request in
            if request.url?.path.hasSuffix("v1/orders") == true {
                return (201, ["orderId": "o-bea", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
            }
            let body = try? sentBody(PurchaseRequest.self, request)
            if body?.orderId == "o-bea" {
                return (403, ["error": ["code": "order_account_mismatch", "message": "the order is another account's", "class": "operator"]])
            }
            return (200, ["outcome": "deliveredToOwner", "transactions": [["transactionId": "1001", "outcome": "deliveredToOwner"]],
                          "entitlements": ScriptedServer.entitlements("ann")])
        }
        let store = MemoryStore()
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann", retryDelays: [.seconds(60)])
        _ = await client.purchase("p.coins")
        let order = try #require(server.requests.first { $0.url?.path.hasSuffix("v1/orders") == true })
        let asked = try sentBody(OrderRequest.self, order)
        #expect(asked.expectedAccountId == "ann")
        #expect(server.uploads == 2, "once with the order id, once without")
        #expect(await store.finished == ["1001"], "it reached the account whose order it paid")
        #expect(try journal.entries().isEmpty)
    }

    @Test("A transaction no entry names the payer of is uploaded as the signed-in account's: a token of another account is refused, not granted")
    func unownedNamesSignedIn() async throws {
        let server = ScriptedServer { request in
            (200, ["outcome": "granted", "transactions": [["transactionId": "77", "outcome": "granted"]], "entitlements": ScriptedServer.entitlements("cal")])
        }
        let store = MemoryStore()
        await store.add(try MemoryStore.transaction(id: "77", productId: "p.premium", appAccountToken: nil))
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "cal")
        _ = await client.resume()
        let upload = try #require(server.requests.first { $0.url?.path.hasSuffix("v1/purchases") == true })
        let body = try sentBody(PurchaseRequest.self, upload)
        #expect(body.expectedAccountId == "cal")
    }

    @Test("Signed entitlements: a genuine answer is believed; a forged signature, another nonce or an unsigned answer is refused and grants nothing")
    func signedEntitlements() async throws {
        let key = P256.Signing.PrivateKey()
        let verifier = try EntitlementsVerifier(publicKeyPEM: key.publicKey.pemRepresentation)
        @Sendable func sign(_ payload: [String: Any], with signer: P256.Signing.PrivateKey = key) throws -> String {
            let header = Base64.urlEncode(Array(#"{"alg":"ES256","kid":"k"}"#.utf8))
            let body = Base64.urlEncode(Array(try JSONSerialization.data(withJSONObject: payload)))
            let signature = try signer.signature(for: Data("\(header).\(body)".utf8))
            return "\(header).\(body).\(Base64.urlEncode(signature.rawRepresentation))"
        }
        enum Tamper: CaseIterable { case none, forged, otherNonce, unsigned, unsignedPartEdited }
        for tamper in Tamper.allCases {
            let server = ScriptedServer { request in
                let nonce = request.value(forHTTPHeaderField: "X-Entitlements-Nonce") ?? ""
                let genuine = ScriptedServer.entitlements("ann", ["premium"])
                var reply = genuine
                switch tamper {
                case .none: reply["signedEntitlements"] = try? sign(["accountId": "ann", "nonce": nonce, "issuedAt": 1, "entitlements": genuine])
                case .forged: reply["signedEntitlements"] = try? sign(["accountId": "ann", "nonce": nonce, "issuedAt": 1, "entitlements": genuine],
                                                                       with: P256.Signing.PrivateKey())
                case .otherNonce: reply["signedEntitlements"] = try? sign(["accountId": "ann", "nonce": "replayed-nonce-0123456789", "issuedAt": 1, "entitlements": genuine])
                case .unsigned: break
                case .unsignedPartEdited:
                    // A proxy adds an entitlement to the readable part; the signature covers the server's original.
                    reply["signedEntitlements"] = try? sign(["accountId": "ann", "nonce": nonce, "issuedAt": 1,
                                                             "entitlements": ScriptedServer.entitlements("ann", [])])
                }
                return (200, reply)
            }
            let client = PurchaseClient(store: MemoryStore(), server: server.client(verifier: verifier), journal: try Self.journal(), accountId: "ann")
            switch tamper {
            case .none:
                #expect(try await client.entitlements().has("premium"))
                let nonce = try #require(server.requests.last?.value(forHTTPHeaderField: "X-Entitlements-Nonce"))
                #expect(nonce.count >= 16)
            case .unsignedPartEdited:
                #expect(try await client.entitlements().has("premium") == false, "what is believed is what the server signed")
            default:
                do {
                    _ = try await client.entitlements()
                    Issue.record("\(tamper) was believed")
                } catch {
                    #expect(error.code == .untrustedAnswer, "\(tamper)")
                }
                #expect(await client.currentEntitlements == nil, "\(tamper): nothing shown")
            }
        }
    }

    @Test("A grant answer that fails verification is not a grant: the transaction stays journaled and unfinished")
    func untrustedGrantKeepsTransaction() async throws {
        let key = P256.Signing.PrivateKey()
        let server = ScriptedServer { request in
            request.url?.path.hasSuffix("v1/orders") == true
                ? (201, ["orderId": "o1", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
                : (200, ["outcome": "granted", "entitlements": ScriptedServer.entitlements("ann", coins: 100)])
        }
        let store = MemoryStore()
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(verifier: try EntitlementsVerifier(publicKeyPEM: key.publicKey.pemRepresentation)),
                                    journal: journal, accountId: "ann", retryDelays: [.seconds(60)])
        guard case .paidPendingDelivery = await client.purchase("p.coins") else { Issue.record("an unsigned grant was believed"); return }
        #expect(await store.finished.isEmpty)
        #expect(try journal.entries().contains { $0.kind == .paid })
    }
}

/// A journal on a disk that fills up after the order's payment was journaled: an entry rewritten without its order id
/// cannot be written.
struct NoOrderlessWrites: PurchaseJournal {
    let inner: FileJournal
    struct Full: Error {}
    func write(_ entry: JournalEntry) throws {
        if entry.kind == .paid && entry.orderId == nil { throw Full() }
        try inner.write(entry)
    }
    func remove(key: String) throws { try inner.remove(key: key) }
    func entries() throws -> [JournalEntry] { try inner.entries() }
}
