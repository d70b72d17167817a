import AppStoreFormats
import Foundation

/// What a notification says of its subscription series beyond the transaction it carries (which
/// ``SubmissionRules/notified(_:facts:catalog:now:)`` decides on): the event the series' account's backend hears, the
/// series' status and renewal info, and the end of a series migrated away. Pure; decided on the series as the
/// transaction's own effects left it (its latest period moved on), which the ledger reads in between.
public enum NotificationRules {
    /// The event the series' account (`owner`) would hear of this notification, if any — whether it is news is
    /// decided by ``seriesNews(_:record:told:series:previousSeriesKnown:)`` on the series as stored.
    public static func candidateEvent(_ event: NotificationEvent, record: PurchaseRecord, owner: String?, now: Date) -> WebhookEvent? {
        guard let owner else { return nil }
        return WebhookRules.subscriptionEvent(type: event.type, subtype: event.subtype, status: event.status, notificationUUID: event.notificationUUID,
                                              record: record, accountId: owner, newProductId: event.renewal?.autoRenewProductId, now: now)
    }

    /// The series' news. `told`: the ``candidateEvent(_:record:owner:now:)``; `series`: the series' stored status, read
    /// after the transaction's effects (needed only with an event to judge); `previousSeriesKnown`: whether the ledger
    /// holds the series a migrated subscription continues (``SubmissionRules/migratedFrom(_:)``).
    public static func seriesNews(_ event: NotificationEvent, record: PurchaseRecord, told: WebhookEvent?, series: SubscriptionRecord?,
                                  previousSeriesKnown: Bool) -> [LedgerEffect] {
        var effects: [LedgerEffect] = []
        // The series' own news, for its account's backend — when newer than what the ledger holds of the series.
        if let told {
            // A reconciled state is news only when the status changed, or the stored one is about an earlier period
            // (signed before the latest period began): Apple's own notification of it came first otherwise.
            let aboutEarlier = (series?.signedDate ?? .distantPast) < (series?.periodPurchaseDate ?? .distantPast)
            if (event.renewal?.signedDate ?? event.signedDate) > (series?.signedDate ?? .distantPast),
               event.type != .reconciled || series?.status != event.status || aboutEarlier {
                effects.append(.emitEvent(told))
            }
        }
        // News of one transaction that says nothing of the series (no status, no renewal info) leaves the series'
        // status as it was: unknown is not "none", and a later signedDate must not erase a grace period.
        if record.productType == .autoRenewableSubscription, event.status != nil || event.renewal != nil {
            let renewal = event.renewal
            effects.append(.updateSeriesStatus(SubscriptionRecord(
                originalTransactionId: record.originalTransactionId, status: event.status,
                gracePeriodExpiresDate: renewal?.gracePeriodExpiresDate, autoRenew: renewal?.autoRenewStatus.map { $0 == .on },
                autoRenewProductId: renewal?.autoRenewProductId, signedDate: renewal?.signedDate ?? event.signedDate,
                expirationIntent: renewal?.expirationIntent, isInBillingRetryPeriod: renewal?.isInBillingRetryPeriod,
                priceIncreaseStatus: renewal?.priceIncreaseStatus)))
        }
        // A subscription migrated to the Advanced Commerce API goes on under a new original transaction id: the series
        // it continues ended at the migration, whatever its last period's nominal expiry says (a refund of the migrated
        // period must not leave the old period granting). Told by the migrated series' first period, dated at the
        // migration: a later resubscription of the old series is news after it. A series the ledger has never seen is
        // left alone, so that its first upload still grants until the migrated period is bound.
        if let previous = SubmissionRules.migratedFrom(record), previousSeriesKnown {
            effects.append(.updateSeriesStatus(SubscriptionRecord(originalTransactionId: previous, status: .expired, autoRenew: false,
                                                                  signedDate: record.purchaseDate)))
        }
        return effects
    }
}
