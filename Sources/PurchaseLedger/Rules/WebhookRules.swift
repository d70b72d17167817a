import AppStoreFormats
import Foundation

/// An event the app's own backend is told of (outgoing webhooks), in RevenueCat's vocabulary. Written to the ledger's
/// outbox in the same transaction as the change it reports, under a stable id: the same change always makes the same
/// id, so a repeated or racing write makes it once, and a receiver deduplicates by it.
public struct WebhookEvent: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// The first period of an auto-renewable subscription series.
        case initialPurchase = "INITIAL_PURCHASE"
        /// A later period of a series.
        case renewal = "RENEWAL"
        /// The customer turned auto-renew off (or, in a commitment, the next commitment).
        case cancellation = "CANCELLATION"
        case uncancellation = "UNCANCELLATION"
        case expiration = "EXPIRATION"
        /// A renewal failed to bill (grace period or billing retry).
        case billingIssue = "BILLING_ISSUE"
        /// An upgrade, downgrade or crossgrade within the subscription group.
        case productChange = "PRODUCT_CHANGE"
        /// Apple told the subscriber of a price increase that needs their consent, not given yet (`PRICE_INCREASE` /
        /// `PENDING`): without it the subscription expires at renewal (`EXPIRED` / `PRICE_INCREASE`). Not RevenueCat's.
        case priceIncreaseConsentNeeded = "PRICE_INCREASE_CONSENT_NEEDED"
        /// The subscriber consented to a price increase, or was told of one that needs no consent (`PRICE_INCREASE` /
        /// `ACCEPTED`): the series renews at the new price. Not RevenueCat's.
        case priceIncreaseAccepted = "PRICE_INCREASE_ACCEPTED"
        case refund = "REFUND"
        case refundReversed = "REFUND_REVERSED"
        /// A non-consumable or a non-renewing subscription.
        case nonRenewingPurchase = "NON_RENEWING_PURCHASE"
        /// A consumable's credit reached the account's balance.
        case consumableCredit = "CONSUMABLE_CREDIT"
        /// An operator gave an account a transaction by settling its lost order.
        case transfer = "TRANSFER"
        /// Sent on demand to check the receiver.
        case test = "TEST"
    }

    public var id: String
    public var type: Kind
    public var accountId: String?
    /// When the change was made (the server's clock).
    public var occurredAt: Date
    public var productId: String?
    public var transactionId: String?
    public var originalTransactionId: String?
    public var environment: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    public var revocationDate: Date?
    /// Consumable credit: the currency and the amount credited.
    public var currency: String?
    public var amount: Int64?
    /// The App Store notification that told of it, for subscription events.
    public var notificationUUID: String?
    public var orderId: String?
    /// `PURCHASED` or `FAMILY_SHARED` (a family member's copy: no sale of its own).
    public var ownership: String?
    /// Refunds: `REFUND_FULL`, `REFUND_PRORATED` (with `revocationPercentage`, milliunits of a percent) or `FAMILY_REVOKE`.
    public var revocationType: String?
    public var revocationPercentage: Int?
    /// Subscription events: Apple's notification subtype (`UPGRADE`, `VOLUNTARY`, …), and for a plan change the plan
    /// that renews next.
    public var subtype: String?
    public var newProductId: String?

    public init(id: String, type: Kind, accountId: String?, occurredAt: Date) {
        self.id = id
        self.type = type
        self.accountId = accountId
        self.occurredAt = occurredAt
    }

    /// An event about `record`.
    init(_ type: Kind, _ record: PurchaseRecord, id: String, accountId: String, at: Date) {
        self.init(id: id, type: type, accountId: accountId, occurredAt: at)
        productId = record.productId
        transactionId = record.transactionId
        originalTransactionId = record.originalTransactionId
        environment = record.environment.rawValue
        purchaseDate = record.purchaseDate
        expiresDate = record.expiresDate
        revocationDate = record.revocationDate
        orderId = record.orderId
        ownership = record.ownership?.rawValue
        revocationType = record.revocationType?.rawValue
        revocationPercentage = record.revocationPercentage
    }

    /// The JSON the receiver gets: dates as milliseconds since 1970, keys sorted.
    public func body() throws -> String {
        String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(self), as: UTF8.self)
    }
}

/// Which events a change makes: pure functions of the transaction, the facts read and the effects decided.
public enum WebhookRules {
    /// Events of a decision on `record`: a grant (the first binding to an account) by the product's kind; for a
    /// transaction bound already and refreshed by newer news, a refund, a further (prorated) refund, or a reversal — each
    /// only when the decision applies that news, with the balance movement it makes for a consumable. A family member's
    /// copy revoked by the family's organizer is an expiration, not a refund (nobody was paid back).
    static func events(for record: PurchaseRecord, facts: TransactionFacts, effects: [LedgerEffect], catalog: LedgerCatalog, now: Date) -> [LedgerEffect] {
        var granted: String?
        var refreshed = false
        for effect in effects {
            switch effect {
            case .insertPurchase(let inserted, _, _) where inserted.transactionId == record.transactionId && inserted.accountId != nil:
                granted = inserted.accountId
            case .claimPurchase(let transactionId, let accountId, _) where transactionId == record.transactionId:
                granted = accountId
            case .refreshPurchase(let news) where news.transactionId == record.transactionId:
                refreshed = true
            default: break
            }
        }
        let tx = record.transactionId
        let moves = effects.compactMap { effect -> BalanceMove? in
            if case .moveBalance(let move) = effect, move.transactionId == tx { return move }
            return nil
        }
        if let account = granted {
            var bound = facts.stored.map { $0.merged(with: record) } ?? record
            bound.accountId = account
            bound.orderId = effects.lazy.compactMap { effect -> String? in
                if case .fulfilOrder(let orderId, let transactionId, _) = effect, transactionId == tx { return orderId }
                return nil
            }.first ?? facts.stored?.orderId
            return grantEvent(bound, account: account, moves: moves, now: now).map { [.emitEvent($0)] } ?? []
        }
        guard refreshed, let stored = facts.stored, let account = stored.accountId, record.signedDate > stored.signedDate else { return [] }
        var current = stored.merged(with: record)
        current.accountId = account
        let signed = Int64((record.signedDate.timeIntervalSince1970 * 1000).rounded())
        let adjust = moves.first { $0.key.hasPrefix("adjust:") }
        var events: [WebhookEvent] = []
        if current.revocationDate != nil, stored.revocationDate == nil || adjust != nil {
            let kind: WebhookEvent.Kind = current.revocationType == .familyRevoke ? .expiration : .refund
            var event = WebhookEvent(kind, current, id: "\(kind.rawValue).\(tx).\(signed)", accountId: account, at: now)
            event.currency = adjust?.currency
            event.amount = adjust?.delta
            events.append(event)
        } else if stored.revocationDate != nil, current.revocationDate == nil {
            var event = WebhookEvent(.refundReversed, current, id: "REFUND_REVERSED.\(tx).\(signed)", accountId: account, at: now)
            let credit = moves.first
            event.currency = credit?.currency
            event.amount = credit?.delta
            events.append(event)
            // A purchase bound while refunded was never announced: its grant event comes now (by its own id, so once).
            if let grant = grantEvent(current, account: account, moves: moves, now: now), grant.type != .consumableCredit || moves.contains(where: { $0.key == "grant:\(tx)" }) {
                events.append(grant)
            }
        }
        return events.map { .emitEvent($0) }
    }

    /// The event of `record` reaching `account`: by its kind, unless it is revoked (a consumable: when credited).
    public static func grantEvent(_ record: PurchaseRecord, account: String, moves: [BalanceMove] = [], now: Date) -> WebhookEvent? {
        let tx = record.transactionId
        switch record.productType {
        case .consumable:
            guard let move = moves.first(where: { $0.key == "grant:\(tx)" }) else { return nil }
            var event = WebhookEvent(.consumableCredit, record, id: "CONSUMABLE_CREDIT.\(tx)", accountId: account, at: now)
            event.currency = move.currency
            event.amount = move.delta
            return event
        case .autoRenewableSubscription:
            guard record.revocationDate == nil else { return nil }
            // A migration to the Advanced Commerce API starts a new series that goes on with the old plan: a change of
            // product for the app's backend, not a new subscriber.
            let kind: WebhookEvent.Kind = SubmissionRules.migratedFrom(record) != nil ? .productChange
                : record.transactionId == record.originalTransactionId ? .initialPurchase : .renewal
            return WebhookEvent(kind, record, id: "\(kind.rawValue).\(tx)", accountId: account, at: now)
        default:
            guard record.revocationDate == nil else { return nil }
            return WebhookEvent(.nonRenewingPurchase, record, id: "NON_RENEWING_PURCHASE.\(tx)", accountId: account, at: now)
        }
    }

    /// The subscription event a notification itself tells of (beyond the transaction it carries), for the series'
    /// account: auto-renew turned off or on, expiry, a billing failure, a plan change (also one made with an offer), a price
    /// increase awaiting the subscriber's consent or accepted.
    /// Only news newer than what the ledger holds of the series makes one (a late notification is history).
    /// A status the reconciler learnt from Apple's status API (``NotificationTypeV2/reconciled``) tells an expiry or a
    /// billing failure as the notification would have: that notification may still be on its way, signed before the
    /// reconciler's read, and then it is history when it comes.
    public static func subscriptionEvent(type: NotificationTypeV2, subtype: NotificationSubtype?, status: SubscriptionStatus? = nil,
                                         notificationUUID: String, record: PurchaseRecord, accountId: String, newProductId: String?,
                                         now: Date) -> WebhookEvent? {
        let kind: WebhookEvent.Kind
        switch (type, subtype) {
        case (.reconciled, _) where status == .expired: kind = .expiration
        case (.reconciled, _) where status == .billingRetry || status == .billingGracePeriod: kind = .billingIssue
        case (.didChangeRenewalStatus, .autoRenewDisabled?): kind = .cancellation
        case (.didChangeRenewalStatus, .autoRenewEnabled?): kind = .uncancellation
        case (.expired, _): kind = .expiration
        case (.didFailToRenew, _): kind = .billingIssue
        case (.didChangeRenewalPref, _), (.offerRedeemed, .upgrade?), (.offerRedeemed, .downgrade?): kind = .productChange
        case (.priceIncrease, .pending?): kind = .priceIncreaseConsentNeeded
        case (.priceIncrease, .accepted?): kind = .priceIncreaseAccepted
        default: return nil
        }
        // An expiry or a billing failure happens once to a period: by the period's transaction, so that Apple's notification
        // and the reconciler's read of the same state (in either order) make one event.
        let once = kind == .expiration || kind == .billingIssue
        var event = WebhookEvent(kind, record, id: "\(kind.rawValue).\(once ? record.transactionId : notificationUUID)", accountId: accountId, at: now)
        event.notificationUUID = notificationUUID
        event.subtype = subtype?.rawValue
        if kind == .productChange { event.newProductId = newProductId }
        return event
    }
}

extension NotificationTypeV2 {
    /// Not Apple's: a subscription's state the reconciler read from Apple's status API, applied as a notification.
    public static let reconciled = Self(rawValue: "IAPKIT_RECONCILED")
}
