import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

/// Sequences an adversarial review found breaking the promise (each failed before its fix), kept as regressions.
@Suite("Races and hostile ids: one series never split across accounts, no credit lost, no account aliased")
struct RaceTests {
    func attempt<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    @Test("Two replicas spend one balance at once: 30 spends of 10 from 100 coins, 10 done, the rest refused as short; 10 of one key, one movement",
          arguments: StoreKind.allCases)
    func spendsRaceAcrossReplicas(_ kind: StoreKind) async throws {
        let first = try await makeLedger(kind)
        // A second replica on the same database (SQLite: the same file, another store).
        let second: Ledger
        switch kind {
        case .sqlite: second = Ledger(store: try SQLiteLedgerStore(path: try #require((first.store as? SQLiteLedgerStore)?.path)), catalog: .demo)
        case .postgres: second = try await makeLedger(.postgres)
        }
        let account = uniqueId("spender-")
        _ = try await first.submit(.init(accountId: account, transaction: transaction(Demo.coins, type: .consumable)))
        // `count` spends at once, alternately through each replica; `key` names each spend's idempotency key.
        func race(_ count: Int, amount: Int64, key: @escaping @Sendable (Int) -> String) async -> [Result<Int64, any Error>] {
            await withTaskGroup(of: Result<Int64, any Error>.self) { group in
                for index in 0..<count {
                    let ledger = index.isMultiple(of: 2) ? first : second
                    group.addTask { await attempt { try await ledger.spend(accountId: account, currency: "coins", amount: amount, idempotencyKey: key(index)) } }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        let results = await race(30, amount: 10) { "k\($0)" }
        let done = results.filter { if case .success = $0 { true } else { false } }.count
        let short = results.filter { if case .failure(let error) = $0 { (error as? LedgerError)?.code == .insufficientBalance } else { false } }.count
        #expect(done == 10 && short == 20, "\(results)")
        #expect(try await first.entitlements(accountId: account).balances["coins"] == 0)

        _ = try await second.submit(.init(accountId: account, transaction: transaction(Demo.coins, type: .consumable)))
        let repeats = await race(10, amount: 25) { _ in "same" }
        #expect(repeats.allSatisfy { if case .success = $0 { true } else { false } }, "\(repeats)")
        #expect(try await first.entitlements(accountId: account).balances["coins"] == 75, "one key, one movement")
    }

    @Test("An account id with a NUL is refused, and never reads or spends the account it would alias")
    func nulAccount() async throws {
        let ledger = try await makeLedger(.sqlite)
        let victim = uniqueId("victim-")
        let alias = victim + "\u{0}x"
        _ = try await ledger.submit(.init(accountId: victim, transaction: transaction(Demo.coins, type: .consumable)))
        await #expect(throws: LedgerError(.invalidInput, "")) { try await ledger.entitlements(accountId: alias) }
        await #expect(throws: LedgerError(.invalidInput, "")) {
            try await ledger.submit(.init(accountId: alias, transaction: transaction(Demo.coins, type: .consumable)))
        }
        await #expect(throws: LedgerError(.invalidInput, "")) {
            try await ledger.spend(accountId: alias, currency: "coins", amount: 50, idempotencyKey: "k")
        }
        #expect(try await ledger.entitlements(accountId: victim).balances["coins"] == 100)
        // Below the ledger too, text with a NUL is refused before any statement runs (PostgreSQL could not store it;
        // SQLite could, and would then answer differently): the same typed refusal on both stores.
        let store = try #require(ledger.store as? SQLiteLedgerStore)
        await #expect(throws: LedgerError(.invalidInput, "")) {
            try await store.write { sql in
                _ = try await sql.rows("INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at) VALUES ($1, 'a', 'b', $2, 'd', 0)",
                                       [.text(uniqueId()), .text("with\u{0}nul")])
            }
        }
    }

    @Test("Two periods of one series decided at once for two accounts: the second is decided again and refused (PostgreSQL)")
    func seriesSplitInterleaved() async throws {
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        let (a, b) = (uniqueId("acct-a-"), uniqueId("acct-b-"))
        let now = Date()
        let original = uniqueId()
        let t1 = try PurchaseRecord(transaction(Demo.monthly, id: original, type: .autoRenewableSubscription, purchased: now - 3600, expires: now - 60))
        let t2 = try PurchaseRecord(transaction(Demo.monthly, original: original, type: .autoRenewableSubscription, purchased: now - 60,
                                                expires: now + 3600))
        // Both decided on facts read before either is applied.
        let f1 = try LedgerSession.decodeFacts(try #require(try await fast.facts(LedgerSession.factsBinds(t1, namedOrderId: nil))))
        let f2 = try LedgerSession.decodeFacts(try #require(try await fast.facts(LedgerSession.factsBinds(t2, namedOrderId: nil))))
        let d1 = SubmissionRules.submit(t1, uploader: a, orderId: nil, source: .signedTransaction, facts: f1, catalog: ledger.catalog, now: now)
        let d2 = SubmissionRules.submit(t2, uploader: b, orderId: nil, source: .signedTransaction, facts: f2, catalog: ledger.catalog, now: now)
        _ = try await fast.apply(d1.effects, owner: a, events: true)
        await #expect(throws: LedgerRace.self) { try await fast.apply(d2.effects, owner: b, events: true) }
        #expect(try await ledger.purchases(accountId: b).isEmpty)
        await #expect(throws: LedgerError(.transactionBoundElsewhere, "")) {
            try await ledger.submit(.init(accountId: b, transaction: transaction(Demo.monthly, id: t2.transactionId, original: original,
                                                                                  type: .autoRenewableSubscription, purchased: now - 60, expires: now + 3600)))
        }
    }

    @Test("A migrated subscription decided while nobody held the series it continues, applied after an account took that series: decided again and refused (PostgreSQL)")
    func migratedSeriesTakenMeanwhile() async throws {
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        let (a, b) = (uniqueId("acct-a-"), uniqueId("acct-b-"))
        let now = Date()
        // The old series' period, told by a notification only: stored, nobody's.
        let oldPeriod = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - 60)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .subscribed, subtype: nil, signedDate: now - 7200,
                                                     signedPayload: "x", transaction: oldPeriod))
        var migrated = transaction("com.example.iapkit.ac.subscription", type: .autoRenewableSubscription, purchased: now - 30, expires: now + 3600)
        migrated.previousOriginalTransactionId = oldPeriod.originalTransactionId
        let first = try PurchaseRecord(migrated)
        let facts = try LedgerSession.decodeFacts(try #require(try await fast.facts(LedgerSession.factsBinds(first, namedOrderId: nil))))
        #expect(facts.previousSeriesOwner == nil)
        let decision = SubmissionRules.submit(first, uploader: b, orderId: nil, source: .signedTransaction, facts: facts, catalog: ledger.catalog, now: now)
        #expect(decision.outcome == .granted)
        // Meanwhile A presents the old series' period: that series is A's, and so is what continues it.
        #expect(try await ledger.submit(.init(accountId: a, transaction: oldPeriod)).outcome == .granted)
        await #expect(throws: LedgerRace.self) { try await fast.apply(decision.effects, owner: b, events: true) }
        #expect(try await ledger.purchases(accountId: b).isEmpty)
        await #expect(throws: LedgerError(.transactionBoundElsewhere, "")) { try await ledger.submit(.init(accountId: b, transaction: migrated)) }
        #expect(try await ledger.purchases(accountId: b).isEmpty)
    }

    @Test("A held PostgreSQL transaction reads again, under the series' locks, what a decision presumed: a series or a migrated series taken meanwhile is a lost race")
    func heldTransactionChecksPreconditions() async throws {
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        let now = Date()
        func decide(_ record: PurchaseRecord, uploader: String) async throws -> [LedgerEffect] {
            let facts = try LedgerSession.decodeFacts(try #require(try await fast.facts(LedgerSession.factsBinds(record, namedOrderId: nil))))
            let decision = SubmissionRules.submit(record, uploader: uploader, orderId: nil, source: .signedTransaction, facts: facts,
                                                      catalog: ledger.catalog, now: now)
            #expect(decision.outcome == .granted)
            return decision.effects
        }
        func held(_ effects: [LedgerEffect]) async throws {
            try await ledger.sqlStore.write { sql in try await LedgerSession(sql, postgres: true).apply(effects) }
        }
        // A renewal decided for B while the series was nobody's; A's first period claims it meanwhile.
        let (a, b) = (uniqueId("acct-a-"), uniqueId("acct-b-"))
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - 3600)
        let renewal = transaction(Demo.monthly, original: first.originalTransactionId, type: .autoRenewableSubscription, purchased: now - 3600,
                                  expires: now + 3600)
        let renewalEffects = try await decide(try PurchaseRecord(renewal), uploader: b)
        #expect(try await ledger.submit(.init(accountId: a, transaction: first)).outcome == .granted)
        await #expect(throws: LedgerRace.self) { try await held(renewalEffects) }
        #expect(try await ledger.purchases(accountId: b).isEmpty)
        // A migrated series decided for D while the series it continues was nobody's; C presents that series meanwhile.
        let (c, d) = (uniqueId("acct-c-"), uniqueId("acct-d-"))
        let oldPeriod = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - 60)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .subscribed, subtype: nil, signedDate: now - 7200,
                                                     signedPayload: "x", transaction: oldPeriod))
        var migrated = transaction("com.example.iapkit.ac.subscription", type: .autoRenewableSubscription, purchased: now - 30, expires: now + 3600)
        migrated.previousOriginalTransactionId = oldPeriod.originalTransactionId
        let migratedEffects = try await decide(try PurchaseRecord(migrated), uploader: d)
        #expect(try await ledger.submit(.init(accountId: c, transaction: oldPeriod)).outcome == .granted)
        await #expect(throws: LedgerRace.self) { try await held(migratedEffects) }
        #expect(try await ledger.purchases(accountId: d).isEmpty)
    }

    @Test("Two accounts submitting two periods of one series at once: never both granted", arguments: StoreKind.allCases)
    func seriesSplitConcurrent(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        var split = 0
        for _ in 0..<30 {
            let (a, b) = (uniqueId("acct-a-"), uniqueId("acct-b-"))
            let now = Date()
            let original = uniqueId()
            let t1 = transaction(Demo.monthly, id: original, type: .autoRenewableSubscription, purchased: now - 3600, expires: now - 60)
            let t2 = transaction(Demo.monthly, original: original, type: .autoRenewableSubscription, purchased: now - 60, expires: now + 3600)
            async let x = attempt { try await ledger.submit(.init(accountId: a, transaction: t1)) }
            async let y = attempt { try await ledger.submit(.init(accountId: b, transaction: t2)) }
            if case .success = await x, case .success = await y { split += 1 }
        }
        #expect(split == 0, "\(split) of 30 series were bound to two accounts")
    }

    @Test("A new period paid through B's own order belongs to B, though A holds the series", arguments: StoreKind.allCases)
    func paidThroughOwnOrder(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (a, b) = (uniqueId("acct-a-"), uniqueId("acct-b-"))
        let now = Date()
        let orderA = try await ledger.createOrder(accountId: a, productId: Demo.monthly)
        let original = uniqueId()
        _ = try await ledger.submit(.init(accountId: a, orderId: orderA.orderId, transaction: transaction(
            Demo.monthly, id: original, type: .autoRenewableSubscription, purchased: now - 86_400 * 40, expires: now - 86_400 * 10,
            token: orderA.appAccountToken)))
        let orderB = try await ledger.createOrder(accountId: b, productId: Demo.yearly)
        let paidByB = transaction(Demo.yearly, original: original, type: .autoRenewableSubscription, purchased: now - 10, expires: now + 86_400 * 365,
                                  token: orderB.appAccountToken)
        #expect(try await ledger.submit(.init(accountId: b, orderId: orderB.orderId, transaction: paidByB)).outcome == .granted)
        #expect(try await ledger.entitlements(accountId: b).entitlement("pro")?.productId == Demo.yearly)
        #expect(try await ledger.entitlements(accountId: a).entitlement("pro") == nil)
        #expect(try await ledger.order(orderB.orderId)?.state == .granted)
    }

    @Test("A refund decided on stale facts while its reversal commits is decided again: the credit stands (PostgreSQL, autocommit)")
    func refundRacesReversal() async throws {
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        let account = uniqueId("acct-")
        let now = Date()
        let paid = transaction(Demo.coins, type: .consumable, purchased: now - 600, signed: now - 600)
        _ = try await ledger.submit(.init(accountId: account, transaction: paid))
        var refunded = paid
        refunded.signedDate = now - 300
        refunded.revocationDate = now - 300
        refunded.revocationReason = .refundedForOtherReason
        var reversed = paid
        reversed.signedDate = now - 100
        let refundRecord = try PurchaseRecord(refunded)
        let catalog = ledger.catalog
        // The refund's facts are read first; the reversal commits before the refund's effects are applied.
        let staleFacts = try await ledger.read { try await $0.facts(for: refundRecord, namedOrderId: nil, catalog: catalog) }
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil, signedDate: now - 100,
                                                     signedPayload: "x", transaction: reversed), now: now)
        let stale = SubmissionRules.notified(refundRecord, facts: staleFacts, catalog: catalog, now: now)
        await #expect(throws: LedgerRace.self) { try await fast.apply(stale.filter { if case .updateSeriesPeriod = $0 { false } else { true } }, owner: nil, events: true) }
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: now - 300,
                                                     signedPayload: "x", transaction: refunded), now: now)
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
    }

    @Test("A refund and its reversal applied at once leave the credit standing", arguments: StoreKind.allCases)
    func refundAndReversalConcurrent(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        var wrong = 0
        for _ in 0..<30 {
            let account = uniqueId("acct-")
            let now = Date()
            let paid = transaction(Demo.coins, type: .consumable, purchased: now - 600, signed: now - 600)
            _ = try await ledger.submit(.init(accountId: account, transaction: paid))
            var refunded = paid
            refunded.signedDate = now - 300
            refunded.revocationDate = now - 300
            var reversed = paid
            reversed.signedDate = now - 100
            async let x = ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: now - 300,
                                                         signedPayload: "x", transaction: refunded), now: now)
            async let y = ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil, signedDate: now - 100,
                                                         signedPayload: "x", transaction: reversed), now: now)
            _ = try await (x, y)
            if try await ledger.entitlements(accountId: account).balances["coins"] != 100 { wrong += 1 }
        }
        #expect(wrong == 0, "\(wrong) of 30 refund-and-reversal pairs lost the credit")
    }

    @Test("A renewal notified before anyone held its series goes with the first period when an account presents it", arguments: StoreKind.allCases)
    func renewalNotifiedFirst(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let original = uniqueId()
        let t1 = transaction(Demo.monthly, id: original, type: .autoRenewableSubscription, purchased: now - 3600, expires: now - 60)
        let t2 = transaction(Demo.monthly, original: original, type: .autoRenewableSubscription, purchased: now - 60, expires: now + 3600)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .didRenew, subtype: nil, signedDate: now,
                                                     signedPayload: "x", transaction: t2, status: .active), now: now)
        let result = try await ledger.submit(.init(accountId: account, transaction: t1), now: now)
        #expect(result.entitlements.entitlement("pro")?.transactionId == t2.transactionId)
        #expect(try await ledger.transaction(t2.transactionId!)?.accountId == account)
    }

    @Test("PostgreSQL: two writes locking two rows in opposite orders deadlock; the one PostgreSQL aborts (40P01) is a lost race, run again, and both take effect once")
    func deadlockIsRetried() async throws {
        let ledger = try await makeLedger(.postgres)
        let (a, b) = (uniqueId("deadlock-a-"), uniqueId("deadlock-b-"))
        try await ledger.write { session in
            try await session.sql.execute("INSERT INTO reconciler_cursors (name, value) VALUES ($1, 0), ($2, 0)", [.text(a), .text(b)])
        }
        // Each write holds its first row until the other holds its own: then they cross for certain (a second's sleep
        // between them did not when the whole suite delayed one write past the other's commit on two cores, CI once).
        @Sendable func cross(_ first: String, _ second: String, _ both: Rendezvous, _ session: any SQLExecutor) async throws {
            try await session.execute("UPDATE reconciler_cursors SET value = value + 1 WHERE name = $1", [.text(first)])
            await both.arrive()
            try await session.execute("UPDATE reconciler_cursors SET value = value + 1 WHERE name = $1", [.text(second)])
        }
        // The store alone: one of the two is refused as a lost race, not as a storage failure.
        let storeWrites = Rendezvous(), ledgerWrites = Rendezvous()
        async let one = attempt { try await ledger.sqlStore.write { try await cross(a, b, storeWrites, $0) } }
        async let two = attempt { try await ledger.sqlStore.write { try await cross(b, a, storeWrites, $0) } }
        let raw = await [one, two]
        let refused = raw.compactMap { if case .failure(let error) = $0 { error } else { nil } }
        #expect(refused.count == 1 && refused.allSatisfy { $0 is LedgerRace }, "\(refused)")
        // Through the ledger: the refused one runs again, so both complete.
        async let three = attempt { try await ledger.write { try await cross(a, b, ledgerWrites, $0.sql) } }
        async let four = attempt { try await ledger.write { try await cross(b, a, ledgerWrites, $0.sql) } }
        for result in await [three, four] { #expect(throws: Never.self) { try result.get() } }
        let values = try await ledger.read { session in
            try await session.sql.rows("SELECT value FROM reconciler_cursors WHERE name IN ($1, $2)", [.text(a), .text(b)]).map { try $0.int(0) }
        }
        #expect(values == [3, 3], "one increment each from the store's committed write and both of the ledger's, none twice")
    }

    @Test("PostgreSQL: an event an operator replays while a prune waits for its row is pending afterwards, not forgotten")
    func replayDuringPrune() async throws {
        let ledger = try await makeLedger(.postgres)
        let id = uniqueId("TEST.prune-race-")
        // Delivered long ago (1970 + 1 s): only this test's row is old enough for the prune's cutoff of 2 s.
        try await ledger.write { session in
            try await session.sql.execute("""
                INSERT INTO webhook_events (event_id, type, body, state, attempts, next_attempt_at, created_at, delivered_at)
                VALUES ($1, 'TEST', '{}', 'delivered', 1, 0, 1000, 1000)
                """, [.text(id)])
        }
        // The replay holds the row for a second; the prune, started once the replay's update ran (not before: on a loaded
        // machine a sleep was outrun, and a prune that comes first rightly deletes the row), chooses it and waits.
        let updated = DispatchSemaphore(value: 0)
        async let replay = attempt {
            try await ledger.sqlStore.write { sql in
                try await sql.execute("UPDATE webhook_events SET state = 'pending', attempts = 0 WHERE event_id = $1", [.text(id)])
                updated.signal()
                _ = try await sql.rows("SELECT 1 FROM pg_sleep(1)", [])
            }
        }
        await withCheckedContinuation { continuation in Thread.detachNewThread { updated.wait(); continuation.resume() } }
        let pruned = try await ledger.sqlStore.write { sql in try await sql.rows(Ledger.pruneWebhookEventsQuery, [.int(2000), .int(1000)]).count }
        let replayed = await replay
        #expect(throws: Never.self) { try replayed.get() }
        #expect(pruned == 0)
        let state = try await ledger.read { session in try await session.sql.first("SELECT state FROM webhook_events WHERE event_id = $1", [.text(id)])?.text(0) }
        #expect(state == "pending")
    }
}

/// Two operations meeting: the first to arrive waits (30 s at most) for the second; once both have, every later arrival
/// (a retried write) passes at once. It waits by sleeping, not by blocking its thread: operations run in their callers'
/// tasks, whose threads the pool shares.
final class Rendezvous: @unchecked Sendable {
    private let lock = NSLock()
    private var arrived = 0

    /// How many have arrived so far.
    var arrivals: Int { lock.withLock { arrived } }

    func arrive() async {
        lock.withLock { arrived += 1 }
        let deadline = ContinuousClock.now + .seconds(30)
        while arrivals < 2, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
    }
}
