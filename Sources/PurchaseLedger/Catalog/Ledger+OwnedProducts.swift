import Foundation

extension Ledger {
    /// Every product id the ledger may still have to judge a purchase of: each stored transaction's — bound or not
    /// (a purchase only a notification told of is claimed later by a restore), refunded or not (Apple reverses
    /// refunds: `REFUND_REVERSED` gives it back), of every type and environment, expired subscriptions and spent
    /// consumables included — and each open order's that the app did not say ended unpaid (an Ask to Buy approval, or
    /// an interrupted purchase, pays it days later).
    ///
    /// A full scan of both tables, since no index leads with `product_id` (measured before the orders were added:
    /// 20–30 ms for 100,000 purchases, warm, on SQLite and on PostgreSQL; linear in the tables). It runs once, when the
    /// server starts.
    public func ownedProductIds() async throws -> Set<String> {
        try await read { session in
            Set(try await session.sql.rows(Self.ownedProductsQuery, []).map { try $0.text(0) })
        }
    }

    static let ownedProductsQuery = """
        SELECT product_id FROM purchases UNION SELECT product_id FROM orders WHERE state = 'created' AND abandoned_at IS NULL
        """

    /// The product ids the ledger may still judge a purchase of (``ownedProductIds()``) that the catalog does not list,
    /// sorted: what a catalog that dropped them would silently take away. Retire such a product
    /// (``ProductRule/retired``) instead.
    public func ownedProductsMissingFromCatalog() async throws -> [String] {
        let catalog = catalog
        return try await ownedProductIds().filter { catalog.rule(for: $0) == nil }.sorted()
    }
}
