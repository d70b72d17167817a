import AppStoreFormats
import Foundation

/// Whether a customer agreed to have their consumption data sent to Apple when they ask for a refund.
public struct ConsumptionConsent: Sendable, Hashable, Codable {
    public var accountId: String
    public var consented: Bool
    public var changedAt: Date
    /// `app` (the customer's own choice, reported by the app) or `rescind_consent` (Apple's notice that a parent or
    /// guardian withdrew consent for the app).
    public var source: String
}

/// An answer the server sent Apple for a `CONSUMPTION_REQUEST`, or why it sent none.
public struct ConsumptionAnswer: Sendable, Hashable, Codable {
    public var notificationUUID: String
    public var transactionId: String
    public var accountId: String?
    /// The JSON sent to Send Consumption Information, or `{"silence": "<reason>"}`.
    public var body: String
    public var answeredAt: Date

    public init(notificationUUID: String, transactionId: String, accountId: String?, body: String, answeredAt: Date) {
        self.notificationUUID = notificationUUID
        self.transactionId = transactionId
        self.accountId = accountId
        self.body = body
        self.answeredAt = answeredAt
    }
}

extension Ledger {
    /// Records the customer's choice, as the app reports it; kept with an audit entry in the same transaction.
    @discardableResult
    public func setConsumptionConsent(accountId: String, consented: Bool, now: Date = Date()) async throws -> ConsumptionConsent {
        try Self.checkAccountId(accountId)
        return try await write { session in
            try session.sql.execute("""
                INSERT INTO consumption_consents (account_id, consented, changed_at, source) VALUES ($1, $2, $3, 'app')
                ON CONFLICT (account_id) DO UPDATE SET consented = excluded.consented, changed_at = excluded.changed_at, source = excluded.source
                """, [.text(accountId), .of(consented), .of(now)])
            try session.apply(.audit(actor: accountId, action: consented ? "consumption_consent_given" : "consumption_consent_withdrawn",
                                     subject: accountId, detail: "reported by the app", at: now))
            return ConsumptionConsent(accountId: accountId, consented: consented, changedAt: now, source: "app")
        }
    }

    /// The account's consent as it stands; nil when it never gave one (no consent).
    public func consumptionConsent(accountId: String) async throws -> ConsumptionConsent? {
        try await read { try $0.consumptionConsent(accountId: accountId) }
    }

    /// What a `CONSUMPTION_REQUEST` about `transactionId` is answered from; nil when the ledger does not hold it.
    public func consumptionFacts(transactionId: String) async throws -> ConsumptionFacts? {
        let catalog = catalog
        return try await read { session in
            guard let record = try session.purchase(transactionId) else { return nil }
            let rule = catalog.rule(for: record.productId)
            var facts = ConsumptionFacts(transaction: record, accountId: record.accountId, consented: false, periodSeconds: rule?.periodSeconds)
            guard let accountId = record.accountId else { return facts }
            facts.consented = try session.consumptionConsent(accountId: accountId)?.consented ?? false
            if record.productType == .consumable, let currency = rule?.currency, let amount = rule?.amount {
                facts.credited = amount * Int64(record.quantity)
                facts.balance = try session.balance(accountId: accountId, currency: currency)
            }
            return facts
        }
    }

    /// The answer already given to notification `notificationUUID`, if any: a redelivered `CONSUMPTION_REQUEST` is
    /// not answered twice.
    public func consumptionAnswer(notificationUUID: String) async throws -> ConsumptionAnswer? {
        try await read { session in
            try session.sql.first("""
                SELECT notification_uuid, transaction_id, account_id, body, answered_at FROM consumption_answers WHERE notification_uuid = $1
                """, [.text(notificationUUID)]).map {
                ConsumptionAnswer(notificationUUID: try $0.text(0), transactionId: try $0.text(1), accountId: $0.optionalText(2), body: try $0.text(3),
                                  answeredAt: Millis.date(try $0.int(4)))
            }
        }
    }

    /// Keeps the answer sent (or the reason none was), with an audit entry, once per notification.
    public func recordConsumptionAnswer(_ answer: ConsumptionAnswer) async throws {
        try await write { session in
            try session.sql.execute("""
                INSERT INTO consumption_answers (notification_uuid, transaction_id, account_id, body, answered_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (notification_uuid) DO NOTHING
                """, [.text(answer.notificationUUID), .text(answer.transactionId), .of(answer.accountId), .text(String(answer.body.prefix(4000))),
                      .of(answer.answeredAt)])
            try session.apply(.audit(actor: "server", action: "consumption_request_answered", subject: answer.accountId ?? answer.transactionId,
                                     detail: "transaction \(answer.transactionId): \(answer.body)", at: answer.answeredAt))
        }
    }
}

extension LedgerSession {
    func consumptionConsent(accountId: String) throws -> ConsumptionConsent? {
        try sql.first("SELECT account_id, consented, changed_at, source FROM consumption_consents WHERE account_id = $1", [.text(accountId)]).map {
            ConsumptionConsent(accountId: try $0.text(0), consented: try $0.int(1) != 0, changedAt: Millis.date(try $0.int(2)), source: try $0.text(3))
        }
    }

    /// Apple's `RESCIND_CONSENT`: a parent or guardian withdrew consent for the customer's use of the app. Every account
    /// that presented that app transaction, or bought under it, stops sharing consumption data; a choice the app
    /// reported after Apple signed the notice stands (a late delivery does not undo it).
    func rescindConsent(appTransactionId: String, signedDate: Date) throws {
        let accounts = try sql.rows("""
            SELECT account_id FROM app_transactions WHERE app_transaction_id = $1
            UNION SELECT account_id FROM purchases WHERE app_transaction_id = $1 AND account_id IS NOT NULL
            """, [.text(appTransactionId)]).map { try $0.text(0) }
        for account in accounts {
            try sql.execute("""
                INSERT INTO consumption_consents (account_id, consented, changed_at, source) VALUES ($1, 0, $2, 'rescind_consent')
                ON CONFLICT (account_id) DO UPDATE SET consented = 0, changed_at = excluded.changed_at, source = excluded.source
                WHERE consumption_consents.changed_at < excluded.changed_at
                """, [.text(account), .of(signedDate)])
        }
    }
}
