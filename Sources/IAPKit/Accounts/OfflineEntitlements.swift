import Foundation

/// What an account owns while the server cannot be asked: its last answer, less what has expired and the consumable
/// balances, extended by the renewals the store itself reports — a pure function, tested without a store.
enum OfflineEntitlements {
    /// `base` (the last answer kept on the device) at `now`, extended by `storeOwns` (StoreKit's
    /// `Transaction.currentEntitlements`: the whole Apple ID's).
    ///
    /// Only renewals of a series this account holds, by series and token, never by product: on a shared device another
    /// account of the app may have bought the same subscription with the same Apple ID (the same series — Apple keeps
    /// one per group — but through its own order's token). And only of the product the server granted: a downgrade
    /// (same series, same token) renews into a product whose entitlement the device cannot name, and must not carry the
    /// old tier's.
    static func derive(from base: Entitlements, storeOwns: [StoreTransaction], now: Date) -> Entitlements {
        var result = base.offline(at: now, cachedAt: base.cachedAt ?? now)
        var series: [String: Entitlements.Item] = [:]
        for item in base.entitlements { if let original = item.originalTransactionId { series[original] = item } }
        for transaction in storeOwns where transaction.revocationDate == nil && (transaction.expiresDate ?? .distantFuture) > now {
            guard let original = transaction.originalTransactionId, let item = series[original], transaction.appAccountToken == item.appAccountToken,
                  transaction.productId == item.productId, !result.has(item.name) else { continue }
            result.entitlements.append(.init(name: item.name, productId: transaction.productId, transactionId: transaction.transactionId,
                                             originalTransactionId: original, appAccountToken: item.appAccountToken,
                                             expiresAt: transaction.expiresDate, state: .active))
        }
        return result
    }
}
