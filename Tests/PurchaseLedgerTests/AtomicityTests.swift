import AppStoreFormats
import Foundation
import Logging
import NIOCore
import PurchaseLedger
import SQLKit
import Testing

/// A store that fails the `failAt`-th statement of every transaction: the database's own rollback must leave nothing.
final class FailingStore: LedgerStore, @unchecked Sendable {
    let inner: any LedgerStore
    let failAt: Int
    var kind: String { inner.kind }

    init(_ inner: any LedgerStore, failAt: Int) {
        self.inner = inner
        self.failAt = failAt
    }

    struct Injected: Error {}

    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await inner.transaction { db in try await body(Counting(inner: db, failAt: self.failAt)) }
    }

    func close() async throws { try await inner.close() }

    /// Counts statements and throws at the chosen one.
    final class Counting: SQLDatabase, @unchecked Sendable {
        let inner: any SQLDatabase
        let failAt: Int
        private var count = 0
        init(inner: any SQLDatabase, failAt: Int) { self.inner = inner; self.failAt = failAt }
        var logger: Logger { inner.logger }
        var eventLoop: any EventLoop { inner.eventLoop }
        var version: (any SQLDatabaseReportedVersion)? { inner.version }
        var dialect: any SQLDialect { inner.dialect }
        var queryLogLevel: Logger.Level? { inner.queryLogLevel }

        func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) -> EventLoopFuture<Void> {
            count += 1
            if count == failAt { return eventLoop.makeFailedFuture(Injected()) }
            return inner.execute(sql: query, onRow)
        }

        func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) async throws {
            count += 1
            if count == failAt { throw Injected() }
            try await inner.execute(sql: query, onRow)
        }

        func withSession<R>(_ closure: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R { try await closure(self) }
    }
}

@Suite("No half-applied state: a failure at any statement of an operation leaves nothing behind")
struct AtomicityTests {
    @Test("A purchase, a notification and a spend fail at each of their statements in turn; then succeed exactly once", arguments: StoreKind.allCases)
    func everyStatement(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("atomic-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken)
        var failures = 0
        for failAt in 1...30 {
            let failing = Ledger(store: FailingStore(ledger.store, failAt: failAt), catalog: ledger.catalog)
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
                let outcome = try await Ledger(store: FailingStore(ledger.store, failAt: failAt), catalog: ledger.catalog).apply(event)
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
                _ = try await Ledger(store: FailingStore(ledger.store, failAt: failAt), catalog: ledger.catalog)
                    .spend(accountId: account, currency: "coins", amount: 40, idempotencyKey: "atomic")
                break
            } catch {
                #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100, "statement \(failAt): nothing spent")
            }
        }
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 40, idempotencyKey: "atomic") == 60)
    }
}
