import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// A store that fails the `failAt`-th statement of every write: the database's own rollback must leave nothing. Its
/// fast path (PostgreSQL's purchase in autocommit), when `fastFailure` is given, fails that round trip instead.
final class FailingStore: SQLLedgerStore, @unchecked Sendable {
    let inner: any SQLLedgerStore
    let failAt: Int
    let fastPath: (any LedgerFastPath)?
    var kind: LedgerStoreKind { inner.kind }
    var operations: LedgerStoreOperations { LedgerStoreOperations(self) }

    init(_ inner: any SQLLedgerStore, failAt: Int, fastFailure: FailingFastPath.Failure? = nil) {
        self.inner = inner
        self.failAt = failAt
        // Without a failure of its own the fast path is left out: operations take `write`, whose statements fail.
        fastPath = fastFailure.flatMap { failure in inner.fastPath.map { FailingFastPath($0, failure: failure) } }
    }

    struct Injected: Error {}

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        let failAt = failAt
        return try await inner.write { sql in try await body(Counting(inner: sql, failAt: failAt)) }
    }

    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        try await inner.read(body)
    }

    func close() async throws { try await inner.close() }

    /// Counts statements and throws at the chosen one.
    final class Counting: SQLExecutor {
        let inner: any SQLExecutor
        let failAt: Int
        private var count = 0
        init(inner: any SQLExecutor, failAt: Int) { self.inner = inner; self.failAt = failAt }

        func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            count += 1
            if count == failAt { throw Injected() }
            return try await inner.rows(sql, binds)
        }

        /// The store's own select list: its rows are read as the store reads them.
        func selectList(_ columns: [String]) -> String { inner.selectList(columns) }
    }
}

/// A store's fast path whose `failure.at`-th round trip (facts, entries, owned or apply, counted together) fails: before
/// it reaches the database, or after — the database did it, the answer is lost (a dropped connection, a crash).
final class FailingFastPath: LedgerFastPath, @unchecked Sendable {
    struct Failure: Sendable, CustomTestStringConvertible {
        var at: Int
        var afterTheDatabase: Bool
        var testDescription: String { "round trip \(at), \(afterTheDatabase ? "answer lost" : "never sent")" }
    }

    let inner: any LedgerFastPath
    let failure: Failure?
    private let lock = NSLock()

    init(_ inner: any LedgerFastPath, failure: Failure?) {
        self.inner = inner
        self.failure = failure
    }

    /// The round trips made so far, by name, and the one that failed.
    private(set) var trips: [String] = []
    private(set) var failedTrip: String?
    var failed: Bool { lock.withLock { failedTrip != nil } }

    private func roundTrip<R>(_ name: String, _ body: () async throws -> R) async throws -> R {
        let now = lock.withLock { trips.append(name); return trips.count }
        guard let failure, failure.at == now else { return try await body() }
        lock.withLock { failedTrip = name }
        // What the database answered, a lost race included, never reaches the ledger.
        if failure.afterTheDatabase { _ = try? await body() }
        throw FailingStore.Injected()
    }

    func facts(_ binds: [SQLValue]) async throws -> SQLRow? { try await roundTrip("facts") { try await inner.facts(binds) } }
    func entries(transactionId: String) async throws -> [SQLRow] { try await roundTrip("entries") { try await inner.entries(transactionId: transactionId) } }
    func owned(accountId: String) async throws -> [SQLRow] { try await roundTrip("owned") { try await inner.owned(accountId: accountId) } }
    func apply(_ effects: [LedgerEffect], owner: String?, events: Bool) async throws -> [SQLRow] {
        try await roundTrip("apply") { try await inner.apply(effects, owner: owner, events: events) }
    }
    func ping() async throws { try await inner.ping() }
}

@Suite("No half-applied state: a failure at any statement of an operation leaves nothing behind")
struct AtomicityTests {
    /// The tables a purchase may write, counted whole: each test below has a database of its own.
    static let tables = ["purchases", "orders", "balances", "balance_entries", "audit_log", "webhook_events", "subscriptions",
                         "device_reports", "conflicts", "metric_retractions", "notifications", "pending_proofs"]

    static func counts(_ ledger: Ledger) async throws -> [String: Int64] {
        try await ledger.sqlStore.read { sql in
            var counts: [String: Int64] = [:]
            for table in Self.tables {
                    guard case .int(let count) = try await sql.rows("SELECT COUNT(*) FROM \(table)", []).first?.values.first else { continue }
                    counts[table] = count
                }
            return counts
        }
    }

    @Test("PostgreSQL's purchase in one statement: a failure at each table it writes leaves every table as it was; then granted once")
    func fastPathInsideTheStatement() async throws {
        try await withOwnPostgresDatabase("atomic") { url in
            let ledger = Ledger(store: try await PostgresLedgerStore(url: url), catalog: .demo)
            try await ledger.migrate()
            _ = try #require(ledger.sqlStore.fastPath, "purchases on PostgreSQL take the fast path")
            _ = try await ledger.sqlStore.write { sql in
                try await sql.rows("""
                    CREATE FUNCTION iapkit_injected_failure() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'injected failure writing %', TG_TABLE_NAME; END $$
                    """, [])
            }
            // A consumable for an order, with the device's report; a subscription's first period, bought with no order.
            let account = uniqueId("fast-")
            let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
            let purchases: [(name: String, submission: PurchaseSubmission, written: Set<String>)] = [
                ("coins for an order", PurchaseSubmission(accountId: account, orderId: order.orderId,
                                                         transaction: transaction(Demo.coins, type: .consumable, token: order.appAccountToken),
                                                         deviceSignals: ["jailbroken"]),
                 ["purchases", "orders", "balances", "balance_entries", "webhook_events", "device_reports"]),
                ("a monthly plan", PurchaseSubmission(accountId: account, transaction: transaction(Demo.monthly, type: .autoRenewableSubscription,
                                                                                                   expires: Date().addingTimeInterval(30 * 86_400))),
                 ["purchases", "webhook_events", "subscriptions"]),
            ]
            func trigger(_ tables: [String], on: Bool) async throws {
                _ = try await ledger.sqlStore.write { sql in
                    for table in tables {
                        _ = try await sql.rows(on ? "CREATE TRIGGER injected BEFORE INSERT OR UPDATE ON \(table) FOR EACH ROW EXECUTE FUNCTION iapkit_injected_failure()"
                                            : "DROP TRIGGER injected ON \(table)", [])
                    }
                }
            }
            for purchase in purchases {
                for table in purchase.written.sorted() {
                    let before = try await Self.counts(ledger)
                    try await trigger([table], on: true)
                    do {
                        let answer = try await ledger.submit(purchase.submission)
                        Issue.record("\(purchase.name): granted though writing \(table) failed: \(answer.outcome)")
                    } catch {
                        #expect(try await Self.counts(ledger) == before, "\(purchase.name), failing at \(table): \(error)")
                    }
                    try await trigger([table], on: false)
                }
                // Those are all the tables it writes: with every other one failing, it is granted, once.
                let others = Set(Self.tables).subtracting(purchase.written)
                try await trigger(others.sorted(), on: true)
                #expect(try await ledger.submit(purchase.submission).outcome == .granted, "\(purchase.name)")
                #expect(try await ledger.submit(purchase.submission).outcome == .alreadyGranted)
                try await trigger(others.sorted(), on: false)
            }
            #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
            #expect(try await ledger.purchases(accountId: account).count == 2)
            try await ledger.store.close()
        }
    }

    @Test("PostgreSQL's fast path: a round trip that fails before the database or loses its answer after — the purchase ends granted once",
          arguments: [false, true])
    func fastPathRoundTrips(_ afterTheDatabase: Bool) async throws {
        let ledger = try await makeLedger(.postgres)
        var failedTrips: Set<String> = []
        for orderMadeHere in [true, false] {
            for at in 1...4 {
                let failing = FailingStore(ledger.sqlStore, failAt: .max, fastFailure: .init(at: at, afterTheDatabase: afterTheDatabase))
                let fast = try #require(failing.fastPath as? FailingFastPath)
                let app = Ledger(store: failing, catalog: ledger.catalog)
                let account = uniqueId("trip-")
                // An order this process made lets the first round trip be the effects (its facts guessed); one another
                // replica made has its facts read first.
                let order = try await (orderMadeHere ? app : ledger).createOrder(accountId: account, productId: Demo.coins)
                let submission = PurchaseSubmission(accountId: account, orderId: order.orderId,
                                                    transaction: transaction(Demo.coins, type: .consumable, token: order.appAccountToken))
                // The app uploads until it has its answer, and once more (a retry, the next launch), to the same server.
                var outcomes: [SubmissionResult.Outcome] = []
                var errors = 0, firstUploadFailed = false
                while outcomes.count < 2 && errors < 2 {
                    do {
                        outcomes.append(try await app.submit(submission).outcome)
                    } catch {
                        errors += 1
                        firstUploadFailed = outcomes.isEmpty
                        if !afterTheDatabase && outcomes.isEmpty {
                            #expect(try await ledger.purchases(accountId: account).isEmpty, "round trip \(at): nothing written")
                            #expect(try await ledger.order(order.orderId)?.state == .created)
                        }
                    }
                }
                #expect(errors == (fast.failed ? 1 : 0), "\(fast.trips)")
                // The first upload's effects applied, its answer lost: the retry finds it granted.
                let answerLost = afterTheDatabase && fast.failedTrip == "apply" && firstUploadFailed
                #expect(outcomes == (answerLost ? [.alreadyGranted, .alreadyGranted] : [.granted, .alreadyGranted]), "round trip \(at) of \(fast.trips)")
                #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100, "round trip \(at): credited once")
                #expect(try await ledger.order(order.orderId)?.state == .granted)
                if let trip = fast.failedTrip { failedTrips.insert(trip) }
            }
        }
        #expect(failedTrips.isSuperset(of: ["facts", "apply"]), "\(failedTrips)")
    }

    @Test("A purchase, a notification and a spend fail at each of their statements in turn; then succeed exactly once", arguments: StoreKind.allCases)
    func everyStatement(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("atomic-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken)
        var failures = 0
        for failAt in 1...30 {
            let failing = Ledger(store: FailingStore(ledger.sqlStore, failAt: failAt), catalog: ledger.catalog)
            do {
                _ = try await failing.submit(.init(accountId: account, orderId: order.orderId, transaction: paid))
                break
            } catch {
                failures += 1
                #expect(try await ledger.purchases(accountId: account).isEmpty, "statement \(failAt): the purchase row was rolled back")
                #expect(try await ledger.entitlements(accountId: account).balances["coins"] == nil, "statement \(failAt): no credit")
                #expect(try await ledger.order(order.orderId)?.state == .created, "statement \(failAt): the order is untouched")
            }
        }
        #expect(failures >= 5, "the submission ran through several statements")
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)

        // A refund notification, failing at each statement: the clawback happens once, with the notification's row.
        var refunded = paid
        refunded.revocationDate = Date()
        refunded.signedDate = Date().addingTimeInterval(1)
        let event = NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: Date(), signedPayload: "x", transaction: refunded)
        for failAt in 1...30 {
            do {
                // Applied (not "duplicate") at the first run that gets through: no failed run kept the notification's row.
                let outcome = try await Ledger(store: FailingStore(ledger.sqlStore, failAt: failAt), catalog: ledger.catalog).apply(event)
                #expect(outcome == .applied, "statement \(failAt): an earlier failed run left the notification stored")
                break
            } catch {
                #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100, "statement \(failAt): no clawback yet")
            }
        }
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 0)
        #expect(try await ledger.apply(event) == .duplicate)

        // A spend that fails part-way leaves the balance and the idempotency key as they were.
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.coins, type: .consumable)))
        for failAt in 1...10 {
            do {
                _ = try await Ledger(store: FailingStore(ledger.sqlStore, failAt: failAt), catalog: ledger.catalog)
                    .spend(accountId: account, currency: "coins", amount: 40, idempotencyKey: "atomic")
                break
            } catch {
                #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100, "statement \(failAt): nothing spent")
            }
        }
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 40, idempotencyKey: "atomic") == 60)
    }
}
