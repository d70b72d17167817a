import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger
import Testing

/// A store that fails the `failAt`-th statement of every write: the database's own rollback must leave nothing.
final class FailingStore: LedgerStore, @unchecked Sendable {
    let inner: any LedgerStore
    let failAt: Int
    var kind: LedgerStoreKind { inner.kind }

    init(_ inner: any LedgerStore, failAt: Int) {
        self.inner = inner
        self.failAt = failAt
    }

    struct Injected: Error {}

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) throws -> R) async throws -> R {
        let failAt = failAt
        return try await inner.write { sql in try body(Counting(inner: sql, failAt: failAt)) }
    }

    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) throws -> R) async throws -> R {
        try await inner.read(body)
    }

    func close() async throws { try await inner.close() }

    /// Counts statements and throws at the chosen one.
    final class Counting: SQLExecutor {
        let inner: any SQLExecutor
        let failAt: Int
        private var count = 0
        init(inner: any SQLExecutor, failAt: Int) { self.inner = inner; self.failAt = failAt }

        func rows(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow] {
            count += 1
            if count == failAt { throw Injected() }
            return try inner.rows(sql, binds)
        }
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
