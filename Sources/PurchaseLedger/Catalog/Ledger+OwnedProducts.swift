import Foundation

extension Ledger {
    /// Every product id of a purchase an account holds: bound to an account and not revoked (refunded, or revoked by
    /// Family Sharing), of every type and environment, expired subscriptions and spent consumables included — each
    /// still needs its rule (a restore, a renewal or resubscription, a refund to claw back, a consumption request).
    ///
    /// One `SELECT DISTINCT` over `purchases`: a full scan, since no index leads with `product_id` (measured: 20–30 ms
    /// for 100,000 purchases, warm, on SQLite and on PostgreSQL; linear in the table). It runs once, when the server starts.
    public func ownedProductIds() async throws -> Set<String> {
        try await read { session in
            Set(try session.sql.rows(Self.ownedProductsQuery, []).map { try $0.text(0) })
        }
    }

    static let ownedProductsQuery = "SELECT DISTINCT product_id FROM purchases WHERE account_id IS NOT NULL AND revocation_date IS NULL"

    /// The product ids customers hold (``ownedProductIds()``) that the catalog does not list, sorted: what a catalog
    /// that dropped them would silently take away. Retire such a product (``ProductRule/retired``) instead.
    public func ownedProductsMissingFromCatalog() async throws -> [String] {
        let catalog = catalog
        return try await ownedProductIds().filter { catalog.rule(for: $0) == nil }.sorted()
    }
}
