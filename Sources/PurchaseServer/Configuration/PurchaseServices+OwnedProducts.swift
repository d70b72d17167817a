import PurchaseLedger

extension PurchaseServices {
    /// Refuses a catalog that dropped a product customers hold (`Ledger.ownedProductsMissingFromCatalog()`): Apple
    /// never reuses a product id, and a product the catalog no longer lists would silently lose what was bought of it
    /// (entitlements, restores, late payments and refunds). Run at start, after the migrations (``open(_:roots:)``).
    /// - Throws: ``ConfigurationError`` naming each such product id and how to keep it: `"retired": true`.
    public static func checkCatalogKeepsOwnedProducts(_ ledger: Ledger) async throws {
        let missing = try await ledger.ownedProductsMissingFromCatalog()
        guard !missing.isEmpty else { return }
        throw ConfigurationError(
            "the catalog no longer lists \(missing.count == 1 ? "a product" : "products") customers bought or have open orders for: "
                + "\(missing.joined(separator: ", ")). Apple never reuses a product id, and what was bought stays owned (a refund Apple "
                + "reverses, an Ask to Buy approved late still pays): keep \(missing.count == 1 ? "it" : "each") in the catalog "
                + "marked \"retired\": true (no longer sold, still honoured; docs/CONFIGURATION.md)")
    }
}
