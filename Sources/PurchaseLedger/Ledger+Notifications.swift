import AppStoreFormats
import Foundation

/// A verified App Store Server Notification V2, with its nested signed data already verified and decoded.
public struct NotificationEvent: Sendable {
    public var notificationUUID: String
    public var type: NotificationTypeV2
    public var subtype: NotificationSubtype?
    public var signedDate: Date
    /// The body as received, kept for audit and replay.
    public var signedPayload: String
    public var transaction: JWSTransactionDecodedPayload?
    public var renewal: JWSRenewalInfoDecodedPayload?
    public var status: SubscriptionStatus?
    /// The customer's app transaction, for notifications about the customer rather than a purchase (`RESCIND_CONSENT`).
    public var appTransactionId: String?

    public init(notificationUUID: String, type: NotificationTypeV2, subtype: NotificationSubtype?, signedDate: Date, signedPayload: String,
                transaction: JWSTransactionDecodedPayload? = nil, renewal: JWSRenewalInfoDecodedPayload? = nil, status: SubscriptionStatus? = nil) {
        self.notificationUUID = notificationUUID
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.signedPayload = signedPayload
        self.transaction = transaction
        self.renewal = renewal
        self.status = status
    }
}

extension Ledger {
    /// What applying a notification came to.
    public enum NotificationOutcome: String, Sendable, Hashable {
        case applied
        /// Its `notificationUUID` was seen before: nothing changed.
        case duplicate
    }

    /// Stores a notification and applies what it says, once per `notificationUUID`.
    ///
    /// It needs no case per notification type: the transaction it carries is stored or refreshed (later `signedDate`
    /// wins, so renewals, expiries, upgrades, refunds, revocations and reversals land right in any arrival order), bound
    /// to its series' account (or, by `appAccountToken`, to its order's), consumable balances are settled to the
    /// transaction's state, and the series keeps its latest status (by `signedDate`) and its latest period (by
    /// purchase date) — the two things Apple judges a subscription by.
    public func apply(_ event: NotificationEvent, now: Date = Date()) async throws -> NotificationOutcome {
        guard !event.notificationUUID.isEmpty, event.notificationUUID.utf8.count <= 64 else {
            throw LedgerError(.invalidInput, "notificationUUID must be 1 to 64 bytes")
        }
        let record = try event.transaction.map { try PurchaseRecord($0) }
        let catalog = catalog
        return try await write { session in
            guard try session.insertNotification(event, record: record, at: now) else { return .duplicate }
            if event.type == .rescindConsent, let appTransactionId = event.appTransactionId {
                try session.rescindConsent(appTransactionId: appTransactionId, signedDate: event.signedDate)
            }
            guard let record else { return .applied }
            if event.type == .consumptionRequest {
                try session.oweConsumptionAnswer(notificationUUID: event.notificationUUID, transactionId: record.transactionId, signedDate: event.signedDate)
            }
            try session.lockSeries(record.originalTransactionId)
            let facts = try session.facts(for: record, namedOrderId: nil, catalog: catalog)
            if let refusal = SubmissionRules.environmentRefusal(record, facts) { throw refusal }
            try session.apply(SubmissionRules.notified(record, facts: facts, catalog: catalog, now: now))
            // The series' own news, for its account's backend — when newer than what the ledger holds of the series.
            if let owner = facts.owner, let told = WebhookRules.subscriptionEvent(
                type: event.type, subtype: event.subtype, status: event.status, notificationUUID: event.notificationUUID, record: record,
                accountId: owner, newProductId: event.renewal?.autoRenewProductId, now: now) {
                let series = try session.series(record.originalTransactionId)
                // A reconciled state is news only when the status changed, or the stored one is about an earlier period
                // (signed before the latest period began): Apple's own notification of it came first otherwise.
                let aboutEarlier = (series?.signedDate ?? .distantPast) < (series?.periodPurchaseDate ?? .distantPast)
                if (event.renewal?.signedDate ?? event.signedDate) > (series?.signedDate ?? .distantPast),
                   event.type != .reconciled || series?.status != event.status || aboutEarlier {
                    try session.apply(.emitEvent(told))
                }
            }
            // News of one transaction that says nothing of the series (no status, no renewal info) leaves the series'
            // status as it was: unknown is not "none", and a later signedDate must not erase a grace period.
            if record.productType == .autoRenewableSubscription, event.status != nil || event.renewal != nil {
                let renewal = event.renewal
                try session.apply(.updateSeriesStatus(SubscriptionRecord(
                    originalTransactionId: record.originalTransactionId, status: event.status,
                    gracePeriodExpiresDate: renewal?.gracePeriodExpiresDate, autoRenew: renewal?.autoRenewStatus.map { $0 == .on },
                    autoRenewProductId: renewal?.autoRenewProductId, signedDate: renewal?.signedDate ?? event.signedDate,
                    expirationIntent: renewal?.expirationIntent, isInBillingRetryPeriod: renewal?.isInBillingRetryPeriod,
                    priceIncreaseStatus: renewal?.priceIncreaseStatus)))
            }
            // A subscription migrated to the Advanced Commerce API goes on under a new original transaction id: the
            // series it continues ended at the migration, whatever its last period's nominal expiry says (a refund of
            // the migrated period must not leave the old period granting). Told by the migrated series' first period,
            // dated at the migration: a later resubscription of the old series is news after it. A series the ledger
            // has never seen is left alone, so that its first upload still grants until the migrated period is bound.
            if let previous = SubmissionRules.migratedFrom(record), try session.knowsSeries(previous) {
                try session.apply(.updateSeriesStatus(SubscriptionRecord(originalTransactionId: previous, status: .expired, autoRenew: false,
                                                                         signedDate: record.purchaseDate)))
            }
            return .applied
        }
    }

    /// How many notifications the ledger holds (for metrics and tests).
    public func notificationCount() async throws -> Int {
        try await read { Int(try $0.notificationCount()) }
    }
}
