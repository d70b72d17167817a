import AppStoreFormats
import Foundation

extension Ledger {
    /// What applying a device's renewal info came to.
    public enum DeviceRenewalOutcome: String, Sendable, Hashable {
        case applied
        /// The ledger holds renewal info (or a status) of the series signed no earlier, or holds the App Store's status
        /// of the series at all (see ``applyDeviceRenewalInfo(_:accountId:)``): nothing changed.
        case older
        /// No auto-renewable series of `accountId` has this original transaction id (unknown, or another account's).
        case notOwned
    }

    /// A device's signed renewal info (StoreKit's `Product.SubscriptionInfo.Status.renewalInfo`), already verified by
    /// the caller as notifications' renewal info is: applied to its series as a notification's would be, but only to a
    /// series `accountId` holds (its latest period's holder), and only when newer (by `signedDate`) than what the ledger
    /// holds. It grants nothing and tells the backend nothing: Apple's own notification of the same change does.
    public func applyDeviceRenewalInfo(_ renewal: JWSRenewalInfoDecodedPayload, accountId: String) async throws -> DeviceRenewalOutcome {
        try Self.checkAccountId(accountId)
        guard let original = renewal.originalTransactionId, !original.isEmpty, original.utf8.count <= 64, let signed = renewal.signedDate else {
            throw LedgerError(.invalidInput, "renewal info needs its originalTransactionId and signedDate")
        }
        let key = TransactionKey.key(original, in: renewal.environment ?? .production)
        return try await write { session in
            try session.lockSeries(key)
            let holder = try session.sql.first(LedgerSession.seriesHolderQuery("$1", latest: true), [.text(key)])?.optionalText(0)
            let autoRenewable = try session.sql.first("SELECT 1 FROM purchases WHERE original_transaction_id = $1 AND product_type = $2 LIMIT 1",
                                                      [.text(key), .text(ProductType.autoRenewableSubscription.rawValue)]) != nil
            guard holder == accountId, autoRenewable else { return .notOwned }
            if let stored = try session.series(key) {
                if Millis.of(stored.signedDate) >= Millis.of(signed) { return .older }
                // A status the App Store gave (a notification, the Server API) holds as of the series' signedDate, which
                // renewal info without a status must not move later: a notification signed before this info but
                // delivered after it (a refund reversed, a grace period) would be refused, and a revoked status would
                // outdate the period Apple signed again. Where Apple's word on the series reaches the server, its
                // renewal info comes with it.
                if stored.status != nil { return .older }
            }
            try session.apply(.updateSeriesStatus(SubscriptionRecord(
                originalTransactionId: key, gracePeriodExpiresDate: renewal.gracePeriodExpiresDate,
                autoRenew: renewal.autoRenewStatus.map { $0 == .on }, autoRenewProductId: renewal.autoRenewProductId, signedDate: signed,
                expirationIntent: renewal.expirationIntent, isInBillingRetryPeriod: renewal.isInBillingRetryPeriod,
                priceIncreaseStatus: renewal.priceIncreaseStatus)))
            return .applied
        }
    }
}
