import AppStoreFormats
import Foundation
import PurchaseAPI

/// The notification log, held proofs, device reports and the audit log: records kept beside the grants.
extension LedgerSession {
    // MARK: Notifications

    /// Logs a notification once per `notificationUUID`. Returns whether this call logged it.
    func insertNotification(_ event: NotificationEvent, record: PurchaseRecord?, at now: Date) async throws -> Bool {
        try await sql.first("""
            INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date, transaction_id, original_transaction_id,
                signed_payload, received_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, \(Ledger.recordedNoEarlierThan("CAST($8 AS BIGINT)", Ledger.notificationsWatermark)))
            ON CONFLICT (notification_uuid) DO NOTHING RETURNING notification_uuid
            """, [.text(event.notificationUUID), .text(event.type.rawValue), .of(event.subtype?.rawValue), .of(event.signedDate),
                  .of(record?.transactionId), .of(record?.originalTransactionId), .text(event.signedPayload), .of(now)]) != nil
    }

    func notificationCount() async throws -> Int64 {
        try await sql.first("SELECT COUNT(*) FROM notifications")?.int(0) ?? 0
    }

    static let notificationColumns = "notification_uuid, notification_type, subtype, signed_date, transaction_id, original_transaction_id, received_at"

    func notifications(where condition: String, _ binds: [SQLValue], limit: Int, withPayload: Bool) async throws -> [LoggedNotification] {
        let columns = Self.notificationColumns + (withPayload ? ", signed_payload" : "")
        return try await sql.rows("""
            SELECT \(columns) FROM notifications WHERE \(condition) ORDER BY signed_date DESC, notification_uuid LIMIT \(max(1, min(limit, 10_000)))
            """, binds).map { row in
            LoggedNotification(notificationUUID: try row.text(0), notificationType: try row.text(1), subtype: row.optionalText(2),
                               signedDate: Millis.date(try row.int(3)), transactionId: row.optionalText(4),
                               originalTransactionId: row.optionalText(5), receivedAt: Millis.date(try row.int(6)),
                               signedPayload: withPayload ? row.optionalText(7) : nil)
        }
    }

    // MARK: Held proofs

    static let proofColumns = "proof_id, account_id, order_id, kind, proof, state, attempts, next_attempt_at, last_error, created_at, not_found_answers"

    func pendingProof(_ id: String) async throws -> PendingProof? {
        try await sql.first("SELECT \(Self.proofColumns) FROM pending_proofs WHERE proof_id = $1", [.text(id)]).map(Self.decodeProof)
    }

    func pendingProofs(where condition: String, _ binds: [SQLValue], order: String, limit: Int) async throws -> [PendingProof] {
        try await sql.rows("SELECT \(Self.proofColumns) FROM pending_proofs WHERE \(condition) ORDER BY \(order) LIMIT \(max(1, min(limit, 10_000)))", binds)
            .map(Self.decodeProof)
    }

    static func decodeProof(_ row: SQLRow) throws -> PendingProof {
        PendingProof(proofId: try row.text(0), accountId: try row.text(1), orderId: row.optionalText(2),
                     kind: PendingProof.Kind(rawValue: try row.text(3)) ?? .receipt, proof: try row.text(4),
                     state: PendingProof.State(rawValue: try row.text(5)) ?? .pending, attempts: Int(try row.int(6)),
                     nextAttemptAt: Millis.date(try row.int(7)), lastError: row.optionalText(8), heldAt: Millis.date(try row.int(9)),
                     notFoundAnswers: Int(try row.int(10)))
    }

    // MARK: Device reports and audit

    func deviceReports(where condition: String, _ binds: [SQLValue]) async throws -> [DeviceReport] {
        try await sql.rows("SELECT transaction_id, account_id, signals, reported_at FROM device_reports WHERE \(condition) ORDER BY reported_at", binds).map {
            DeviceReport(transactionId: try $0.text(0), accountId: try $0.text(1),
                         signals: try $0.text(2).split(separator: ",").map(String.init), reportedAt: Millis.date(try $0.int(3)))
        }
    }

    func auditEntries(where condition: String, _ binds: [SQLValue], limit: Int) async throws -> [Ledger.AuditEntry] {
        try await sql.rows("""
            SELECT actor, action, subject, detail, created_at FROM audit_log WHERE \(condition) ORDER BY created_at DESC LIMIT \(max(1, min(limit, 10_000)))
            """, binds).map {
            Ledger.AuditEntry(actor: try $0.text(0), action: AuditAction(rawValue: try $0.text(1)), subject: try $0.text(2), detail: try $0.text(3),
                              at: Millis.date(try $0.int(4)))
        }
    }
}


/// Device-integrity signals reported with a transaction.
public struct DeviceReport: Sendable, Hashable, Codable {
    public var transactionId: String
    public var accountId: String
    public var signals: [String]
    public var reportedAt: Date
}

extension LedgerSession {
    /// Writes a device's renewal info into its series (``Ledger/applyDeviceRenewalInfo(_:accountId:)`` decided it is
    /// newer), dated by `device_renewal_signed_date` only: the series' status and its date stay as the App Store left
    /// them. A series nothing else told of yet is made with no status and no date. False when a newer one won a race.
    func applyDeviceRenewal(originalTransactionId key: String, _ renewal: JWSRenewalInfoDecodedPayload, signed: Date) async throws -> Bool {
        try await !sql.rows("""
            INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew,
                auto_renew_product_id, signed_date, expiration_intent, billing_retry, price_increase_status, device_renewal_signed_date)
            VALUES ($1, NULL, NULL, NULL, NULL, $2, $3, 0, $4, $5, $6, $7)
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                auto_renew = excluded.auto_renew, auto_renew_product_id = excluded.auto_renew_product_id,
                expiration_intent = excluded.expiration_intent, billing_retry = excluded.billing_retry,
                price_increase_status = excluded.price_increase_status, device_renewal_signed_date = excluded.device_renewal_signed_date
            WHERE subscriptions.signed_date < excluded.device_renewal_signed_date
                AND COALESCE(subscriptions.device_renewal_signed_date, 0) < excluded.device_renewal_signed_date
            RETURNING original_transaction_id
            """, [.text(key), .of(renewal.autoRenewStatus.map { Int64($0 == .on ? 1 : 0) }), .of(renewal.autoRenewProductId),
                  .of(renewal.expirationIntent.map { Int64($0.rawValue) }), .of(renewal.isInBillingRetryPeriod.map { Int64($0 ? 1 : 0) }),
                  .of(renewal.priceIncreaseStatus.map { Int64($0.rawValue) }), .of(signed)]).isEmpty
    }
}
