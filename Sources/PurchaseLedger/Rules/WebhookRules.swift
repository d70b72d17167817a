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
    }

    /// The JSON the receiver gets: dates as milliseconds since 1970, keys sorted.
    public func body() throws -> String {
        String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(self), as: UTF8.self)
    }
}

/// Which events a change makes: pure functions of the transaction, the facts read and the effects decided.
public enum WebhookRules {
    /// Events of a decision on `record`: a grant (the first binding to an account) by the product's kind; a refund or
    /// its reversal of a transaction already bound, when this is newer news of it.
    static func events(for record: PurchaseRecord, facts: TransactionFacts, effects: [LedgerEffect], catalog: LedgerCatalog, now: Date) -> [LedgerEffect] {
        var granted: String?
        for effect in effects {
            switch effect {
            case .insertPurchase(let inserted, _, _) where inserted.transactionId == record.transactionId && inserted.accountId != nil:
                granted = inserted.accountId
            case .claimPurchase(let transactionId, let accountId, _) where transactionId == record.transactionId:
                granted = accountId
            default: break
            }
        }
        let tx = record.transactionId
        if let account = granted {
            var bound = record
            bound.accountId = account
            bound.orderId = effects.lazy.compactMap { effect -> String? in
                if case .fulfilOrder(let orderId, let transactionId, _) = effect, transactionId == tx { return orderId }
                return nil
            }.first ?? facts.stored?.orderId
            switch record.productType {
            case .consumable:
                // Credit, when the decision credits it (a transaction refunded in full before any credit makes none).
                for effect in effects {
                    if case .moveBalance(let move) = effect, move.key == "grant:\(tx)" {
                        var event = WebhookEvent(.consumableCredit, bound, id: "CONSUMABLE_CREDIT.\(tx)", accountId: account, at: now)
                        event.currency = move.currency
                        event.amount = move.delta
                        return [.emitEvent(event)]
                    }
                }
                return []
            case .autoRenewableSubscription:
                guard record.revocationDate == nil else { return [] }
                let kind: WebhookEvent.Kind = record.transactionId == record.originalTransactionId ? .initialPurchase : .renewal
                return [.emitEvent(WebhookEvent(kind, bound, id: "\(kind.rawValue).\(tx)", accountId: account, at: now))]
            default:
                guard record.revocationDate == nil else { return [] }
                return [.emitEvent(WebhookEvent(.nonRenewingPurchase, bound, id: "NON_RENEWING_PURCHASE.\(tx)", accountId: account, at: now))]
            }
        }
        guard let stored = facts.stored, let account = stored.accountId, record.signedDate > stored.signedDate else { return [] }
        var current = stored.merged(with: record)
        current.accountId = account
        let signed = Int64((record.signedDate.timeIntervalSince1970 * 1000).rounded())
        if stored.revocationDate == nil, record.revocationDate != nil {
            return [.emitEvent(WebhookEvent(.refund, current, id: "REFUND.\(tx).\(signed)", accountId: account, at: now))]
        }
        if stored.revocationDate != nil, record.revocationDate == nil {
            return [.emitEvent(WebhookEvent(.refundReversed, current, id: "REFUND_REVERSED.\(tx).\(signed)", accountId: account, at: now))]
        }
        return []
    }

    /// The subscription event a notification itself tells of (beyond the transaction it carries), for the series'
    /// account: auto-renew turned off or on, expiry, a billing failure, a plan change.
    public static func subscriptionEvent(type: NotificationTypeV2, subtype: NotificationSubtype?, notificationUUID: String,
                                         record: PurchaseRecord, accountId: String, now: Date) -> WebhookEvent? {
        let kind: WebhookEvent.Kind
        switch (type, subtype) {
        case (.didChangeRenewalStatus, .autoRenewDisabled?): kind = .cancellation
        case (.didChangeRenewalStatus, .autoRenewEnabled?): kind = .uncancellation
        case (.expired, _): kind = .expiration
        case (.didFailToRenew, _): kind = .billingIssue
        case (.didChangeRenewalPref, _): kind = .productChange
        default: return nil
        }
        var event = WebhookEvent(kind, record, id: "\(kind.rawValue).\(notificationUUID)", accountId: accountId, at: now)
        event.notificationUUID = notificationUUID
        return event
    }
}
