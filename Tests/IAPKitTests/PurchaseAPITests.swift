import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import IAPKit
import Testing

/// The SDK's API as an app developer meets it: what a purchase that does not happen says, what the streams say, and
/// how an account is switched. Each of these was wrong before (issue 31), against a store in memory and a scripted server.
@Suite("The SDK's answers say what happened: typed failures, events with end states, entitlement states, account switches")
struct PurchaseAPITests {
    static func journal() throws -> FileJournal {
        try FileJournal(directory: FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)"))
    }

    /// A server that opens orders and grants every upload to `account`.
    static func granting(_ account: String = "ann") -> ScriptedServer {
        ScriptedServer { request in
            switch request.url?.path ?? "" {
            case let path where path.hasSuffix("v1/orders"):
                (201, ["orderId": "o-\(UUID().uuidString.prefix(8))", "productId": "p.coins", "appAccountToken": UUID().uuidString,
                       "expiresAt": ScriptedServer.orderExpiry])
            case let path where path.hasSuffix("v1/purchases"):
                (200, ["outcome": "granted", "entitlements": ScriptedServer.entitlements(account, coins: 10)])
            case let path where path.hasSuffix("v1/restore"):
                (200, ["restored": 1, "refused": [String](), "entitlements": ScriptedServer.entitlements(account, coins: 10)])
            default:
                (200, ScriptedServer.entitlements(account, coins: 10))
            }
        }
    }

    /// A server that grants every upload and answers what it owns to the account whose token (`token-<account>`) it gets.
    static func grantingByToken() -> ScriptedServer {
        ScriptedServer { request in
            let account = request.value(forHTTPHeaderField: "Authorization")?.replacingOccurrences(of: "Bearer token-", with: "") ?? "?"
            return request.url?.path.hasSuffix("v1/purchases") == true
                ? (200, ["outcome": "granted", "entitlements": ScriptedServer.entitlements(account, ["premium"])])
                : (200, ScriptedServer.entitlements(account, ["premium"]))
        }
    }

    /// Every event sent until `stop` says the flow ended.
    static func collect(_ client: PurchaseClient) -> Task<[PurchaseEvent], Never> {
        let events = client.events
        return Task {
            var seen: [PurchaseEvent] = []
            for await event in events {
                seen.append(event)
                switch event {
                case .cancelled, .failed, .granted: return seen
                default: continue
                }
            }
            return seen
        }
    }

    @Test("A cancel thrown by the store (StoreKitError.userCancelled) is .cancelled: the order's intent goes and the events end with cancelled")
    func thrownCancel() async throws {
        let store = MemoryStore()
        await store.throwOnNextPurchase(StoreError.userCancelled)
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: Self.granting().client(), journal: journal, accountId: "ann")
        let events = Self.collect(client)
        #expect(await client.purchase("p.coins") == .cancelled)
        #expect(try journal.entries().isEmpty, "nothing was charged: the order's intent is removed")
        #expect(await events.value.last == .cancelled(productId: "p.coins"))
    }

    @Test("Each StoreKit refusal is typed; the intent goes only when the store says nothing was charged")
    func storeRefusals() async throws {
        let cases: [(StoreError, PurchaseFailure.Code, Bool)] = [
            (.productUnavailable, .unknownProduct, true), (.purchaseNotAllowed, .paymentsNotAllowed, true),
            (.ineligibleForOffer, .offerRefused, true), (.invalidOfferSignature, .offerRefused, true),
            (.notAvailableInStorefront, .notAvailableInStorefront, true), (.networkError("offline"), .storeUnavailable, false),
            (.unknown, .storeUnavailable, false),
        ]
        for (thrown, code, removed) in cases {
            let store = MemoryStore()
            await store.throwOnNextPurchase(thrown)
            let journal = try Self.journal()
            let client = PurchaseClient(store: store, server: Self.granting().client(), journal: journal, accountId: "ann")
            let events = Self.collect(client)
            guard case .failed(let failure) = await client.purchase("p.coins") else { Issue.record("\(thrown) did not fail"); continue }
            #expect(failure.code == code, "\(thrown)")
            #expect(try journal.entries().isEmpty == removed, "\(thrown): intent removed \(removed)")
            #expect(await events.value.last == .failed(productId: "p.coins", failure))
        }
    }

    @Test("A store that cannot be reached is storeUnavailable, never 'payments not allowed'; no order is made")
    func storeUnreachable() async throws {
        let store = MemoryStore()
        await store.setUnreachable(true)
        let server = Self.granting()
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "ann")
        guard case .failed(let failure) = await client.purchase("p.coins") else { Issue.record("bought"); return }
        #expect(failure.code == .storeUnavailable)
        #expect(server.requests.isEmpty)
    }

    @Test("Server failures are typed and their messages carry no JSON and no transport text: unknown product, account mismatch, unreachable, not signed in")
    func serverFailures() async throws {
        let refusing = ScriptedServer { request in
            let body = try? sentBody(OrderRequest.self, request)
            return body?.productId == "p.gone"
                ? (404, ["error": ["code": "unknown_product", "message": "no product p.gone in the catalog", "class": "final"]])
                : (409, ["error": ["code": "account_mismatch", "message": "the token is another account's", "class": "final"]])
        }
        let lines = LogLines()
        let client = PurchaseClient(store: MemoryStore(), server: refusing.client(), journal: try Self.journal(), accountId: "ann", log: .custom(lines.add))
        guard case .failed(let unknown) = await client.purchase("p.gone") else { Issue.record("bought"); return }
        #expect(unknown.code == .unknownProduct && unknown.message == "no product p.gone in the catalog")
        guard case .failed(let mismatch) = await client.purchase("p.coins") else { Issue.record("bought"); return }
        #expect(mismatch.code == .accountMismatch && !mismatch.message.contains("{"))
        #expect(lines.all.contains { $0.contains("\"account_mismatch\"") }, "the raw answer goes to the debug log")

        struct Transport: Error, CustomStringConvertible { var description: String { "NSURLErrorDomain -1009 curl: (7) Failed to connect" } }
        let unreachable = PurchaseServerClient(baseURL: URL(string: "https://purchases.example")!, token: { "t" }) { _ in throw Transport() }
        let offline = PurchaseClient(store: MemoryStore(), server: unreachable, journal: try Self.journal(), accountId: "ann")
        guard case .failed(let network) = await offline.purchase("p.coins") else { Issue.record("bought"); return }
        #expect(network.code == .networkUnreachable && !network.message.contains("curl"))

        let signedOut = PurchaseClient(store: MemoryStore(), server: Self.granting().client(), journal: try Self.journal())
        await #expect { try await signedOut.entitlements() } throws: { ($0 as? PurchaseFailure)?.code == .notSignedIn }
    }

    @Test("logIn(_:token:) switches the account and its token together and answers what it owns; the stream says not loaded, then loaded")
    func logInWithToken() async throws {
        // The server answers for the account whose token it gets.
        let server = ScriptedServer { request in
            let account = request.value(forHTTPHeaderField: "Authorization")?.replacingOccurrences(of: "Bearer token-", with: "") ?? "?"
            return (200, ScriptedServer.entitlements(account, ["premium"]))
        }
        let client = PurchaseClient(store: MemoryStore(), server: server.client(), journal: try Self.journal())
        #expect(client.entitlementsState == .signedOut)
        let states = client.entitlementUpdates
        let seen = Task {
            var all: [EntitlementsState] = []
            for await state in states {
                all.append(state)
                if state.entitlements?.accountId == "bea" { return all }
            }
            return all
        }
        let owned = try await client.logIn("bea", token: { "token-bea" })
        #expect(owned.accountId == "bea" && owned.has("premium"))
        #expect(await seen.value == [.signedOut, .notLoaded(accountId: "bea"), .loaded(owned)])
        // Another account with another token: never an answer for the first.
        #expect(try await client.logIn("cat", token: { "token-cat" }).accountId == "cat")
        // A token of another account than the one signed in: refused, typed, nothing shown, and nobody stays signed in
        // with it (every order and upload would be refused).
        await #expect { try await client.logIn("dan", token: { "token-eve" }) } throws: { ($0 as? PurchaseFailure)?.code == .accountMismatch }
        #expect(client.entitlementsState == .signedOut)
        #expect(await client.accountId == nil)
    }

    @Test("start() publishes what the signed-in account owns without the app asking")
    func publishedAtStart() async throws {
        let client = PurchaseClient(store: MemoryStore(), server: Self.granting().client(), journal: try Self.journal(), accountId: "ann")
        #expect(client.entitlementsState == .notLoaded(accountId: "ann"))
        await client.start()
        await client.waitForBackgroundWork()
        #expect(client.entitlementsState.entitlements?.balances["coins"] == 10)
        await client.stop()
    }

    @Test("A promoted purchase's win-back offer is journaled with it: after a relaunch the payment redeems it")
    func winBackSurvivesRelaunch() async throws {
        let journal = try Self.journal()
        let first = PurchaseClient(store: MemoryStore(), server: Self.granting().client(), journal: journal, accountId: "ann")
        #expect(await first.handlePromotedPurchase(PromotedPurchase(productId: "p.monthly", winBackOfferId: "comeback")) == nil)
        // The app dies; the next launch is ready for promoted purchases.
        let store = MemoryStore()
        let relaunched = PurchaseClient(store: store, server: Self.granting().client(), journal: journal, accountId: "ann")
        let outcomes = await relaunched.readyForPromotedPurchases()
        #expect(outcomes.count == 1)
        #expect(await store.purchaseRequests.map(\.winBackOfferId) == ["comeback"])
    }

    @Test("Where the store offers its signed history (Transaction.all), syncReceipt sends it, not the deprecated receipt")
    func historyOverReceipt() async throws {
        let store = MemoryStore()
        await store.setReceipt("MIIreceipt")
        let old = try MemoryStore.transaction(id: "42", productId: "p.premium", appAccountToken: nil)
        await store.setHistory([old])
        let server = Self.granting()
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "ann")
        #expect(try await client.syncReceipt()?.accountId == "ann")
        let restored = try #require(server.requests.first { $0.url?.path.hasSuffix("v1/restore") == true })
        #expect(try sentBody(RestoreRequest.self, restored).signedTransactions == [old.signedTransaction])
        #expect(!server.requests.contains { String(decoding: $0.httpBody ?? Data(), as: UTF8.self).contains("MIIreceipt") })
    }

    @Test("The delivery queue wakes when a retry falls due and sleeps while nothing is due, instead of polling every second")
    func queueWakesOnDue() async throws {
        let down = Flag(true)
        let server = ScriptedServer { request in
            if request.url?.path.hasSuffix("v1/orders") == true {
                return (201, ["orderId": "o1", "productId": "p.coins", "appAccountToken": UUID().uuidString, "expiresAt": ScriptedServer.orderExpiry])
            }
            if down.value { return (503, ["error": ["code": "storage", "message": "restarting", "class": "retry"]]) }
            return (200, ["outcome": "granted", "entitlements": ScriptedServer.entitlements("ann", coins: 10)])
        }
        let store = MemoryStore()
        let lines = LogLines()
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "ann",
                                    retryDelays: [.milliseconds(150)], log: .custom(lines.add))
        await client.start()
        guard case .paidPendingDelivery = await client.purchase("p.coins") else { Issue.record("expected a pending delivery"); return }
        down.value = false
        let started = ContinuousClock.now
        while await store.finished.isEmpty, ContinuousClock.now - started < .seconds(90) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(await store.finished.count == 1, "delivered once the backoff ended; the SDK's log: \(lines.all.suffix(30))")
        // Nothing is due now: the queue sleeps (a poll would look twice in 2.5 s).
        try await Task.sleep(for: .milliseconds(300))
        let looks = await client.deliveryQueueLooks
        try await Task.sleep(for: .milliseconds(2500))
        #expect(await client.deliveryQueueLooks == looks, "the idle queue does not look again")
        await client.stop()
    }

    @Test("After logOut(), the token logIn(_:token:) gave is dropped: a payment nothing names the payer of waits for a sign-in instead of going up as the account that left, and nothing is shown")
    func logOutDropsToken() async throws {
        let server = Self.grantingByToken()
        let store = MemoryStore()
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(), journal: journal)
        _ = try await client.logIn("ann", token: { "token-ann" })
        await client.logOut()
        let requestsBefore = server.requests.count
        // An offer code redeemed (or a purchase from another device) arrives while nobody is signed in.
        let arriving = try MemoryStore.transaction(id: "777", productId: "p.premium", appAccountToken: nil)
        await store.add(arriving)
        #expect(await client.resume() == 0)
        #expect(server.requests.count == requestsBefore, "nothing was sent under Ann's token")
        #expect(await store.finished.isEmpty)
        #expect(try journal.entries().contains { $0.transactionId == "777" })
        #expect(client.entitlementsState == .signedOut)
        await #expect { try await client.restore() } throws: { ($0 as? PurchaseFailure)?.code == .notSignedIn }
        // Nor is anything ordered or paid while nobody is signed in: the payment would go to whoever signs in next.
        guard case .failed(let signedOut) = await client.purchase("p.coins") else { Issue.record("bought while signed out"); return }
        #expect(signedOut.code == .notSignedIn)
        let paymentsAsked = await store.purchaseRequests
        #expect(server.requests.count == requestsBefore && paymentsAsked.isEmpty)
        #expect(await client.storeViewOrder(for: "p.coins") == nil)
        // Bea signs in: it is hers.
        _ = try await client.logIn("bea", token: { "token-bea" })
        await client.waitForBackgroundWork()
        #expect(await store.finished == ["777"])
    }

    @Test("A refusal is not an outage: a 4xx to the entitlements call is rejectedByServer (no offline copy hides it); no HTTP answer or a redirect is serverUnavailable")
    func refusalIsNotOutage() async throws {
        for (status, code) in [(403, PurchaseFailure.Code.rejectedByServer), (404, .rejectedByServer), (302, .serverUnavailable), (0, .serverUnavailable),
                               (502, .serverUnavailable), (401, .tokenRejected)] {
            let server = ScriptedServer { _ in (status, ["error": ["code": "forbidden", "message": "no", "class": "operator"]]) }
            let client = PurchaseClient(store: MemoryStore(), server: server.client(), journal: try Self.journal(), accountId: "ann")
            await #expect { try await client.entitlements() } throws: { ($0 as? PurchaseFailure)?.code == code }
        }
    }

    @Test("A long history goes in parts: no restore request carries more than 50 signed transactions")
    func historyInParts() async throws {
        let store = MemoryStore()
        await store.setHistory(try (1...120).map { try MemoryStore.transaction(id: String($0), productId: "p.monthly", appAccountToken: nil) })
        let server = Self.granting()
        let client = PurchaseClient(store: store, server: server.client(), journal: try Self.journal(), accountId: "ann")
        _ = try await client.syncReceipt()
        let parts = try server.requests.filter { $0.url?.path.hasSuffix("v1/restore") == true }.map { try sentBody(RestoreRequest.self, $0).signedTransactions?.count ?? 0 }
        #expect(parts == [50, 50, 20])
    }

    @Test("A second tap on the App Store for a held product keeps the first, in memory and in the journal alike")
    func secondPromotedTap() async throws {
        let journal = try Self.journal()
        let client = PurchaseClient(store: MemoryStore(), server: Self.granting().client(), journal: journal, accountId: "ann")
        _ = await client.handlePromotedPurchase(PromotedPurchase(productId: "p.monthly", winBackOfferId: "first"))
        _ = await client.handlePromotedPurchase(PromotedPurchase(productId: "p.monthly", winBackOfferId: "second"))
        #expect(try journal.entries().filter { $0.kind == .promoted }.map(\.winBackOfferId) == ["first"])
    }

    @Test("Relaunched signed out with a payment nothing names the payer of, backed off in the earlier launch: the sign-in uploads it at once, not when its old backoff ends")
    func ownerlessAtSignIn() async throws {
        let journal = try Self.journal()
        let paid = try MemoryStore.transaction(id: "4242", productId: "p.premium", appAccountToken: nil)
        var entry = JournalEntry(kind: .paid, orderId: nil, productId: "p.premium", appAccountToken: nil, transactionId: "4242",
                                 signedTransaction: paid.signedTransaction, attempts: 4)
        entry.nextAttemptAt = Date().addingTimeInterval(3600)
        try journal.write(entry)
        let store = MemoryStore()
        await store.add(paid)
        let client = PurchaseClient(store: store, server: Self.grantingByToken().client(), journal: journal)
        await client.start()
        #expect(await store.finished.isEmpty, "nobody signed in: it waits")
        let owned = try await client.logIn("ann", token: { "token-ann" })
        #expect(owned.has("premium"))
        #expect(await store.finished == ["4242"])
        await client.stop()
    }

    @Test("A promoted purchase released while nobody is signed in stays held for the next launch (nothing was ordered)")
    func promotedWhileSignedOut() async throws {
        let journal = try Self.journal()
        let client = PurchaseClient(store: MemoryStore(), server: Self.granting().client(), journal: journal)
        _ = await client.handlePromotedPurchase(PromotedPurchase(productId: "p.monthly", winBackOfferId: "back"))
        let outcomes = await client.readyForPromotedPurchases()
        guard case .failed(let failure) = outcomes.first else { Issue.record("\(outcomes)"); return }
        #expect(failure.code == .notSignedIn)
        #expect(try journal.entries().contains { $0.kind == .promoted && $0.winBackOfferId == "back" })
    }

    @Test("Products carry a display price and Apple's product type")
    func displayPrice() {
        let product = StoreProduct(productId: "m", type: .autoRenewableSubscription, displayName: "Pro", price: 4990, currency: "USD")
        #expect(StoreProduct.format(price: 4990, currency: "USD", locale: Locale(identifier: "en_US")) == "$4.99")
        #expect(!product.displayPrice.isEmpty)
        #expect(product.type == .autoRenewableSubscription)
    }

    @Test("A StoreKit view's purchase is bound to an order: its token comes from the SDK, and its completion is journaled and delivered as any purchase")
    func storeViewBinding() async throws {
        let store = MemoryStore()
        let server = Self.granting()
        let journal = try Self.journal()
        let client = PurchaseClient(store: store, server: server.client(), journal: journal, accountId: "ann")
        let token = try #require(await client.storeViewOrder(for: "p.coins"))
        #expect(try journal.entries().contains { $0.kind == .intent && $0.appAccountToken == token }, "the intent is journaled before the sheet")
        // The view pays with the options the SDK gave it.
        let paid = try await store.purchase(StorePurchaseRequest(productId: "p.coins", appAccountToken: token))
        guard case .granted = await client.storeViewPurchaseCompleted(productId: "p.coins", result: .success(paid)) else { Issue.record("not granted"); return }
        let upload = try #require(server.requests.first { $0.url?.path.hasSuffix("v1/purchases") == true })
        #expect(try sentBody(PurchaseRequest.self, upload).orderId != nil, "uploaded with the order the view's token belongs to")
        #expect(try journal.entries().isEmpty)
        #expect(await store.finished.count == 1)
        // A sheet the customer closed: nothing charged, the end is told.
        #expect(await client.storeViewPurchaseCompleted(productId: "p.coins", result: .failure(StoreError.userCancelled)) == .cancelled)
    }
}

/// Lines the SDK's debug log wrote.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var all: [String] { lock.withLock { lines } }
    @Sendable func add(_ line: String) { lock.withLock { lines.append("\(Date().timeIntervalSince1970) \(line)") } }
}
