import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
@testable import IAPKit
import PurchaseServer
import StoreSimulator
import Testing

/// A journal on disk that can be made to refuse, as a full disk or a locked keychain does.
struct FlakyJournal: PurchaseJournal {
    let inner: FileJournal
    /// Every write (and remove) throws while set.
    let refuseWrites = Shared(false)
    /// Only writes of paid entries throw while set (the intent before the payment still goes in).
    let refusePaidWrites = Shared(false)

    struct Full: Error, CustomStringConvertible { var description: String { "no space left on device" } }

    func write(_ entry: JournalEntry) throws {
        if refuseWrites.value || (refusePaidWrites.value && entry.kind == .paid) { throw Full() }
        try inner.write(entry)
    }

    func remove(key: String) throws {
        if refuseWrites.value { throw Full() }
        try inner.remove(key: key)
    }

    /// Every read throws while set (a keychain item that cannot be decoded makes the whole listing fail).
    let refuseReads = Shared(false)

    func entries() throws -> [JournalEntry] {
        if refuseReads.value { throw Full() }
        return try inner.entries()
    }
}

/// Waits until `condition` holds, up to `seconds`; returns whether it did (a throwing check counts as not yet).
func eventually(_ seconds: Double = 30, _ condition: @Sendable () async throws -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return (try? await condition()) == true
}

/// The first element of `stream` within `seconds`, or nil.
func firstElement<Element: Sendable>(_ stream: AsyncStream<Element>, within seconds: Double = 2, where match: @escaping @Sendable (Element) -> Bool = { _ in true }) async -> Element? {
    await withTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream where match(element) { return element }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            return nil
        }
        let found = await group.next() ?? nil
        group.cancelAll()
        return found
    }
}

@Suite("PurchaseClient on the paths nobody scripted: account switches, fixable refusals, failing journals", .timeLimit(.minutes(3)))
struct PurchaseClientPathTests {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"

    /// The account's orders, open or granted.
    func orders(_ system: System, _ account: String) async throws -> [AdminOrder] {
        var all: [AdminOrder] = []
        for state in ["created", "granted"] {
            all += try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=\(state)").1).orders
        }
        return all.filter { $0.accountId == account }
    }

    // MARK: 1. Account switch

    @Test("Account switch: A pays and the upload fails; B signs in on the same device: B gets nothing and A's payment stays unfinished; A signs in again and has it once")
    func accountSwitch() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-family"])
            let ann = try App.launch(system, account: "ann", storeAccount: "store-family", retryDelays: [.seconds(30)])
            await ann.client.setCheckpointObserver { [offline = ann.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery(let transactionId) = await ann.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }
            #expect(ann.journalEntries.first { $0.kind == .paid }?.accountId == "ann", "the entry says who ordered it")

            // The same device, B signs in (a new launch on the same journal and the same Apple ID).
            let bea = try App.launch(system, account: "bea", storeAccount: "store-family", journal: ann.journalDirectory)
            let events = bea.client.events
            let waiting = Task { await firstElement(events, within: 30) { if case .waitingForAccount(_, transactionId, "ann") = $0 { true } else { false } } }
            _ = await bea.client.start()
            await bea.client.waitForBackgroundWork()
            try await Task.sleep(for: .milliseconds(400))
            await bea.client.stop()
            #expect(await waiting.value != nil, "B's app knows a payment waits for another account")
            #expect(bea.serverCalls.value == 1, "B's app asked what B owns, once, and never sent A's payment to the server under B's account")
            #expect(bea.client.entitlementsState.entitlements?.accountId == "bea", "what B owns is loaded at launch without the app asking")
            #expect(try await system.entitlements("bea").balance("coins") == nil, "B got nothing")
            #expect(try await bea.store.unfinished().map(\.transactionId) == [transactionId], "A's payment is not finished under B")
            #expect(bea.journalEntries.contains { $0.transactionId == transactionId }, "A's entry waits in the journal")

            // A launches again.
            let back = try App.launch(system, account: "ann", storeAccount: "store-family", journal: ann.journalDirectory)
            #expect(await back.client.start() == 1)
            #expect(try await system.entitlements("ann").balance("coins") == 100, "A has it once")
            #expect(try await system.entitlements("bea").balance("coins") == nil, "B still nothing")
            #expect(try await back.store.unfinished().isEmpty)
            #expect(back.journalEntries.isEmpty)
            await back.client.stop()
        }
    }

    @Test("Switching accounts in one process clears what the previous account saw and uploads its payment only when it signs back in")
    func accountSwitchInProcess() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-home"])
            let app = try App.launch(system, account: "cat", storeAccount: "store-home", retryDelays: [.milliseconds(100)])
            await app.client.start()
            guard case .granted = await app.client.purchase(Self.premium) else { Issue.record("premium not granted"); return }
            #expect(await app.client.currentEntitlements?.has("premium") == true)
            // Cat pays for coins, the upload fails; then Dan signs in on the device.
            await app.client.setCheckpointObserver { [offline = app.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery = await app.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }
            await app.client.setCheckpointObserver(nil)
            await app.signIn("dan")
            app.offline.value = false
            #expect(await app.client.currentEntitlements == nil, "Cat's entitlements are gone from memory")
            let shown = await firstElement(app.client.entitlementUpdates)
            #expect(shown == .notLoaded(accountId: "dan"), "a new subscriber sees nothing of Cat's: Dan's are not loaded yet")
            // Dan has nothing of his own to upload: any call now would be Cat's payment sent under Dan's account. The
            // retrier ticks every second and Cat's entry is due, so 1.5 s would see it.
            let callsAsDan = app.serverCalls.value
            try await Task.sleep(for: .milliseconds(1500))
            #expect(app.serverCalls.value == callsAsDan, "Cat's payment is not uploaded under Dan's account")
            #expect(try await system.entitlements("dan").balance("coins") == nil)
            #expect(try await system.entitlements("cat").balance("coins") == nil, "not delivered while Cat is away")
            #expect(try await app.store.unfinished().count == 1)
            await app.signIn("cat")
            #expect(await eventually { try await system.entitlements("cat").balance("coins") == 100 })
            #expect(await eventually { try await app.store.unfinished().isEmpty })
            #expect(try await system.entitlements("dan").balance("coins") == nil)
            await app.client.stop()
        }
    }

    @Test("Reinstalled, then another account signs in: the store's unfinished transaction (its account unknown on the device) is uploaded by B, delivered to A's order by the server, finished, and B is shown nothing")
    func deliveredToOwnerAfterReinstall() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-shared"])
            let ann = try App.launch(system, account: "ann", storeAccount: "store-shared")
            await ann.client.setCheckpointObserver { [offline = ann.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery = await ann.client.purchase(Self.premium) else { Issue.record("expected a pending delivery"); return }
            // The app is deleted (its journal with it) and reinstalled; B signs in first.
            let bea = try App.launch(system, account: "bea", storeAccount: "store-shared")
            let events = bea.client.events
            let delivered = Task { await firstElement(events, within: 30) { if case .deliveredToOwner = $0 { true } else { false } } }
            #expect(await bea.client.start() == 0, "nothing granted to B")
            #expect(await delivered.value != nil, "B's app is told it went to its owner")
            #expect(await eventually { try await bea.store.unfinished().isEmpty }, "finished: it reached its owner")
            #expect(try await system.entitlements("ann").entitlementNames == ["premium"], "A has it")
            #expect(try await system.entitlements("bea").entitlementNames.isEmpty, "B has nothing")
            #expect(await bea.client.currentEntitlements?.has("premium") != true)
            #expect(bea.journalEntries.isEmpty)
            await bea.client.stop()
        }
    }

    // MARK: 2. Refusals an operator can fix

    @Test("Server misconfigured at upload time (wrong bundle id): paid, reported as delayed, left unfinished; fixed later, granted once")
    func operatorRefusal() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-oli"])
            let journal = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            try await system.withServer(bundleId: "com.example.another-app") { misconfigured in
                let app = try App.launch(system, account: "oli", storeAccount: "store-oli", journal: journal, serverURL: misconfigured,
                                         retryDelays: [.seconds(30)])
                let events = app.client.events
                let delayed = Task { await firstElement(events, within: 30) { if case .deliveryDelayed = $0 { true } else { false } } }
                let outcome = await app.client.purchase(Self.coins)
                guard case .paidDeliveryDelayed(_, let reason) = outcome else { Issue.record("expected a delayed delivery, got \(outcome)"); return }
                #expect(reason.hasPrefix("wrong_bundle"))
                #expect(await delayed.value != nil, "the app is told: paid — we will deliver it")
                #expect(try await app.store.unfinished().count == 1, "not finished")
                #expect(app.journalEntries.filter { $0.kind == .paid }.count == 1, "still journaled")
                // The refusal says what it is.
                let jws = try #require(app.journalEntries.first { $0.kind == .paid }?.signedTransaction)
                var request = URLRequest(url: misconfigured.appendingPathComponent("v1/purchases"))
                request.httpMethod = "POST"
                request.setValue("Bearer \(try await system.token("oli"))", forHTTPHeaderField: "Authorization")
                request.httpBody = try encodeRequest(PurchaseRequest(signedTransaction: jws))
                let (data, _) = try await URLSession.shared.data(for: request)
                #expect(try decode(ErrorBody.self, data).error.class?.rawValue == "operator")
            }
            // The operator fixes the deploy; the app launches against the fixed server.
            let fixed = try App.launch(system, account: "oli", storeAccount: "store-oli", journal: journal)
            #expect(await fixed.client.start() == 1)
            #expect(try await system.entitlements("oli").balance("coins") == 100)
            #expect(try await fixed.store.unfinished().isEmpty)
            #expect(fixed.journalEntries.isEmpty)
            await fixed.client.stop()
            let again = try App.launch(system, account: "oli", storeAccount: "store-oli", journal: journal)
            #expect(await again.client.start() == 0)
            #expect(try await system.entitlements("oli").balance("coins") == 100, "granted once")
        }
    }

    @Test("Every refusal carries its class: a forged signature and another account's transaction are final; an undecodable proof and a configuration are the operator's")
    func refusalClassesOverHTTP() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-zoe"])
            func refusal(_ body: [String: String], as account: String) async throws -> (code: String?, class: String?) {
                let error = try? decode(ErrorBody.self, await system.call(.post, "/v1/purchases", as: account, body).1).error
                return (error?.code.rawValue, error?.class?.rawValue)
            }
            // Not decodable: perhaps Apple's own after a change, so the device keeps it for the operator.
            let malformed = try await refusal(["signedTransaction": "not.a.jws"], as: "zoe")
            #expect(malformed == ("malformed", "operator"), "\(malformed)")
            let (_, purchase, reply) = try await system.buy(Self.coins, account: "zoe", storeAccount: "store-zoe")
            #expect(reply?.outcome == .granted)
            let jws = try #require(purchase.signedTransaction)
            // Flip one character of the signature: forged.
            var forged = Array(jws)
            forged[forged.count - 5] = forged[forged.count - 5] == "A" ? "B" : "A"
            let badSignature = try await refusal(["signedTransaction": String(forged)], as: "zoe")
            #expect(badSignature == ("bad_signature", "final"))
            // Paid without an order (no token naming one): the first account to present it owns it, and another
            // account presenting it is refused for good.
            let orderless = try await system.storePurchase(["account": "store-zoe", "device": "phone", "productId": Self.coins,
                                                            "appAccountToken": UUID().uuidString])
            let orderlessJWS = try #require(orderless.signedTransaction)
            #expect(try await system.call(.post, "/v1/purchases", as: "zoe", PurchaseRequest(signedTransaction: orderlessJWS)).0 == .ok)
            let replay = try await refusal(["signedTransaction": orderlessJWS], as: "mallory")
            #expect(replay == ("transaction_bound_elsewhere", "final"))
            // With Zoe's order in its token, it is delivered to Zoe whoever uploads it: not a refusal at all.
            #expect(try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: "mallory", PurchaseRequest(signedTransaction: jws)).1).outcome == .deliveredToOwner)
            let unknownOrder = try await refusal(["signedTransaction": jws, "orderId": "no-such-order"], as: "zoe")
            #expect(unknownOrder == ("order_not_found", "operator"))
        }
    }

    // MARK: 3. A journal that fails

    @Test("A journal that refuses the paid entry: its own outcome, nothing finished undelivered, delivered from memory and the store's queue once the server answers")
    func journalRefusesPaidEntry() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-pat"])
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            let journal = FlakyJournal(inner: try FileJournal(directory: directory))
            journal.refusePaidWrites.value = true
            let app = try App.launch(system, account: "pat", storeAccount: "store-pat", journal: directory, retryDelays: [.seconds(1)],
                                     journalOverride: journal)
            await app.client.start()
            await app.client.setCheckpointObserver { [offline = app.offline] point in if point == .afterPayment { offline.value = true } }
            let outcome = await app.client.purchase(Self.coins)
            guard case .paidNotJournaled = outcome else { Issue.record("expected paidNotJournaled, got \(outcome)"); return }
            #expect(try await app.store.unfinished().count == 1, "nothing finished undelivered")
            app.offline.value = false
            #expect(await eventually(30) { try await system.entitlements("pat").balance("coins") == 100 }, "retried while the app runs")
            #expect(await eventually { try await app.store.unfinished().isEmpty })
            try await Task.sleep(for: .milliseconds(1500))
            #expect(try await system.entitlements("pat").balance("coins") == 100, "once")
            await app.client.stop()
        }
    }

    @Test("A journal that fails after the payment was journaled: backoff holds without it (no upload storm), and a failed remove after the grant uploads nothing more")
    func journalFailsAfterwards() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-quinn"])
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            let journal = FlakyJournal(inner: try FileJournal(directory: directory))
            let app = try App.launch(system, account: "quinn", storeAccount: "store-quinn", journal: directory, retryDelays: [.seconds(10)],
                                     journalOverride: journal)
            await app.client.start()
            await app.client.setCheckpointObserver { [offline = app.offline, refuse = journal.refuseWrites] point in
                if point == .afterPayment { offline.value = true }
                if point == .afterJournal { refuse.value = true }
            }
            guard case .paidPendingDelivery = await app.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }
            let callsAfterFailure = app.serverCalls.value
            try await Task.sleep(for: .milliseconds(3000))
            #expect(app.serverCalls.value == callsAfterFailure, "no upload before the backoff ends, though the journal refused the reschedule")
            #expect(try await app.store.unfinished().count == 1)
            app.offline.value = false
            #expect(await eventually(30) { try await system.entitlements("quinn").balance("coins") == 100 })
            #expect(await eventually { try await app.store.unfinished().isEmpty })
            // The remove failed: the entry is still there, but nothing uploads it again.
            #expect(app.journalEntries.contains { $0.kind == .paid })
            let callsAfterGrant = app.serverCalls.value
            try await Task.sleep(for: .milliseconds(2500))
            #expect(app.serverCalls.value == callsAfterGrant, "a granted entry is not uploaded again")
            journal.refuseWrites.value = false
            #expect(await eventually(30) { !app.journalEntries.contains { $0.kind == .paid } }, "removed once the journal recovers")
            await app.client.stop()
        }
    }

    // MARK: 4. A granted entry never comes back

    @Test("A retry working from an older read of the journal neither uploads a granted transaction again nor writes its entry back")
    func staleSnapshot() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-ray"])
            let app = try App.launch(system, account: "ray", storeAccount: "store-ray")
            guard case .purchased(let transaction) = try await app.store.purchase(StorePurchaseRequest(productId: Self.coins, appAccountToken: UUID())) else {
                Issue.record("not sold"); return
            }
            let entry = JournalEntry(kind: .paid, orderId: nil, productId: Self.coins, appAccountToken: transaction.appAccountToken,
                                     transactionId: transaction.transactionId, signedTransaction: transaction.signedTransaction, accountId: "ray")
            try FileJournal(directory: app.journalDirectory).write(entry)
            let stale = try #require(app.journalEntries.first)
            guard case .granted = await app.client.upload(stale) else { Issue.record("not granted"); return }
            #expect(app.journalEntries.isEmpty)
            app.offline.value = true
            let calls = app.serverCalls.value
            _ = await app.client.upload(stale)
            #expect(app.journalEntries.isEmpty, "the granted entry did not come back")
            #expect(app.serverCalls.value == calls, "and was not uploaded again")
        }
    }

    // MARK: 5. The listener first

    @Test("start() listens first: an Ask to Buy approval is delivered while a slow resume is still running")
    func listenerFirst() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-sam", "askToBuy": true])
            let journal = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            let first = try App.launch(system, account: "sam", storeAccount: "store-sam", journal: journal)
            #expect(await first.client.purchase(Self.premium) == .pendingApproval)
            // A paid transaction waits in the journal: its upload at the next launch will be slow.
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-sam", "askToBuy": false])
            await first.client.setCheckpointObserver { [offline = first.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery = await first.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }

            // The next launch: the first call to the server (the resume's upload) takes 15 s (long, so that a loaded
            // machine running the whole suite still delivers the approval well inside it).
            let next = try App.launch(system, account: "sam", storeAccount: "store-sam", journal: journal,
                                      tokenDelay: { call in call == 1 ? .seconds(15) : nil })
            let started = Shared(false)
            let launch = Task {
                let resumed = await next.client.start()
                started.value = true
                return resumed
            }
            try await Task.sleep(for: .milliseconds(300))
            let pending = try #require(await system.engine.pendingRequestIds().first)
            _ = try await system.device(.post, "/sim/requests/\(pending)/approve")
            #expect(await eventually(14) { try await system.entitlements("sam").entitlementNames.contains("premium") })
            #expect(!started.value, "delivered before start() finished its resume")
            #expect(await launch.value >= 1)
            #expect(await eventually { try await system.entitlements("sam").balance("coins") == 100 })
            await next.client.stop()
        }
    }

    // MARK: 6. Multicast streams

    @Test("Two subscribers each get every update, and a late subscriber starts with the current entitlements")
    func multicast() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-tia"])
            let app = try App.launch(system, account: "tia", storeAccount: "store-tia")
            let (updatesOne, updatesTwo, streamOne, streamTwo) = (app.client.entitlementUpdates, app.client.entitlementUpdates, app.client.events, app.client.events)
            let one = Task { await firstElement(updatesOne, within: 30) { $0.entitlements?.balances["coins"] == 100 } }
            let two = Task { await firstElement(updatesTwo, within: 30) { $0.entitlements?.balances["coins"] == 100 } }
            let eventsOne = Task { await firstElement(streamOne, within: 30) { if case .granted = $0 { true } else { false } } }
            let eventsTwo = Task { await firstElement(streamTwo, within: 30) { if case .granted = $0 { true } else { false } } }
            guard case .granted = await app.client.purchase(Self.coins) else { Issue.record("not granted"); return }
            #expect(await one.value != nil)
            #expect(await two.value != nil)
            #expect(await eventsOne.value != nil)
            #expect(await eventsTwo.value != nil)
            let late = await firstElement(app.client.entitlementUpdates, within: 1)
            #expect(late?.entitlements?.balances["coins"] == 100, "a late subscriber gets the current value at once")
        }
    }

    // MARK: 7. Promoted purchases, one order per product

    @Test("Two purchase() calls for one product while the first runs: one order, one payment, one outcome")
    func oneOrderPerProduct() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-uma"])
            let app = try App.launch(system, account: "uma", storeAccount: "store-uma")
            async let first = app.client.purchase(Self.coins)
            async let second = app.client.purchase(Self.coins)
            let (a, b) = await (first, second)
            guard case .granted = a, case .granted = b else { Issue.record("\(a) \(b)"); return }
            #expect(try await orders(system, "uma").count == 1)
            #expect(try await system.entitlements("uma").balance("coins") == 100)
        }
    }

    @Test("A promoted purchase held before the app was ready survives a relaunch and is bought once the app is ready")
    func promotedSurvivesRelaunch() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-val"])
            let journal = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            let first = try App.launch(system, account: "val", storeAccount: "store-val", journal: journal)
            await first.client.start()
            first.store.promote(Self.premium)
            #expect(await eventually { first.journalEntries.contains { $0.kind == .promoted } })
            await first.client.stop()
            // The app dies before it was ready; the next launch is.
            let next = try App.launch(system, account: "val", storeAccount: "store-val", journal: journal)
            await next.client.start()
            let outcomes = await next.client.readyForPromotedPurchases()
            guard outcomes.count == 1, case .granted(let owned) = outcomes[0] else { Issue.record("\(outcomes)"); return }
            #expect(owned.has("premium"))
            #expect(!next.journalEntries.contains { $0.kind == .promoted })
            await next.client.stop()
        }
    }

    // MARK: Offline entitlements

    @Test("Offline: the last entitlements granted are served from the device without balances, marked cached, and only to their account")
    func offlineEntitlements() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-wes"])
            let cacheDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
            let app = try App.launch(system, account: "wes", storeAccount: "store-wes", cache: try FileEntitlementsCache(directory: cacheDirectory))
            guard case .granted = await app.client.purchase(Self.premium), case .granted = await app.client.purchase(Self.coins) else {
                Issue.record("not granted"); return
            }
            // A later launch, with no network.
            let offline = try App.launch(system, account: "wes", storeAccount: "store-wes", cache: try FileEntitlementsCache(directory: cacheDirectory))
            offline.offline.value = true
            let served = try await offline.client.entitlements()
            #expect(served.has("premium"))
            #expect(served.balances.isEmpty, "balances are not served offline")
            #expect(served.cachedAt != nil)
            await offline.signIn("xia")
            await #expect { try await offline.client.entitlements() } throws: { ($0 as? PurchaseFailure)?.isUnreachable == true }
            #expect(await offline.client.offlineEntitlements() == nil, "another account sees nothing of Wes's")
        }
    }

    // MARK: 8. Sign-in changes the SDK hears of late

    @Test("An upload whose token turns out to be another account's than the payer's is refused (409 account_mismatch) before anything is stored; the payment waits and reaches its owner once the token is theirs")
    func tokenOfAnotherAccount() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-shared"])
            // Backoff long enough that only a sign-in can bring the payment back within the test.
            let app = try App.launch(system, account: "ann", storeAccount: "store-shared", retryDelays: [.seconds(600)])
            await app.client.setCheckpointObserver { [offline = app.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery(let transactionId) = await app.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }
            await app.client.setCheckpointObserver(nil)
            // The order id is gone from the entry (as after an order_not_found): only the payment's token binds it.
            let journal = try FileJournal(directory: app.journalDirectory)
            var entry = try #require(try journal.entries().first { $0.kind == .paid })
            entry.orderId = nil
            try journal.write(entry)
            // The app's sign-in moved to Bea, and the SDK has not been told yet when the retry fetches its token.
            app.account.value = "bea"
            app.offline.value = false
            await app.client.retryDue(owner: "ann")   // the retry timer, as if its backoff had passed
            #expect(app.serverCalls.value > 0, "the upload went out, with Bea's token")
            #expect(try await system.admin(.get, "/admin/transactions/\(transactionId)").0 == .notFound, "nothing of it was stored")
            #expect(try await system.entitlements("bea").balance("coins") == nil)
            #expect(try await system.entitlements("ann").balance("coins") == nil)
            #expect(try await app.store.unfinished().map(\.transactionId) == [transactionId], "not finished")
            #expect(app.journalEntries.contains { $0.transactionId == transactionId }, "still journaled")
            // The app tells the SDK of Bea, then Ann signs in again: her payment is tried at once, backoff or not.
            await app.signIn("bea")
            await app.client.waitForBackgroundWork()
            #expect(try await system.entitlements("bea").balance("coins") == nil)
            await app.signIn("ann")
            await app.client.waitForBackgroundWork()
            #expect(try await system.entitlements("ann").balance("coins") == 100)
            #expect(try await system.entitlements("bea").balance("coins") == nil)
            #expect(try await app.store.unfinished().isEmpty)
        }
    }

    @Test("The server refuses an upload or an order meant for another account than the token's, whatever the proof, and stores nothing")
    func expectedAccountRefused() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (ann, store) = try await system.customer("ann")
            let (order, purchase, _) = try await system.buy(Self.premium, account: ann, storeAccount: store, submit: false)
            let jws = try #require(purchase.signedTransaction)
            let id = try #require(purchase.transactionId)
            let (status, body) = try await system.call(.post, "/v1/purchases", as: "bea", PurchaseRequest(signedTransaction: jws, expectedAccountId: ann))
            let error = try decode(ErrorBody.self, body).error
            #expect(status == .conflict && error.code == "account_mismatch", "\(text(body))")
            #expect(error.class?.rawValue == "operator", "never final: the device keeps the payment")
            #expect(try await system.admin(.get, "/admin/transactions/\(id)").0 == .notFound)
            let (granted, reply) = try await system.call(.post, "/v1/purchases", as: ann,
                                                         PurchaseRequest(signedTransaction: jws, orderId: order.orderId, expectedAccountId: ann))
            #expect(try granted == .ok && (decode(PurchaseReply.self, reply).outcome) == .granted, "\(text(reply))")
            // An order meant for Ann, made with Bea's token (the app's sign-in changed while it fetched the token): refused,
            // and no order is made for either.
            let before = try await system.services.ledger.orders(.created).count
            let (ordered, refusal) = try await system.call(.post, "/v1/orders", as: "bea", ["productId": Self.premium, "expectedAccountId": ann])
            #expect(try ordered == .conflict && (errorCode(refusal)) == "account_mismatch", "\(text(refusal))")
            #expect(try await system.services.ledger.orders(.created).count == before)
            let (own, _) = try await system.call(.post, "/v1/orders", as: ann, ["productId": Self.premium, "expectedAccountId": ann])
            #expect(own == .created)
        }
    }

    @Test("A second tap for another quantity is a purchase of its own, not a ride on the one under way")
    func anotherQuantityDoesNotJoin() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-quinn"])
            let app = try App.launch(system, account: "quinn", storeAccount: "store-quinn")
            async let one = app.client.purchase(Self.coins, quantity: 1)
            async let two = app.client.purchase(Self.coins, quantity: 2)
            let (a, b) = await (one, two)
            guard case .granted = a, case .granted = b else { Issue.record("\(a) \(b)"); return }
            #expect(try await orders(system, "quinn").count == 2)
            #expect(try await system.entitlements("quinn").balance("coins") == 300)
        }
    }

    @Test("An answer that arrives after a sign-out is nobody's: not shown, not kept for offline use")
    func answerAfterSignOut() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-rae"])
            let slow = Shared(false)
            let app = try App.launch(system, account: "rae", storeAccount: "store-rae", tokenDelay: { _ in slow.value ? .milliseconds(500) : nil })
            guard case .granted = await app.client.purchase(Self.premium) else { Issue.record("premium not granted"); return }
            slow.value = true
            let asking = Task { try? await app.client.entitlements() }
            try await Task.sleep(for: .milliseconds(100))
            await app.client.logOut()
            let answered = await asking.value
            #expect(answered == nil, "the call refuses an answer for an account no longer signed in")
            #expect(await app.client.currentEntitlements == nil)
            #expect(await app.client.offlineEntitlements() == nil, "nothing of Rae's is served while nobody is signed in")
        }
    }

    @Test("Offline, the store's renewals extend only the account's own series and token: another account's purchase of the same subscription on the same Apple ID does not")
    func offlineOnlyOwnSeries() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-home2"])
            // Tom subscribes on the family's Apple ID; the server says which series and token grant it.
            let tom = try App.launch(system, account: "tom", storeAccount: "store-home2")
            guard case .granted(let owned) = await tom.client.purchase(Self.monthly) else { Issue.record("not granted"); return }
            let toms = try #require(owned.entitlements.first { $0.productId == Self.monthly })
            let series = try #require(toms.originalTransactionId)
            #expect(toms.appAccountToken != nil)
            // Sam's device copy: the same subscription (Apple keeps one series per group and Apple ID), expired, bought
            // through his own order once; and then the same copy as if it were Tom's own series and token.
            let cacheDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
            let cache = try FileEntitlementsCache(directory: cacheDirectory)
            func served(token: UUID?, productId: String = Self.monthly) async throws -> Entitlements? {
                let expired = Entitlements.Item(name: "pro", productId: productId, transactionId: "1", originalTransactionId: series,
                                                appAccountToken: token, expiresAt: Date().addingTimeInterval(-60), state: "active")
                try cache.save(CachedEntitlements(entitlements: Entitlements(accountId: "sam", entitlements: [expired]), cachedAt: Date().addingTimeInterval(-120)))
                let sam = try App.launch(system, account: "sam", storeAccount: "store-home2", cache: cache)
                sam.offline.value = true
                return await sam.client.offlineEntitlements()
            }
            #expect(try await served(token: UUID())?.has("pro") == false, "Tom's period does not extend Sam's expired copy")
            #expect(try await served(token: toms.appAccountToken)?.has("pro") == true, "a renewal of the account's own series does")
            #expect(try await served(token: toms.appAccountToken, productId: "com.example.iapkit.pro.yearly")?.has("pro") == false,
                    "a renewal into another product of the group (a downgrade) does not carry the entitlement granted for the old one")
        }
    }

    @Test("A journal that cannot be read is never written over: the paid entry keeps the account that paid while the store's queue is retried")
    func unreadableJournalKeepsOwner() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-uli"])
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
            let journal = FlakyJournal(inner: try FileJournal(directory: directory))
            let app = try App.launch(system, account: "uli", storeAccount: "store-uli", journal: directory, retryDelays: [.milliseconds(50)],
                                     journalOverride: journal)
            await app.client.setCheckpointObserver { [offline = app.offline] point in if point == .afterPayment { offline.value = true } }
            guard case .paidPendingDelivery(let transactionId) = await app.client.purchase(Self.coins) else { Issue.record("expected a pending delivery"); return }
            await app.client.setCheckpointObserver(nil)
            #expect(app.journalEntries.first { $0.transactionId == transactionId }?.accountId == "uli")
            // The journal cannot be read; the retrier falls back to the store's unfinished queue, still offline.
            journal.refuseReads.value = true
            try await Task.sleep(for: .milliseconds(100))
            await app.client.retryDue()
            journal.refuseReads.value = false
            let entry = try #require(app.journalEntries.first { $0.transactionId == transactionId }, "the entry is still there")
            #expect(entry.accountId == "uli", "the account that paid is kept")
            #expect(entry.orderId != nil, "and the order")
            app.offline.value = false
            #expect(await eventually {
                await app.client.retryDue()
                return try await system.entitlements("uli").balance("coins") == 100
            })
        }
    }
}
