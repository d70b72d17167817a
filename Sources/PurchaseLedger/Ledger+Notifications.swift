import AppStoreFormats
import Foundation
import SQLKit

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
    /// wins, so renewals, expiries, upgrades, refunds, revocations and reversals land right in any arrival order), a
    /// renewal is bound to its series' account (or, by `appAccountToken`, to its order's), consumable balances are
    /// settled to the transaction's state, and the series' status and grace period are taken from the renewal info.
    public func apply(_ event: NotificationEvent, now: Date = Date()) async throws -> NotificationOutcome {
        guard !event.notificationUUID.isEmpty, event.notificationUUID.utf8.count <= 64 else {
            throw LedgerError(.invalidInput, "notificationUUID must be 1 to 64 bytes")
        }
        let record = try event.transaction.map(PurchaseRecord.init)
        return try await transaction { [self] db in
            let fresh = try await db.raw("""
                INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date, transaction_id, original_transaction_id,
                    signed_payload, received_at)
                VALUES (\(bind: event.notificationUUID), \(bind: event.type.rawValue), \(bind: event.subtype?.rawValue), \(bind: Millis.of(event.signedDate)),
                    \(bind: record?.transactionId), \(bind: record?.originalTransactionId), \(bind: event.signedPayload), \(bind: Millis.of(now)))
                ON CONFLICT (notification_uuid) DO NOTHING RETURNING notification_uuid
                """).first()
            guard fresh != nil else { return .duplicate }
            guard var record else { return .applied }
            var order: Order?
            if let token = record.appAccountToken { order = try await Self.order(db, where: "app_account_token", equals: token.uuidString.lowercased()) }
            record.accountId = try await owner(db, of: record) ?? order?.accountId
            record.orderId = order.flatMap { $0.accountId == record.accountId ? $0.orderId : nil }
            if record.accountId != nil {
                _ = try await bind(db, record, source: "notification", now: now)
            } else if try await !insert(db, record, source: "notification", now: now) {
                try await refresh(db, record)
            }
            try await settleConsumable(db, transactionId: record.transactionId, now: now)
            if record.productType == .autoRenewableSubscription {
                try await updateSeries(db, record: record, event: event)
            }
            return .applied
        }
    }

    /// Keeps the series' latest known status, unless what is stored was signed later.
    func updateSeries(_ db: any SQLDatabase, record: PurchaseRecord, event: NotificationEvent) async throws {
        let renewal = event.renewal
        let signed = Millis.of(renewal?.signedDate ?? event.signedDate)
        try await db.raw("""
            INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew,
                auto_renew_product_id, signed_date)
            VALUES (\(bind: record.originalTransactionId), \(bind: record.productId), \(bind: event.status.map { Int64($0.rawValue) }),
                \(bind: record.expiresDate.map(Millis.of)), \(bind: renewal?.gracePeriodExpiresDate.map(Millis.of)),
                \(bind: renewal?.autoRenewStatus.map { Int64($0.rawValue) }), \(bind: renewal?.autoRenewProductId), \(bind: signed))
            ON CONFLICT (original_transaction_id) DO UPDATE SET product_id = excluded.product_id, status = excluded.status,
                expires_date = excluded.expires_date, grace_period_expires_date = excluded.grace_period_expires_date,
                auto_renew = excluded.auto_renew, auto_renew_product_id = excluded.auto_renew_product_id, signed_date = excluded.signed_date
            WHERE subscriptions.signed_date < excluded.signed_date
            """).run()
    }

    /// How many notifications the ledger holds (for metrics and tests).
    public func notificationCount() async throws -> Int {
        try await transaction { db in
            Int(try await db.raw("SELECT COUNT(*) AS n FROM notifications").first()?.decode(column: "n", as: Int64.self) ?? 0)
        }
    }
}
