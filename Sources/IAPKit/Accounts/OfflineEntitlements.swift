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
    /// How far the device's clock may be behind the server's before an answer counts as issued in the device's future.
    static let clockSkew: TimeInterval = 300

    /// The entitlements a kept answer may be served as at the device's `now`, with when the server issued it; or why
    /// not. With a `verifier` only what the server's signature covers is believed (the file's own copy is not: the
    /// file can be edited), and the signed `issuedAt` dates it; without one, when the device kept it.
    ///
    /// The device's clock is the customer's to set: an answer issued after the device's `now` (beyond a few minutes of
    /// skew) is refused, and so is any `now` behind the latest time the device already showed while the copy was kept
    /// (``CachedEntitlements/latestDeviceTime``) — a clock set back would otherwise keep alive a plan the device has
    /// seen expire. One older than `maxAge` is not served either (what it grants may have been refunded since).
    static func trusted(_ kept: CachedEntitlements, verifier: EntitlementsVerifier?, now: Date,
                        maxAge: TimeInterval?) -> Result<(entitlements: Entitlements, issuedAt: Date), PurchaseFailure> {
        var answer = (entitlements: kept.entitlements, issuedAt: kept.cachedAt)
        if let verifier {
            guard let jws = kept.signedEntitlements, let nonce = kept.nonce else {
                return .failure(PurchaseFailure(.untrustedAnswer, "the offline copy is not signed, and this client only believes signed entitlements"))
            }
            do { answer = try verifier.verifiedAnswer(jws, nonce: nonce) } catch { return .failure(error) }
            guard answer.entitlements.accountId == kept.entitlements.accountId else {
                return .failure(PurchaseFailure(.untrustedAnswer, "the offline copy's signature is another account's"))
            }
        }
        if now < answer.issuedAt.addingTimeInterval(-clockSkew) {
            return .failure(PurchaseFailure(.untrustedAnswer, "the device's clock is earlier than the offline copy was issued: it is not served"))
        }
        if let seen = kept.latestDeviceTime, now < seen.addingTimeInterval(-clockSkew) {
            return .failure(PurchaseFailure(.untrustedAnswer, "the device's clock went back since the offline copy was last read: it is not served"))
        }
        if let maxAge, now.timeIntervalSince(answer.issuedAt) > maxAge {
            return .failure(PurchaseFailure(.untrustedAnswer, "the offline copy is older than the \(Int(maxAge)) s it may be served for"))
        }
        return .success(answer)
    }

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
