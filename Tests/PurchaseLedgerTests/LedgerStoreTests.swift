import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

@Suite("Ledger stores: grouped commits, atomic operations, what the operator can read")
struct LedgerStoreTests {
    func notification(_ type: NotificationTypeV2, _ payload: JWSTransactionDecodedPayload, at date: Date, status: SubscriptionStatus? = nil) -> NotificationEvent {
        NotificationEvent(notificationUUID: UUID().uuidString, type: type, subtype: nil, signedDate: date, signedPayload: "x", transaction: payload,
                          status: status)
    }

    @Test("A transaction paid through another account's order is granted to that account, whoever uploads it", arguments: StoreKind.allCases)
    func deliveredToOwner(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (alice, bob) = (uniqueId("alice-"), uniqueId("bob-"))
        let order = try await ledger.createOrder(accountId: alice, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken)
        let uploaded = try await ledger.submit(.init(accountId: bob, transaction: paid))
        #expect(uploaded.outcome == .deliveredToOwner)
        #expect(uploaded.orderId == nil)
        #expect(uploaded.entitlements.balances["coins"] == nil, "the uploader got nothing")
        #expect(try await ledger.entitlements(accountId: alice).balances["coins"] == 100)
        #expect(try await ledger.order(order.orderId)?.state == .granted)
        // Alice's own upload later grants nothing more; Bob's again neither.
        #expect(try await ledger.submit(.init(accountId: alice, orderId: order.orderId, transaction: paid)).outcome == .alreadyGranted)
        #expect(try await ledger.submit(.init(accountId: bob, transaction: paid)).outcome == .deliveredToOwner)
        #expect(try await ledger.entitlements(accountId: alice).balances["coins"] == 100)
        #expect(try await ledger.conflicts().allSatisfy { $0.transactionId != paid.transactionId }, "not a conflict: it reached its owner")
    }

    @Test("A series' first period presented after its renewal belongs to the renewal's account, whoever presents it", arguments: StoreKind.allCases)
    func firstPeriodAfterRenewal(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (owner, other) = (uniqueId("owner-"), uniqueId("other-"))
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: Date() - 600, expires: Date() - 300)
        let renewal = transaction(Demo.monthly, original: first.transactionId, type: .autoRenewableSubscription, purchased: Date() - 300,
                                  expires: Date() + 300)
        #expect(try await ledger.submit(.init(accountId: owner, transaction: renewal)).outcome == .granted)
        await #expect(throws: LedgerError(.transactionBoundElsewhere, "")) {
            try await ledger.submit(.init(accountId: other, transaction: first))
        }
        // The refusal lets the other device finish it: the period is kept for the series' owner first.
        #expect(try await ledger.transaction(first.transactionId!)?.accountId == owner)
        #expect(try await ledger.submit(.init(accountId: owner, transaction: first)).outcome == .alreadyGranted)
        #expect(try await ledger.entitlements(accountId: owner).entitlement("pro") != nil)
        #expect(try await ledger.entitlements(accountId: other).entitlement("pro") == nil)
    }

    @Test("Operations queued together commit together, and one that fails rolls back alone", arguments: StoreKind.allCases)
    func groupedCommits(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("group-")
        let foreign = uniqueId("foreign-")
        let order = try await ledger.createOrder(accountId: foreign, productId: Demo.coins)
        let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<120 {
                group.addTask {
                    do {
                        // Every tenth names another account's order: refused inside the write, after reading its facts.
                        let orderId = index % 10 == 0 ? order.orderId : nil
                        return try await ledger.submit(.init(accountId: account, orderId: orderId, transaction: transaction(Demo.coins, type: .consumable)))
                            .outcome.rawValue
                    } catch let error as LedgerError {
                        return error.code.rawValue
                    }
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == "granted" }.count == 108)
        #expect(outcomes.filter { $0 == LedgerError.Code.orderAccountMismatch.rawValue }.count == 12)
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 108 * 100)
        #expect(try await ledger.purchases(accountId: account).count == 108)
        #expect(try await ledger.order(order.orderId)?.state == .created)
    }

    @Test("SQLite: when a group's commit fails, every operation of it hears the failure, a refusal decided on another's lost writes too")
    func failedGroupAnswersEveryone() async throws {
        let ledger = try await makeLedger(.sqlite)
        let account = uniqueId("group-")
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.coins, type: .consumable)))
        // Holds the writer until the next three operations are queued, in this order: they then run as one group.
        let store = try #require(ledger.store as? SQLiteLedgerStore)
        let (started, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let held = Task { try await store.write { _ in started.signal(); release.wait() } }
        func queued(_ count: Int) async throws {
            while store.queuedWrites < count { try await Task.sleep(for: .milliseconds(5)) }
        }
        // Waits on a thread of its own, not one of the tasks' pool.
        await withCheckedContinuation { continuation in Thread.detachNewThread { started.wait(); continuation.resume() } }
        let first = Task { try await ledger.spend(accountId: account, currency: "coins", amount: 100, idempotencyKey: "first") }
        try await queued(1)
        let second = Task { try await ledger.spend(accountId: account, currency: "coins", amount: 100, idempotencyKey: "second") }
        try await queued(2)
        // Stands in for SQLite rolling the whole transaction back by itself (a full disk, an I/O error).
        let breaking = Task { try await ledger.sqlStore.write { sql in _ = try await sql.rows("ROLLBACK", []) } }
        try await queued(3)
        release.signal()
        try await held.value
        for (name, spend) in [("first", first), ("second", second)] {
            do {
                let balance = try await spend.value
                Issue.record("the \(name) spend of a failed group was answered as done (balance \(balance))")
            } catch let error as LedgerError {
                // The second spend found the coins the first took; that debit is gone, so "not enough coins" would be false.
                #expect(error.code == .storage, "\(name): \(error)")
            }
        }
        await #expect(throws: (any Error).self) { try await breaking.value }
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
        // The app retries the spend it was told failed: it goes through.
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 100, idempotencyKey: "second") == 0)
    }

    @Test("A receipt's purchases and the device report commit as one: a failure part-way leaves none of them", arguments: StoreKind.allCases)
    func receiptAtomic(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("receipt-")
        let purchases = (0..<3).map { _ in transaction(Demo.coins, type: .consumable) }
        let submissions = purchases.map { PurchaseSubmission(accountId: account, transaction: $0, source: .receipt, deviceSignals: ["jailbroken"]) }
        for failAt in [2, 9, 16] {
            await #expect(throws: (any Error).self) {
                _ = try await Ledger(store: FailingStore(ledger.sqlStore, failAt: failAt), catalog: ledger.catalog).submitAll(submissions)
            }
            #expect(try await ledger.purchases(accountId: account).isEmpty, "statement \(failAt)")
            #expect(try await ledger.deviceReports(transactionId: purchases[0].transactionId!).isEmpty, "statement \(failAt)")
        }
        let results = try await ledger.submitAll(submissions)
        #expect(results.allSatisfy { (try? $0.get().outcome) == .granted })
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 300)
        #expect(try await ledger.deviceReports(transactionId: purchases[2].transactionId!) == [["jailbroken"]])
    }

    @Test("An operator's settle and its audit entry are one transaction", arguments: StoreKind.allCases)
    func settleAudited(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let order = try await ledger.createOrder(accountId: uniqueId("settle-"), productId: Demo.premium)
        let note = "refunded by support \(uniqueId())"
        for failAt in 1...2 {
            await #expect(throws: (any Error).self) {
                _ = try await Ledger(store: FailingStore(ledger.sqlStore, failAt: failAt + 1), catalog: ledger.catalog)
                    .settle(orderId: order.orderId, transaction: nil, note: note, actor: "ops")
            }
            #expect(try await ledger.order(order.orderId)?.state == .created)
            #expect(try await ledger.auditLog(limit: 1000).allSatisfy { $0.detail != note })
        }
        #expect(try await ledger.settle(orderId: order.orderId, transaction: nil, note: note, actor: "ops").state == .settled)
        #expect(try await ledger.auditLog(limit: 1000).contains { $0.detail == note && $0.subject == order.orderId && $0.action == "settle" })
        // An order paid before the operator's settle reached it stays paid, and the audit log says the settle changed nothing.
        let paid = try await ledger.createOrder(accountId: uniqueId("settle-"), productId: Demo.premium)
        var payment = transaction(Demo.premium, type: .nonConsumable)
        payment.appAccountToken = paid.appAccountToken
        _ = try await ledger.submit(.init(accountId: paid.accountId, orderId: paid.orderId, transaction: payment))
        #expect(try await ledger.settle(orderId: paid.orderId, transaction: nil, note: note, actor: "ops").state == .granted)
        let entries = try await ledger.auditLog(limit: 1000).filter { $0.subject == paid.orderId }
        #expect(entries.map(\.action) == ["settle-not-open"], "\(entries)")
        #expect(entries.first?.detail.hasPrefix("the order was granted already") == true, "\(entries)")
    }

    @Test("A renewal extension of the current period is not undone by Apple's retry of older news about that period", arguments: StoreKind.allCases)
    func extensionNotRolledBack(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("extended-")
        let now = Date()
        let period = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 600, expires: now + 3600, signed: now - 600)
        let original = period.transactionId!
        _ = try await ledger.submit(.init(accountId: account, transaction: period))
        var extended = period
        extended.expiresDate = now + 3 * 86_400
        extended.signedDate = now - 60
        _ = try await ledger.apply(notification(.renewalExtended, extended, at: now - 60, status: .active))
        // Apple's retry of the first notification about the period, signed before the extension.
        _ = try await ledger.apply(notification(.subscribed, period, at: now - 600, status: .active))
        let series = try #require(try await ledger.series(originalTransactionId: original))
        let stored = try #require(series.status?.expiresDate)
        #expect(abs(stored.timeIntervalSince(now + 3 * 86_400)) < 0.01, "\(String(describing: series.status))")
        #expect(try await ledger.entitlements(accountId: account, now: now + 86_400).entitlements.contains { $0.productId == Demo.monthly })
    }

    @Test("A wrapper that forwards a PostgreSQL store's operations but says it is SQLite: held transactions still take the series' locks and check their preconditions (the store decides, not the label)")
    func wrapperCannotSwitchOffRaceGuards() async throws {
        struct Mislabelled: LedgerStore {
            let inner: any LedgerStore
            var kind: LedgerStoreKind { .sqlite }
            var operations: LedgerStoreOperations { inner.operations }
            func close() async throws { try await inner.close() }
        }
        let store = try await Ledger.openStore(url: try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"]))
        let ledger = Ledger(store: Mislabelled(inner: store), catalog: .demo)
        #expect(try await ledger.write { $0.postgres })
        try await store.close()
    }

    @Test("PostgreSQL: closing the store lets an operation already running commit and answer, then refuses new ones as storage errors")
    func postgresCloseWaitsForRunningOperations() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        let store = try await PostgresLedgerStore(url: url, connections: 2)
        let ledger = Ledger(store: store, catalog: .demo)
        try await ledger.migrate()
        let name = uniqueId("closing-")
        let started = Signal()
        async let running: Void = store.write { sql in
            try await sql.execute("INSERT INTO reconciler_cursors (name, value) VALUES ($1, 1)", [.text(name)])
            started.raise()
            _ = try await sql.rows("SELECT 1 FROM pg_sleep(0.5)", [])
        }
        while !started.isRaised { try await Task.sleep(for: .milliseconds(5)) }
        try await store.close()
        try await running
        let refused = await #expect(throws: LedgerError.self) { try await ledger.notificationCount() }
        #expect(refused?.code == .storage)
        let other = try await PostgresLedgerStore(url: url)
        let committed = try await other.read { sql in try await sql.first("SELECT value FROM reconciler_cursors WHERE name = $1", [.text(name)]) }
        #expect(committed?.values == [.int(1)])
        try await other.close()
    }

    @Test("PostgreSQL: prepared statements dropped under a connection (DEALLOCATE ALL, a pooler) cost that connection, not an outage; their integers read as sent")
    func postgresPreparedStatementsRecover() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        let store = try await PostgresLedgerStore(url: url, connections: 1)  // one connection: the next operation must use the one the statement was lost on
        let ledger = Ledger(store: store, catalog: .demo)
        try await ledger.migrate()
        // Eight digits: read as text they would be eight bytes too.
        let signed = Date(timeIntervalSince1970: 12_345.678)
        let first = transaction(Demo.premium, type: .nonConsumable, purchased: signed, signed: signed)
        #expect(try await ledger.apply(notification(.oneTimeCharge, first, at: Date())) == .applied)
        let (original, id) = (first.originalTransactionId!, first.transactionId!)
        let row = try await store.write { sql in
            try await sql.first(LedgerSession.factsQuery, [.null, .null, .text(id), .text(original), .null])
        }
        // The stored transaction's quantity and signing date, where the facts' layout puts them.
        let stored = try #require(row?.slice(PurchaseColumn.self, from: LedgerSession.FactsLayout.stored))
        #expect(try stored.int(PurchaseColumn.quantity) == 1)
        #expect(try stored.int(PurchaseColumn.signedDate) == 12_345_678)
        // The kept preconditions: no movements and this signing date hold; another signing date does not.
        let checks: @Sendable (String, String) -> [SQLValue] = { entries, signed in
            [.text(original), .text(id), .null, .null, .null, .null, .null, .text(entries), .text(signed), .null]
        }
        let holds = try await store.write { sql in try await sql.first(EffectStatements.preconditionsQuery, checks("0", "12345678")) }
        #expect(holds?.values == [.int(1)])
        let newer = try await store.write { sql in try await sql.first(EffectStatements.preconditionsQuery, checks("0", "12345679")) }
        #expect(newer == nil)
        let moved = try await store.write { sql in try await sql.first(EffectStatements.preconditionsQuery, checks("1", "12345678")) }
        #expect(moved == nil)
        _ = try await store.write { sql in try await sql.rows("DEALLOCATE ALL", []) }
        let second = transaction(Demo.premium, type: .nonConsumable)
        #expect(try await ledger.apply(notification(.oneTimeCharge, second, at: Date())) == .applied)
        #expect(try await ledger.notifications(originalTransactionId: second.originalTransactionId!).count == 1)
        // The purchase path's statements (in autocommit) too, each prepared on the one connection and then lost under
        // it: the operation after the loss is answered, on a new connection (the lost one was closed, not lent again).
        let backend: @Sendable () async throws -> Int64 = {
            try await store.read { sql in try await sql.rows("SELECT pg_backend_pid()", [])[0].int(0) }
        }
        let buyer = uniqueId("after-deallocate-")
        let bought = transaction(Demo.premium, type: .nonConsumable)
        #expect(try await ledger.submit(.init(accountId: buyer, transaction: bought)).outcome == .granted)
        var before = try await backend()
        _ = try await store.write { sql in try await sql.rows("DEALLOCATE ALL", []) }
        let next = transaction(Demo.coins, type: .consumable)
        #expect(try await ledger.submit(.init(accountId: buyer, transaction: next)).outcome == .granted)
        var after = try await backend()
        #expect(after != before, "the purchase's statement was found lost and its connection closed")
        #expect(try await ledger.entitlements(accountId: buyer).entitlement("premium") != nil)
        before = after
        _ = try await store.write { sql in try await sql.rows("DEALLOCATE ALL", []) }
        #expect(try await ledger.entitlements(accountId: buyer).balances["coins"] == 100)
        after = try await backend()
        #expect(after != before, "the entitlements' statement was found lost and its connection closed")
        // Text with a NUL is refused before a kept statement is sent: the connection did nothing wrong, and is kept.
        let fast = try #require(ledger.sqlStore.fastPath)
        let refused = await #expect(throws: LedgerError.self) { _ = try await fast.facts([.text("order\u{0}"), .null, .text("1"), .text("1"), .null]) }
        #expect(refused?.code == .invalidInput)
        #expect(try await backend() == after)
        try await store.close()
    }

    @Test("PostgreSQL: a prepared statement whose result type another replica's migration changed (0A000, cached plan must not change result type) costs its connection, not an outage")
    func postgresPreparedStatementResultTypeChanged() async throws {
        try await withOwnPostgresDatabase("retyped_") { url in
            let store = try await PostgresLedgerStore(url: url, connections: 1)  // one connection: the next operation must use the one the statement was lost on
            let ledger = Ledger(store: store, catalog: .demo)
            try await ledger.migrate()
            let first = transaction(Demo.premium, type: .nonConsumable)
            #expect(try await ledger.apply(notification(.oneTimeCharge, first, at: Date())) == .applied)
            // A column the kept facts statement returns changes type under it (text to varchar reads the same).
            _ = try await store.write { sql in try await sql.rows("ALTER TABLE orders ALTER COLUMN state TYPE varchar(64)", []) }
            let second = transaction(Demo.premium, type: .nonConsumable)
            #expect(try await ledger.apply(notification(.oneTimeCharge, second, at: Date())) == .applied)
            #expect(try await ledger.notifications(originalTransactionId: second.originalTransactionId!).count == 1)
            try await store.close()
        }
    }

    @Test("PostgreSQL: a settle another replica commits while the payment waits for the order's row is seen, and audited")
    func settleCommittedDuringPayment() async throws {
        let ledger = try await makeLedger(.postgres)
        let account = uniqueId("racing-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.premium)
        let settled = Signal()
        // Another replica's settle, holding the order's row uncommitted while the payment arrives.
        let settling = Task {
            try await ledger.sqlStore.write { sql in
                _ = try await sql.rows("UPDATE orders SET state = 'settled' WHERE order_id = $1", [.text(order.orderId)])
                settled.raise()
                try await Task.sleep(for: .seconds(1.5))
            }
        }
        while !settled.isRaised { try await Task.sleep(for: .milliseconds(5)) }
        let paid = transaction(Demo.premium, type: .nonConsumable, token: order.appAccountToken)
        let result = try await ledger.submit(.init(accountId: account, orderId: order.orderId, transaction: paid))
        try await settling.value
        #expect(result.outcome == .granted)
        #expect(try await ledger.order(order.orderId)?.state == .granted)
        let entries = try await ledger.auditLog(limit: 1000).filter { $0.subject == order.orderId }
        #expect(entries.contains { $0.action == "settled-order-paid" && $0.detail == paid.transactionId }, "\(entries.map(\.action))")
    }

    @Test("Reconciliation asks about a series whose period ended without news, not one Apple already called expired or revoked since", arguments: StoreKind.allCases)
    func staleSeries(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        var ids: [String: String] = [:]
        for name in ["silent", "expired", "oldNews", "revoked"] {
            let period = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - 600, signed: now - 7200)
            _ = try await ledger.submit(.init(accountId: uniqueId("stale-"), transaction: period))
            ids[name] = period.originalTransactionId!
            var later = period
            switch name {
            case "expired":
                later.signedDate = now - 300
                _ = try await ledger.apply(notification(.expired, later, at: now - 300, status: .expired))
            case "oldNews":
                // News signed before the period ended says nothing of what came after.
                later.signedDate = now - 3600
                _ = try await ledger.apply(notification(.didChangeRenewalStatus, later, at: now - 3600, status: .active))
            case "revoked":
                // REVOKE of a family copy: the series' status says revoked, the transaction carries no refund of its own.
                later.signedDate = now - 200
                _ = try await ledger.apply(notification(.revoke, later, at: now - 200, status: .revoked))
            default: break
            }
        }
        let stale = Set(try await ledger.staleSubscriptions(since: now - 86_400, before: now, limit: 10_000).map(\.originalTransactionId))
        #expect(stale.contains(ids["silent"]!) && stale.contains(ids["oldNews"]!))
        #expect(!stale.contains(ids["expired"]!), "Apple said EXPIRED after the period ended")
        #expect(!stale.contains(ids["revoked"]!), "Apple said REVOKED after the period ended")
    }

    @Test("Reconciliation takes stale series in turns: not asked since their latest expiry first, then the longest ago, each again after a growing delay", arguments: StoreKind.allCases)
    func staleSeriesInTurns(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        var series: [StaleSeries] = []
        // Expired 10, 20 and 30 minutes ago: newest first when none was asked about.
        for minutes in [10.0, 20, 30] {
            let period = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - minutes * 60,
                                     signed: now - 7200)
            let account = uniqueId("turns-")
            _ = try await ledger.submit(.init(accountId: account, transaction: period))
            series.append(StaleSeries(originalTransactionId: period.originalTransactionId!, accountId: account, expiresDate: now - minutes * 60))
        }
        let ids = series.map(\.originalTransactionId)
        // Other tests' series share a PostgreSQL ledger: only these three are looked at.
        func due(at time: Date) async throws -> [String] {
            try await ledger.staleSubscriptions(since: now - 86_400, before: now, limit: 10_000, dueBy: time)
                .map(\.originalTransactionId).filter(ids.contains)
        }
        let window = now - 86_400
        #expect(try await due(at: now) == ids)
        try await ledger.recordSubscriptionCheck(series[0], at: now, forgettingBefore: window)
        try await ledger.recordSubscriptionCheck(series[1], at: now, forgettingBefore: window)
        #expect(try await due(at: now) == [ids[2]], "the two just asked about wait their turn; the third is not crowded out")
        try await ledger.recordSubscriptionCheck(series[2], at: now + 10, forgettingBefore: window)
        #expect(try await due(at: now + 30).isEmpty)
        #expect(try await due(at: now + 60) == [ids[0], ids[1]], "a minute after the first answer")
        try await ledger.recordSubscriptionCheck(series[0], at: now + 60, forgettingBefore: window)
        #expect(try await due(at: now + 70) == [ids[1], ids[2]], "the second answer waits two minutes; asked longest ago first")
        #expect(try await due(at: now + 180) == [ids[1], ids[2], ids[0]])
        // A newer period of the first series ended since: a new expiry, asked about first, from a one-minute delay again.
        let renewal = transaction(Demo.monthly, original: ids[0], type: .autoRenewableSubscription, purchased: now - 600, expires: now - 60,
                                  signed: now - 600)
        _ = try await ledger.submit(.init(accountId: series[0].accountId, transaction: renewal))
        #expect(try await due(at: now + 70) == [ids[0], ids[1], ids[2]])
        var renewed = series[0]
        renewed.expiresDate = now - 60
        try await ledger.recordSubscriptionCheck(renewed, at: now + 70, forgettingBefore: window)
        #expect(try await due(at: now + 129) == [ids[1], ids[2]])
        #expect(try await due(at: now + 130).contains(ids[0]))
        // An older ask, reported late by another replica, does not move a later one back.
        try await ledger.recordSubscriptionCheck(renewed, at: now + 65, forgettingBefore: window)
        #expect(try await !due(at: now + 129).contains(ids[0]))
        // Asks older than the window are forgotten: those series come first again.
        try await ledger.recordSubscriptionCheck(series[1], at: now + 200, forgettingBefore: now + 199)
        #expect(try await due(at: now + 70) == [ids[0], ids[2]])
    }

    @Test("The delay before asking Apple again about a stale series doubles from a minute up to thirty")
    func recheckDelays() {
        #expect([1, 2, 3, 4, 5, 6, 7, 100].map { Ledger.recheckDelay(afterAsks: $0) } == [60, 120, 240, 480, 960, 1_800, 1_800, 1_800])
    }

    @Test("A payment for an order the operator settled without one is granted, and the audit log says the order is now paid twice", arguments: StoreKind.allCases)
    func paidAfterSettle(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("late-")
        for (path, productId) in [("by order id", Demo.premium), ("by token", Demo.coins)] {
            let order = try await ledger.createOrder(accountId: account, productId: productId)
            _ = try await ledger.settle(orderId: order.orderId, transaction: nil, note: "refunded by support", actor: "ops")
            let paid = transaction(productId, type: productId == Demo.coins ? .consumable : .nonConsumable, token: order.appAccountToken)
            let result = try await ledger.submit(.init(accountId: account, orderId: path == "by order id" ? order.orderId : nil, transaction: paid))
            #expect(result.outcome == .granted, "\(path)")
            #expect(try await ledger.order(order.orderId)?.state == .granted)
            let entries = try await ledger.auditLog(limit: 1000).filter { $0.subject == order.orderId }
            #expect(entries.contains { $0.action == "settled-order-paid" && $0.detail == paid.transactionId }, "\(path): \(entries.map(\.action))")
        }
        // An order that was not settled is fulfilled without such an entry.
        let plain = try await ledger.createOrder(accountId: account, productId: Demo.premium)
        _ = try await ledger.submit(.init(accountId: account, orderId: plain.orderId, transaction: transaction(Demo.premium, type: .nonConsumable, token: plain.appAccountToken)))
        #expect(try await ledger.auditLog(limit: 1000).allSatisfy { $0.subject != plain.orderId })
    }

    @Test("A series keeps its latest period's product and expiry, whatever news about a past period came later", arguments: StoreKind.allCases)
    func seriesLatestPeriod(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("series-")
        let now = Date()
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 7200, expires: now - 3600)
        let original = first.transactionId!
        _ = try await ledger.submit(.init(accountId: account, transaction: first))
        let renewal = transaction(Demo.monthly, original: original, type: .autoRenewableSubscription, purchased: now - 3600, expires: now + 3600,
                                  signed: now - 3600)
        _ = try await ledger.apply(notification(.didRenew, renewal, at: now - 3600, status: .active))
        // A refund of the first period, signed after the renewal.
        var refund = first
        refund.revocationDate = now - 60
        refund.revocationReason = .refundedForOtherReason
        refund.signedDate = now - 60
        _ = try await ledger.apply(notification(.refund, refund, at: now - 60, status: .active))
        let series = try #require(try await ledger.series(originalTransactionId: original))
        #expect(series.status?.productId == Demo.monthly)
        #expect(series.status?.expiresDate.map { abs($0.timeIntervalSince(now + 3600)) < 0.01 } == true, "the latest period's expiry")
        #expect(series.transactions.map(\.transactionId) == [original, renewal.transactionId!])
        #expect(series.notifications.count == 2)
        let owned = try await ledger.entitlements(accountId: account, now: now)
        #expect(owned.entitlement("pro")?.transactionId == renewal.transactionId, "the current period stands")
    }

    @Test("Transactions only notifications told of are listed unbound until an account presents them", arguments: StoreKind.allCases)
    func unboundListed(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let told = transaction(Demo.premium, type: .nonConsumable)
        _ = try await ledger.apply(notification(.oneTimeCharge, told, at: Date()))
        let unbound = try await ledger.transactions(unboundOnly: true, limit: 10_000)
        #expect(unbound.contains { $0.transactionId == told.transactionId && $0.accountId == nil })
        let account = uniqueId("claim-")
        #expect(try await ledger.submit(.init(accountId: account, transaction: told)).outcome == .granted)
        #expect(try await ledger.transactions(unboundOnly: true, limit: 10_000).allSatisfy { $0.transactionId != told.transactionId })
        #expect(try await ledger.transaction(told.transactionId!)?.accountId == account)
    }

    @Test("An account's timeline holds its orders, transactions, refunds, balance movements, notifications and audit entries", arguments: StoreKind.allCases)
    func timeline(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("timeline-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken)
        _ = try await ledger.submit(.init(accountId: account, orderId: order.orderId, transaction: paid, deviceSignals: []))
        var refunded = paid
        refunded.revocationDate = Date()
        refunded.signedDate = Date() + 1
        _ = try await ledger.apply(notification(.refund, refunded, at: Date() + 1))
        let lost = try await ledger.createOrder(accountId: account, productId: Demo.premium)
        _ = try await ledger.settle(orderId: lost.orderId, transaction: nil, note: "goodwill", actor: "ops")
        let kinds = Set(try await ledger.timeline(accountId: account).map(\.kind))
        #expect(kinds == [.order, .transaction, .revocation, .balance, .notification, .deviceReport, .audit])
    }

    @Test("The ledger's own checks: none fails on what the ledger wrote; a balance edited behind its back is named", arguments: StoreKind.allCases)
    func inconsistencies(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("checked-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        _ = try await ledger.submit(.init(accountId: account, orderId: order.orderId,
                                          transaction: transaction(Demo.coins, type: .consumable, token: order.appAccountToken)))
        _ = try await ledger.spend(accountId: account, currency: "coins", amount: 30, idempotencyKey: "k1")
        #expect(try await ledger.inconsistencies().allSatisfy { !$0.detail.contains(account) })
        _ = try await ledger.sqlStore.write { sql in
            try await sql.rows("UPDATE balances SET amount = amount + 5 WHERE account_id = $1", [.text(account)])
        }
        let found = try await ledger.inconsistencies(limit: 10_000).filter { $0.detail.contains(account) }
        #expect(found.map(\.check) == ["balance-equals-movements"], "\(found)")
    }

    @Test("The reconciler's cursor never moves back, and the ledger names the notifications it holds (more than one chunk of ids)",
          arguments: StoreKind.allCases)
    func cursorAndKnownNotifications(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let name = uniqueId("cursor-")
        let now = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded() / 1000)
        #expect(try await ledger.cursor(name) == nil)
        try await ledger.advanceCursor(name, to: now)
        try await ledger.advanceCursor(name, to: now.addingTimeInterval(-60))
        #expect(try await ledger.cursor(name) == now, "a replica finishing an older pass later does not move it back")
        try await ledger.advanceCursor(name, to: now.addingTimeInterval(60))
        #expect(try await ledger.cursor(name) == now.addingTimeInterval(60))
        #expect(try await ledger.cursor(uniqueId("other-")) == nil, "cursors are kept apart by name")

        let stored = uniqueId("stored-")
        _ = try await ledger.apply(NotificationEvent(notificationUUID: stored, type: .test, subtype: nil, signedDate: now, signedPayload: "x"), now: now)
        let unknown = (0..<150).map { _ in uniqueId("unknown-") }
        #expect(try await ledger.knownNotifications(unknown + [stored]) == [stored])
        #expect(try await ledger.knownNotifications([]) == [])
    }
}

/// A flag one thread raises and another polls.
final class Signal: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false
    func raise() { lock.withLock { raised = true } }
    var isRaised: Bool { lock.withLock { raised } }
}
