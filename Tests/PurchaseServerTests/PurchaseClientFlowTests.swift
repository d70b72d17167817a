import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import IAPKit
import PurchaseServer
import StoreSimulator
import Testing

/// An app on a device: a PurchaseClient over the simulator and the server, with a journal in a directory.
struct App {
    let client: PurchaseClient
    let store: SimulatorStore
    let journalDirectory: URL
    /// The account whose token the app sends (the app's own sign-in state).
    let account: Shared<String>
    /// While true, every call to the purchase server fails before it leaves the device (the network is gone).
    let offline: Shared<Bool>
    /// How many calls the app made to the purchase server.
    let serverCalls: Shared<Int>

    static func launch(_ system: System, account: String, storeAccount: String, device: String = "phone", journal: URL? = nil,
                       serverURL: URL? = nil, retryDelays: [Duration] = [.milliseconds(50)], journalOverride: (any PurchaseJournal)? = nil,
                       verifier: EntitlementsVerifier? = nil, cache: (any EntitlementsCache)? = nil, deviceIntegrity: DeviceIntegrity? = nil,
                       transport: (@Sendable (URLRequest) async throws -> (Data, URLResponse))? = nil,
                       tokenDelay: (@Sendable (Int) -> Duration?)? = nil) throws -> App {
        let directory = journal ?? FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        let store = SimulatorStore(baseURL: URL(string: "http://127.0.0.1:\(system.simulator.port!)")!, account: storeAccount, device: device,
                                   pollInterval: .milliseconds(50))
        let secret = system.secret
        let (signedIn, offline, calls) = (Shared(account), Shared(false), Shared(0))
        let token: @Sendable () async throws -> String = {
            let call = calls.update { $0 += 1; return $0 }
            if let delay = tokenDelay?(call) { try await Task.sleep(for: delay) }
            if offline.value { throw NetworkDown() }
            return try await AccountAuthenticator.issueToken(account: signedIn.value, secret: secret)
        }
        let base = serverURL ?? URL(string: "http://127.0.0.1:\(system.server.port!)")!
        let server = transport.map { PurchaseServerClient(baseURL: base, verifier: verifier, token: token, transport: $0) }
            // Generous: the whole suite runs in parallel on small machines, and a timed-out order fails a purchase.
            ?? PurchaseServerClient(baseURL: base, timeout: 30, verifier: verifier, token: token)
        return App(client: PurchaseClient(store: store, server: server, journal: try journalOverride ?? FileJournal(directory: directory), accountId: account,
                                          retryDelays: retryDelays, deviceIntegrity: deviceIntegrity, offlineCache: cache),
                   store: store, journalDirectory: directory, account: signedIn, offline: offline, serverCalls: calls)
    }

    var journalEntries: [JournalEntry] { (try? FileJournal(directory: journalDirectory).entries()) ?? [] }

    /// The app's user changes: its token and the SDK's sign-in follow.
    func signIn(_ account: String) async {
        self.account.value = account
        await client.logIn(account)
    }
}

/// The error an app sees with no network.
struct NetworkDown: Error {}

/// A value shared between a test and the closures it hands the SDK.
final class Shared<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
    @discardableResult
    func update<T>(_ body: (inout Value) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(&stored) }
}

@Suite("PurchaseClient against the simulator and the server: the paid order is never lost", .timeLimit(.minutes(3)))
struct PurchaseClientFlowTests {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let season = "com.example.iapkit.season.pass"
    static let monthly = "com.example.iapkit.pro.monthly"

    @Test("Each product type: order, payment, journal, upload, finish — granted, finished, journal empty")
    func fourTypes() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-ada"])
            let app = try App.launch(system, account: "ada", storeAccount: "store-ada")
            await app.client.start()
            let (products, invalid) = try await app.client.products([Self.coins, Self.premium, "nope"])
            #expect(products.map(\.productId) == [Self.coins, Self.premium])
            #expect(invalid == ["nope"])
            for product in [Self.coins, Self.premium, Self.season, Self.monthly] {
                guard case .granted = await app.client.purchase(product) else { Issue.record("\(product) not granted"); continue }
            }
            let owned = try await app.client.entitlements()
            #expect(owned.balances["coins"] == 100)
            #expect(Set(owned.entitlements.map(\.name)) == ["premium", "season", "pro"])
            #expect(try await app.store.unfinished().isEmpty, "every transaction finished")
            #expect(app.journalEntries.isEmpty)
            await app.client.stop()
        }
    }

    @Test("Server unreachable during upload: paid and journaled, not finished; the next launch delivers it once")
    func serverDownThenNextLaunch() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-ben"])
            // The order is created, then the server "dies": uploads go to a dead port.
            let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: "ben", OrderRequest(productId: Self.coins)).1)
            let dead = try App.launch(system, account: "ben", storeAccount: "store-ben", serverURL: URL(string: "http://127.0.0.1:1")!)
            let transaction = try await paid(system, store: dead.store, productId: Self.coins, token: order.appAccountToken.lowercasedString)
            let outcome = await dead.client.resume()
            #expect(outcome == 0)
            #expect(dead.journalEntries.map(\.transactionId) == [transaction.transactionId], "journaled before the upload")
            #expect(try await dead.store.unfinished().map(\.transactionId) == [transaction.transactionId], "not finished")
            await dead.client.stop()

            let next = try App.launch(system, account: "ben", storeAccount: "store-ben", journal: dead.journalDirectory)
            #expect(await next.client.start() == 1)
            #expect(try await next.client.entitlements().balances["coins"] == 100)
            #expect(next.journalEntries.isEmpty)
            #expect(try await next.store.unfinished().isEmpty)
            let orders = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
            #expect(orders.contains { $0.orderId == order.orderId }, "bound to its order through the token")
            await next.client.stop()
        }
    }

    @Test("Granted but killed before finish: the next launch finishes it and grants nothing more")
    func grantedBeforeFinish() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-cal"])
            let app = try App.launch(system, account: "cal", storeAccount: "store-cal")
            let transaction = try await paid(system, store: app.store, productId: Self.coins, token: nil)
            // The journal holds it and the server granted it; the app died before finish.
            try FileJournal(directory: app.journalDirectory).write(JournalEntry(
                kind: .paid, orderId: nil, productId: Self.coins, appAccountToken: nil, transactionId: transaction.transactionId,
                signedTransaction: transaction.signedTransaction))
            #expect(try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: "cal", PurchaseRequest(signedTransaction: transaction.signedTransaction)).1).outcome == .granted)
            #expect(await app.client.start() == 1)
            #expect(try await app.store.unfinished().isEmpty)
            #expect(app.journalEntries.isEmpty)
            #expect(try await app.client.entitlements().balances["coins"] == 100)
            await app.client.stop()
        }
    }

    @Test("A journaled order the server does not know (say, its database was restored from a backup) does not lose the payment")
    func unknownOrder() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-kim"])
            let app = try App.launch(system, account: "kim", storeAccount: "store-kim")
            let transaction = try await paid(system, store: app.store, productId: Self.coins, token: nil)
            try FileJournal(directory: app.journalDirectory).write(JournalEntry(
                kind: .paid, orderId: "no-such-order", productId: Self.coins, appAccountToken: nil, transactionId: transaction.transactionId,
                signedTransaction: transaction.signedTransaction))
            #expect(await app.client.start() == 1)
            #expect(try await app.client.entitlements().balances["coins"] == 100)
            #expect(app.journalEntries.isEmpty)
            await app.client.stop()
        }
    }

    @Test("Deleted and reinstalled: no journal, the store's unfinished queue and appAccountToken recover the order")
    func reinstalled() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-dee"])
            let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: "dee", OrderRequest(productId: Self.premium)).1)
            let first = try App.launch(system, account: "dee", storeAccount: "store-dee")
            _ = try await paid(system, store: first.store, productId: Self.premium, token: order.appAccountToken.lowercasedString)
            try? FileManager.default.removeItem(at: first.journalDirectory)
            let fresh = try App.launch(system, account: "dee", storeAccount: "store-dee")
            #expect(fresh.journalEntries.isEmpty)
            #expect(await fresh.client.start() == 1)
            #expect(try await fresh.client.entitlements().has("premium"))
            let orders = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
            #expect(orders.contains { $0.orderId == order.orderId })
            await fresh.client.stop()
        }
    }

    @Test("Ask to Buy: pending, then the parent approves and start()'s listener delivers it")
    func askToBuy() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-eve", "askToBuy": true])
            let app = try App.launch(system, account: "eve", storeAccount: "store-eve")
            await app.client.start()
            #expect(await app.client.purchase(Self.premium) == .pendingApproval)
            #expect(app.journalEntries.map(\.kind) == [.intent], "the order is remembered for when the approval comes")
            #expect(await system.engine.notifications().isEmpty, "nothing is bought until the parent approves")
            let pending = try #require(await system.engine.pendingRequestIds().first)
            _ = try await system.device(.post, "/sim/requests/\(pending)/approve")
            var granted = false
            for await state in app.client.entitlementUpdates where state.entitlements?.has("premium") == true { granted = true; break }
            #expect(granted)
            #expect(app.journalEntries.isEmpty)
            await app.client.stop()
        }
    }

    @Test("Cancelled and failed payments are typed outcomes and leave nothing behind; payments disabled is refused up front")
    func cancelledAndFailed() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-fay"])
            let app = try App.launch(system, account: "fay", storeAccount: "store-fay")
            await app.store.setNextOutcome("userCancelled")
            #expect(await app.client.purchase(Self.premium) == .cancelled)
            await app.store.setNextOutcome("failed")
            guard case .failed(let failure) = await app.client.purchase(Self.premium) else { Issue.record("expected a failure"); return }
            #expect(failure.code == .storeFailed)
            #expect(app.journalEntries.isEmpty)
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-fay", "canMakePayments": false])
            guard case .failed(let refused) = await app.client.purchase(Self.premium) else { Issue.record("expected a refusal"); return }
            #expect(refused.code == .paymentsNotAllowed)
        }
    }

    @Test("Restore brings back the non-consumable from the store and the season pass from the server; promoted purchases wait")
    func restoreAndPromoted() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-gus"])
            let phone = try App.launch(system, account: "gus", storeAccount: "store-gus")
            await phone.client.start()
            phone.store.promote(Self.premium)
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await phone.client.entitlements().entitlements.isEmpty, "held until the app is ready")
            let outcomes = await phone.client.readyForPromotedPurchases()
            guard case .granted = outcomes.first else { Issue.record("promoted purchase not granted: \(outcomes)"); return }
            guard case .granted = await phone.client.purchase(Self.season) else { Issue.record("season not granted"); return }
            let tablet = try App.launch(system, account: "gus", storeAccount: "store-gus", device: "tablet")
            let restored = try await tablet.client.restore()
            #expect(Set(restored.entitlements.map(\.name)) == ["premium", "season"])
        }
    }

    /// Pays in the store directly, as if the app died right after the payment (nothing journaled by the client).
    func paid(_ system: System, store: SimulatorStore, productId: String, token: String?) async throws -> StoreTransaction {
        guard case .purchased(let transaction) = try await store.purchase(StorePurchaseRequest(productId: productId,
                                                                                                     appAccountToken: token.flatMap(UUID.init(uuidString:)) ?? UUID())) else {
            throw PurchaseFailure(.storeFailed, "the simulator did not sell \(productId)")
        }
        return transaction
    }
}

@Suite("PurchaseClient: receipts and device integrity", .timeLimit(.minutes(3)))
struct PurchaseClientReceiptAndIntegrityTests {
    @Test("A purchase made outside the flow (StoreKit 1 era) is brought in by syncing the app receipt")
    func receiptSync() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-hal"])
            let app = try App.launch(system, account: "hal", storeAccount: "store-hal")
            _ = try await app.store.purchase(StorePurchaseRequest(productId: "com.example.iapkit.premium", appAccountToken: UUID()))
            let owned = try #require(try await app.client.syncReceipt())
            #expect(owned.has("premium"))
        }
    }

    @Test("Device-integrity signals are recorded with the transaction; a server with the refuse policy answers 403 and grants nothing")
    func integrity() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-ivy"])
            let (_, purchase, reply) = try await system.buy("com.example.iapkit.coins.100", account: "ivy", storeAccount: "store-ivy", submit: false)
            #expect(reply == nil)
            let jws = try #require(purchase.signedTransaction)
            let id = try #require(purchase.transactionId)
            let body = PurchaseRequest(signedTransaction: jws, deviceIntegrity: DeviceIntegrityReport(signals: ["known-paths"], applicable: true))
            #expect(try await system.call(.post, "/v1/purchases", as: "ivy", body).0 == .ok)
            #expect(try await system.services.ledger.deviceReports(transactionId: id) == [["known-paths"]])
        }
        try await System.run(.init(deliver: false, refuseSuspiciousDevices: true)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-jo"])
            let (_, purchase, _) = try await system.buy("com.example.iapkit.coins.100", account: "jo", storeAccount: "store-jo", submit: false)
            let jws = try #require(purchase.signedTransaction)
            let refused = try await system.call(.post, "/v1/purchases", as: "jo",
                                                PurchaseRequest(signedTransaction: jws, deviceIntegrity: DeviceIntegrityReport(signals: ["dyld-insert"], applicable: true)))
            #expect(refused.0 == .forbidden)
            #expect(try errorCode(refused.1) == "device_integrity")
            #expect(try await system.entitlements("jo").balance("coins") == nil)
        }
    }
}
