/// Purchases the customer started on the App Store, held until the app is ready for them (after its sign-in, say):
/// this launch's in memory, earlier launches' in the journal, each with the win-back offer the App Store showed.
struct PromotedPurchases {
    private(set) var held: [PromotedPurchase] = []
    /// Whether the app said it can take them (``PurchaseClient/readyForPromotedPurchases()``).
    private(set) var ready = false

    /// Holds `intent` unless one for its product is held already (then false). Whether the app is ready is the caller's
    /// question.
    @discardableResult
    mutating func hold(_ intent: PromotedPurchase) -> Bool {
        guard !held.contains(where: { $0.productId == intent.productId }) else { return false }
        held.append(intent)
        return true
    }

    /// The app is ready: everything held, this launch's first, then the journal's that this launch did not hold.
    mutating func release(journaled entries: [JournalEntry]) -> [PromotedPurchase] {
        ready = true
        var all = held
        held = []
        for entry in entries where entry.kind == .promoted && !all.contains(where: { $0.productId == entry.productId }) {
            all.append(PromotedPurchase(productId: entry.productId, winBackOfferId: entry.winBackOfferId))
        }
        return all
    }
}
