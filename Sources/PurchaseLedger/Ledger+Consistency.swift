import AppStoreFormats
import Foundation

extension Ledger {
    /// One way the ledger disagrees with itself.
    public struct Inconsistency: Sendable, Hashable, CustomStringConvertible {
        /// A stable name for the check that failed.
        public var check: String
        public var detail: String
        public var description: String { "\(check): \(detail)" }
    }

    /// The ledger's own checks, read in one snapshot: each balance equals the sum of its movements; every movement
    /// tied to a transaction is that transaction's, bound to the same account, and a consumable's net credit is its
    /// quantity's worth while it stands, less what a refund took back (granted exactly once); every granted order names a
    /// transaction bound to the order's account. Empty when all hold. For operators (`GET /admin/consistency`) and
    /// for the history explorer after every history.
    public func inconsistencies(limit: Int = 100) async throws -> [Inconsistency] {
        let catalog = catalog
        return try await read { session in
            var found: [Inconsistency] = []
            let sql = session.sql
            // Balances against the sum of their movements (either side may be missing). Sums are cast back to BIGINT:
            // PostgreSQL sums BIGINT as NUMERIC.
            for row in try await sql.rows("""
                SELECT a, c, CAST(SUM(stored) AS BIGINT), CAST(SUM(moved) AS BIGINT) FROM (
                    SELECT account_id AS a, currency AS c, amount AS stored, 0 AS moved FROM balances
                    UNION ALL SELECT account_id, currency, 0, delta FROM balance_entries) AS both_sides
                GROUP BY a, c HAVING SUM(stored) <> SUM(moved) LIMIT $1
                """, [.int(Int64(limit))]) {
                found.append(.init(check: "balance-equals-movements",
                                   detail: "\(try row.text(0)) \(try row.text(1)): balance \(row.optionalInt(2) ?? 0), movements \(row.optionalInt(3) ?? 0)"))
            }
            // Movements tied to a transaction: the transaction's own account.
            for row in try await sql.rows("""
                SELECT e.entry_key, e.account_id, p.account_id FROM balance_entries e LEFT JOIN purchases p ON p.transaction_id = e.transaction_id
                WHERE e.transaction_id IS NOT NULL AND (p.transaction_id IS NULL OR p.account_id IS NULL OR p.account_id <> e.account_id) LIMIT $1
                """, [.int(Int64(limit))]) {
                found.append(.init(check: "movement-has-proof",
                                   detail: "\(try row.text(0)) credits \(try row.text(1)); its transaction is \(row.optionalText(2).map { "bound to \($0)" } ?? "missing or unbound")"))
            }
            // Consumables: the net credit follows the transaction's state, and one grant entry at most.
            for row in try await sql.rows("""
                SELECT p.transaction_id, p.account_id, p.product_id, p.quantity, p.revocation_date,
                       CAST(COALESCE(SUM(e.delta), 0) AS BIGINT), CAST(COALESCE(SUM(CASE WHEN e.entry_key LIKE 'grant:%' THEN 1 ELSE 0 END), 0) AS BIGINT),
                       p.revocation_type, p.revocation_percentage, p.environment
                FROM purchases p LEFT JOIN balance_entries e ON e.transaction_id = p.transaction_id
                WHERE p.product_type = $1 AND p.account_id IS NOT NULL
                GROUP BY p.transaction_id, p.account_id, p.product_id, p.quantity, p.revocation_date, p.revocation_type, p.revocation_percentage,
                         p.environment
                LIMIT $2
                """, [.text(ProductType.consumable.rawValue), .int(Int64(limit * 100))]) {
                let transactionId = try row.text(0)
                guard let rule = catalog.rule(for: try row.text(2)), let amount = rule.amount else { continue }
                var payload = JWSTransactionDecodedPayload()
                (payload.transactionId, payload.productId, payload.type) = (transactionId, try row.text(2), .consumable)
                (payload.quantity, payload.purchaseDate) = (Int(clamping: try row.int(3)), Date(timeIntervalSince1970: 0))
                payload.revocationDate = row.optionalInt(4).map(Millis.date)
                payload.revocationType = row.optionalText(7).map(RevocationType.init(rawValue:))
                payload.revocationPercentage = row.optionalInt(8).map { Int(clamping: $0) }
                payload.environment = AppStoreEnvironment(rawValue: try row.text(9))
                let expected = ConsumableRules.standingCredit(of: try PurchaseRecord(keyed: payload), amount: amount)
                let (net, grants) = (row.optionalInt(5) ?? 0, row.optionalInt(6) ?? 0)
                if net != expected || grants > 1 {
                    found.append(.init(check: "consumable-credited-once",
                                       detail: "\(transactionId) for \(try row.text(1)): net credit \(net), expected \(expected), \(grants) grant entries"))
                }
            }
            // Granted orders: their transaction exists and is the order's account's.
            for row in try await sql.rows("""
                SELECT o.order_id, o.account_id, o.transaction_id, p.account_id FROM orders o LEFT JOIN purchases p ON p.transaction_id = o.transaction_id
                WHERE o.state = 'granted' AND (p.transaction_id IS NULL OR p.account_id IS NULL OR p.account_id <> o.account_id) LIMIT $1
                """, [.int(Int64(limit))]) {
                found.append(.init(check: "granted-order-has-its-transaction",
                                   detail: "order \(try row.text(0)) of \(try row.text(1)) names \(row.optionalText(2) ?? "no transaction"), bound to \(row.optionalText(3) ?? "nobody")"))
            }
            return Array(found.prefix(limit))
        }
    }
}
