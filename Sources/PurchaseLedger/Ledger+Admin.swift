import AppStoreFormats
import Foundation
import SQLKit

/// What an operator sees and does about orders that did not end well. Every action is audited.
extension Ledger {
    /// Which orders to list.
    public enum OrderFilter: String, Sendable, CaseIterable {
        case created, granted, settled
        /// Open orders with evidence of payment: a proof waiting for Apple, or a stored transaction carrying the
        /// order's token that is not bound to it.
        case paidUnfulfilled = "paid-unfulfilled"
        /// Open orders past their expiry with no transaction seen: abandoned, or paid and lost on the way.
        case stuck
    }

    /// Orders matching `filter`, newest first.
    public func orders(_ filter: OrderFilter, now: Date = Date(), limit: Int = 200) async throws -> [Order] {
        try await transaction { db in
            let columns = "order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at"
            let query: SQLQueryString
            switch filter {
            case .created, .granted, .settled:
                query = "SELECT \(unsafeRaw: columns) FROM orders WHERE state = \(bind: filter.rawValue) ORDER BY created_at DESC LIMIT \(bind: Int64(limit))"
            case .paidUnfulfilled:
                query = """
                    SELECT \(unsafeRaw: columns) FROM orders o WHERE o.state = 'created' AND (
                        EXISTS (SELECT 1 FROM pending_proofs p WHERE p.order_id = o.order_id AND p.state = 'pending')
                        OR EXISTS (SELECT 1 FROM purchases t WHERE t.app_account_token = o.app_account_token))
                    ORDER BY o.created_at DESC LIMIT \(bind: Int64(limit))
                    """
            case .stuck:
                query = """
                    SELECT \(unsafeRaw: columns) FROM orders o WHERE o.state = 'created' AND o.expires_at < \(bind: Millis.of(now))
                        AND NOT EXISTS (SELECT 1 FROM purchases t WHERE t.app_account_token = o.app_account_token)
                    ORDER BY o.created_at DESC LIMIT \(bind: Int64(limit))
                    """
            }
            return try await db.raw(query).all().map(Self.decodeOrder)
        }
    }

    /// Settles an open order by hand: with a verified `transaction`, binds and grants it to the order's account (once,
    /// as any submission); without one, closes the order as `settled` with `note` (e.g. refunded outside the store).
    public func settle(orderId: String, transaction: JWSTransactionDecodedPayload?, note: String, actor: String, now: Date = Date()) async throws -> Order {
        guard let order = try await self.order(orderId) else { throw LedgerError(.orderNotFound, "no order \(orderId)") }
        guard note.utf8.count <= 2000 else { throw LedgerError(.invalidInput, "the note is over 2000 bytes") }
        if let transaction {
            let result = try await submit(.init(accountId: order.accountId, orderId: orderId, transaction: transaction, source: "admin"), now: now)
            try await audit(actor: actor, action: "settle-with-transaction", subject: orderId,
                            detail: "transaction \(result.transactionId): \(result.outcome.rawValue); \(note)", now: now)
        } else {
            try await self.transaction { db in
                try await db.raw("""
                    UPDATE orders SET state = 'settled', note = \(bind: note), updated_at = \(bind: Millis.of(now))
                    WHERE order_id = \(bind: orderId) AND state = 'created'
                    """).run()
                try await Self.audit(db, actor: actor, action: "settle", subject: orderId, detail: note, now: now)
            }
        }
        return try await self.order(orderId) ?? order
    }

    /// Records an operator's or the reconciliation job's action.
    public func audit(actor: String, action: String, subject: String, detail: String, now: Date = Date()) async throws {
        try await transaction { db in try await Self.audit(db, actor: actor, action: action, subject: subject, detail: detail, now: now) }
    }

    static func audit(_ db: any SQLDatabase, actor: String, action: String, subject: String, detail: String, now: Date) async throws {
        try await db.raw("""
            INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at)
            VALUES (\(bind: UUID().uuidString.lowercased()), \(bind: String(actor.prefix(200))), \(bind: action), \(bind: String(subject.prefix(200))),
                    \(bind: String(detail.prefix(4000))), \(bind: Millis.of(now)))
            """).run()
    }

    /// One audit entry.
    public struct AuditEntry: Sendable, Hashable, Codable {
        public var actor: String
        public var action: String
        public var subject: String
        public var detail: String
        public var at: Date
    }

    /// The audit log, newest first.
    public func auditLog(limit: Int = 200) async throws -> [AuditEntry] {
        try await transaction { db in
            try await db.raw("SELECT actor, action, subject, detail, created_at FROM audit_log ORDER BY created_at DESC LIMIT \(bind: Int64(limit))").all().map {
                AuditEntry(actor: try $0.decode(column: "actor", as: String.self), action: try $0.decode(column: "action", as: String.self),
                           subject: try $0.decode(column: "subject", as: String.self), detail: try $0.decode(column: "detail", as: String.self),
                           at: Millis.date(try $0.decode(column: "created_at", as: Int64.self)))
            }
        }
    }

    /// Original transaction ids of auto-renewable series whose latest known expiry fell between `since` and `before`
    /// with no newer period: candidates for asking Apple whether a renewal notification was missed.
    public func staleSubscriptions(since: Date, before: Date, limit: Int = 100) async throws -> [(originalTransactionId: String, accountId: String)] {
        try await transaction { db in
            try await db.raw("""
                SELECT original_transaction_id, MIN(account_id) AS account_id, MAX(expires_date) AS latest FROM purchases
                WHERE product_type = \(bind: ProductType.autoRenewableSubscription.rawValue) AND account_id IS NOT NULL AND revocation_date IS NULL
                GROUP BY original_transaction_id HAVING MAX(expires_date) < \(bind: Millis.of(before)) AND MAX(expires_date) >= \(bind: Millis.of(since))
                ORDER BY latest DESC LIMIT \(bind: Int64(limit))
                """).all().map { (try $0.decode(column: "original_transaction_id", as: String.self), try $0.decode(column: "account_id", as: String.self)) }
        }
    }
}

extension Ledger {
    /// Open orders created before `before`, oldest first: payments that may have happened without reaching the server.
    public func openOrders(createdBefore before: Date, limit: Int = 100) async throws -> [Order] {
        try await transaction { db in
            try await db.raw("""
                SELECT order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at FROM orders
                WHERE state = 'created' AND created_at < \(bind: Millis.of(before)) ORDER BY created_at LIMIT \(bind: Int64(limit))
                """).all().map(Self.decodeOrder)
        }
    }

    /// One transaction id bound to `accountId`, if any: a handle for asking Apple about the customer's history.
    public func anyTransactionId(accountId: String) async throws -> String? {
        try await transaction { db in
            try await db.raw("SELECT transaction_id FROM purchases WHERE account_id = \(bind: accountId) ORDER BY purchase_date DESC LIMIT 1")
                .first()?.decode(column: "transaction_id", as: String.self)
        }
    }
}
