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
    /// the caller as notifications' renewal info is: its auto-renew state, next product, expiration intent, billing
    /// retry and price-increase status replace the series', but only for a series `accountId` holds (its latest
    /// period's holder), and only when newer (by `signedDate`) than what the ledger holds. It grants nothing (a grace
    /// period, a status, come from the App Store's own word) and tells the backend nothing: Apple's own notification of
    /// the same change does. A notification signed earlier and delivered later sets the status it carries and leaves this
    /// newer renewal info shown.
    public func applyDeviceRenewalInfo(_ renewal: JWSRenewalInfoDecodedPayload, accountId: String) async throws -> DeviceRenewalOutcome {
        try Self.checkAccountId(accountId)
        guard let original = renewal.originalTransactionId, !original.isEmpty, original.utf8.count <= 64, let signed = renewal.signedDate else {
            throw LedgerError(.invalidInput, "renewal info needs its originalTransactionId and signedDate")
        }
        let key = TransactionKey.key(original, in: renewal.environment ?? .production)
        return try await write { session in
            try await session.lockSeries(key)
            let holder = try await session.sql.first(LedgerSession.seriesHolderQuery("$1", latest: true), [.text(key)])?.optionalText(0)
            let autoRenewable = try await session.sql.first("SELECT 1 FROM purchases WHERE original_transaction_id = $1 AND product_type = $2 LIMIT 1",
                                                            [.text(key), .text(ProductType.autoRenewableSubscription.rawValue)]) != nil
            guard holder == accountId, autoRenewable else { return .notOwned }
            // Dated apart from the series' status (`signed_date`): renewal info says nothing of the status, and a status
            // dated by it would refuse a notification signed before it but delivered after (a refund reversed, a grace
            // period), or let a revoked status outdate the period Apple signed again. So it is applied only when newer
            // than both what the App Store said of the series and the last device's renewal info, and moves neither.
            let held = try await session.sql.first("SELECT signed_date, device_renewal_signed_date FROM subscriptions WHERE original_transaction_id = $1",
                                                   [.text(key)])
            let newest = max(held.flatMap { $0.optionalInt(0) } ?? 0, held.flatMap { $0.optionalInt(1) } ?? 0)
            guard Millis.of(signed) > newest else { return .older }
            guard try await session.applyDeviceRenewal(originalTransactionId: key, renewal, signed: signed) else { return .older }
            return .applied
        }
    }
}
