import AppStoreFormats
import Foundation
import PurchaseAPI

/// Whether a customer agreed to have their consumption data sent to Apple when they ask for a refund.
public struct ConsumptionConsent: Sendable, Hashable, Codable {
    public var accountId: String
    public var consented: Bool
    public var changedAt: Date
    /// `app` (the customer's own choice, reported by the app) or `rescind_consent` (Apple's notice that a parent or
    /// guardian withdrew consent for the app).
    public var source: String
}

/// The answer owed to Apple for one `CONSUMPTION_REQUEST`: written with the notification, sent until answered or due
/// (Apple wants it within 12 hours).
public struct ConsumptionAnswer: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable {
        /// Owed: to be sent (again, after Apple was unreachable).
        case pending
        /// Claimed by a sender now (a claim older than ``Ledger/consumptionClaimLease`` may be taken over).
        case sending
        /// Sent and taken by Apple (202).
        case answered
        /// Nothing to send: the transaction reached nobody here, or its customer did not consent.
        case silent
        /// Apple refused what was sent (kept with its error code).
        case refused
        /// Not sent within Apple's 12 hours.
        case expired
    }

    public var notificationUUID: String
    public var transactionId: String
    public var state: State
    public var dueBy: Date
    public var accountId: String?
    /// The JSON sent, `{"silence": "<reason>"}`, or `{"refused": <code>, "sent": …}`.
    public var body: String?
    public var answeredAt: Date?
}

extension Ledger {
    /// How long a sender's claim on an answer holds before another may take it over (a sender that died mid-send).
    public static let consumptionClaimLease: TimeInterval = 120
    /// How long Apple waits for the answer to a consumption request.
    public static let consumptionAnswerWindow: TimeInterval = 12 * 3600

    /// Records the customer's choice, as the app reports it; kept with an audit entry in the same transaction.
    @discardableResult
    public func setConsumptionConsent(accountId: String, consented: Bool, now: Date = Date()) async throws -> ConsumptionConsent {
        try Self.checkAccountId(accountId)
        return try await write { session in
            try await session.sql.execute("""
                INSERT INTO consumption_consents (account_id, consented, changed_at, source) VALUES ($1, $2, $3, 'app')
                ON CONFLICT (account_id) DO UPDATE SET consented = excluded.consented, changed_at = excluded.changed_at, source = excluded.source
                """, [.text(accountId), .of(consented), .of(now)])
            try await session.apply(.audit(actor: accountId, action: consented ? .consumptionConsentGiven : .consumptionConsentWithdrawn,
                                           subject: accountId, detail: "reported by the app", at: now))
            return ConsumptionConsent(accountId: accountId, consented: consented, changedAt: now, source: "app")
        }
    }

    /// The account's consent as it stands; nil when it never gave one (no consent).
    public func consumptionConsent(accountId: String) async throws -> ConsumptionConsent? {
        try await read { try await $0.consumptionConsent(accountId: accountId) }
    }

    /// What a `CONSUMPTION_REQUEST` about `transactionId` is answered from; nil when the ledger does not hold it. Consent
    /// counts only if given after the latest guardian's withdrawal (`RESCIND_CONSENT`) for the purchase's app transaction
    /// or any the account presented, whenever those were linked.
    public func consumptionFacts(transactionId: String) async throws -> ConsumptionFacts? {
        let catalog = catalog
        return try await read { session in
            guard let record = try await session.purchase(transactionId) else { return nil }
            let rule = catalog.rule(for: record.productId)
            var facts = ConsumptionFacts(transaction: record, accountId: record.accountId, consented: false, periodSeconds: rule?.periodSeconds)
            guard let accountId = record.accountId else { return facts }
            if let consent = try await session.consumptionConsent(accountId: accountId), consent.consented {
                let rescinded = try await session.sql.first("""
                    SELECT MAX(signed_date) FROM rescinded_app_transactions
                    WHERE app_transaction_id = $1 OR app_transaction_id IN (SELECT app_transaction_id FROM app_transactions WHERE account_id = $2)
                    """, [.of(record.appTransactionId), .text(accountId)])?.optionalInt(0)
                facts.consented = rescinded.map { Millis.of(consent.changedAt) > $0 } ?? true
            }
            if record.productType == .consumable, let currency = rule?.currency, let amount = rule?.amount {
                facts.credited = amount * Int64(record.quantity)
                facts.balance = try await session.balance(accountId: accountId, currency: currency)
            }
            return facts
        }
    }

    /// The answer owed or given for notification `notificationUUID`, if it was a consumption request.
    public func consumptionAnswer(notificationUUID: String) async throws -> ConsumptionAnswer? {
        try await read { try await $0.consumptionAnswers(where: "notification_uuid = $1", [.text(notificationUUID)], limit: 1).first }
    }

    /// A sender's hold on an owed answer: the transaction it is about, and the claim's time, which is its token.
    public struct ConsumptionClaim: Sendable, Equatable {
        public let transactionId: String
        public let claim: Date
    }

    /// Takes the answer to `notificationUUID` for sending, if it is owed and no other sender holds it: one sender at a
    /// time across replicas. An answer past its due time is marked expired instead.
    public func claimConsumptionAnswer(notificationUUID: String, now: Date = Date()) async throws -> ConsumptionClaim? {
        let claim = Millis.date(Millis.of(now))
        return try await write { session in
            try await session.sql.execute("""
                UPDATE consumption_answers SET state = 'expired' WHERE notification_uuid = $1 AND state IN ('pending', 'sending') AND due_by < $2
                """, [.text(notificationUUID), .of(now)])
            return try await session.sql.first("""
                UPDATE consumption_answers SET state = 'sending', claimed_at = $2
                WHERE notification_uuid = $1 AND (state = 'pending' OR (state = 'sending' AND claimed_at < $3))
                RETURNING transaction_id
                """, [.text(notificationUUID), .of(claim), .of(now.addingTimeInterval(-Self.consumptionClaimLease))])
                .map { ConsumptionClaim(transactionId: try $0.text(0), claim: claim) }
        }
    }

    /// Ends a claim: `state` `answered`, `silent` or `refused` (with what was sent, audited), or `pending` again when
    /// Apple could not be reached. Only the claim's holder's outcome counts: a sender whose claim lapsed and was taken
    /// by another settles nothing (the claim's time is its token, as the webhook outbox's is).
    public func settleConsumptionAnswer(notificationUUID: String, claim: Date, state: ConsumptionAnswer.State, accountId: String?, body: String?,
                                        now: Date = Date()) async throws {
        try await write { session in
            let settled = try await session.sql.first("""
                UPDATE consumption_answers SET state = $2, account_id = $3, body = $4, answered_at = $5, claimed_at = NULL
                WHERE notification_uuid = $1 AND state = 'sending' AND claimed_at = $6 RETURNING transaction_id
                """, [.text(notificationUUID), .text(state.rawValue), .of(accountId), .of(body.map { String($0.prefix(4000)) }),
                      .of(state == .pending ? nil : now), .of(claim)])?.text(0)
            guard let transactionId = settled, state != .pending else { return }
            try await session.apply(.audit(actor: "server", action: .consumptionRequest(state.rawValue), subject: accountId ?? transactionId,
                                           detail: "transaction \(transactionId): \(body ?? "")", at: now))
        }
    }

    /// Answers still owed and not yet due, oldest first (the reconciler sends them).
    public func owedConsumptionAnswers(now: Date = Date(), limit: Int = 100) async throws -> [ConsumptionAnswer] {
        try await read { session in
            try await session.consumptionAnswers(where: "(state = 'pending' OR (state = 'sending' AND claimed_at < $1)) AND due_by >= $2",
                                                 [.of(now.addingTimeInterval(-Self.consumptionClaimLease)), .of(now)], limit: limit)
        }
    }
}

extension LedgerSession {
    func consumptionConsent(accountId: String) async throws -> ConsumptionConsent? {
        try await sql.first("SELECT account_id, consented, changed_at, source FROM consumption_consents WHERE account_id = $1", [.text(accountId)]).map {
            ConsumptionConsent(accountId: try $0.text(0), consented: try $0.int(1) != 0, changedAt: Millis.date(try $0.int(2)), source: try $0.text(3))
        }
    }

    func consumptionAnswers(where condition: String, _ binds: [SQLValue], limit: Int) async throws -> [ConsumptionAnswer] {
        try await sql.rows("""
            SELECT notification_uuid, transaction_id, state, due_by, account_id, body, answered_at FROM consumption_answers
            WHERE \(condition) ORDER BY due_by LIMIT \(max(1, min(limit, 1_000)))
            """, binds).map {
            ConsumptionAnswer(notificationUUID: try $0.text(0), transactionId: try $0.text(1), state: ConsumptionAnswer.State(rawValue: try $0.text(2)) ?? .pending,
                              dueBy: Millis.date(try $0.int(3)), accountId: $0.optionalText(4), body: $0.optionalText(5),
                              answeredAt: $0.optionalInt(6).map(Millis.date))
        }
    }

    /// A `CONSUMPTION_REQUEST` owes Apple an answer: written with the notification, so it survives whatever happens
    /// to the attempt to send it.
    func oweConsumptionAnswer(notificationUUID: String, transactionId: String, signedDate: Date) async throws {
        try await sql.execute("""
            INSERT INTO consumption_answers (notification_uuid, transaction_id, state, due_by) VALUES ($1, $2, 'pending', $3)
            ON CONFLICT (notification_uuid) DO NOTHING
            """, [.text(notificationUUID), .text(transactionId), .of(signedDate.addingTimeInterval(Ledger.consumptionAnswerWindow))])
    }

    /// Apple's `RESCIND_CONSENT`: a parent or guardian withdrew consent for the customer's use of the app. The withdrawal
    /// is kept by app transaction (``Ledger/consumptionFacts(transactionId:)`` applies it to accounts linked later too),
    /// and every account linked now shows it, unless the customer chose again after Apple signed the notice.
    func rescindConsent(appTransactionId: String, signedDate: Date) async throws {
        try await sql.execute("""
            INSERT INTO rescinded_app_transactions (app_transaction_id, signed_date) VALUES ($1, $2)
            ON CONFLICT (app_transaction_id) DO UPDATE SET signed_date = excluded.signed_date
            WHERE rescinded_app_transactions.signed_date < excluded.signed_date
            """, [.text(appTransactionId), .of(signedDate)])
        let accounts = try await sql.rows("""
            SELECT account_id FROM app_transactions WHERE app_transaction_id = $1
            UNION SELECT account_id FROM purchases WHERE app_transaction_id = $1 AND account_id IS NOT NULL
            """, [.text(appTransactionId)]).map { try $0.text(0) }
        for account in accounts {
            let changed = try await sql.first("""
                INSERT INTO consumption_consents (account_id, consented, changed_at, source) VALUES ($1, 0, $2, 'rescind_consent')
                ON CONFLICT (account_id) DO UPDATE SET consented = 0, changed_at = excluded.changed_at, source = excluded.source
                WHERE consumption_consents.changed_at < excluded.changed_at
                RETURNING account_id
                """, [.text(account), .of(signedDate)])
            if changed != nil {
                try await apply(.audit(actor: "apple", action: .consumptionConsentRescinded, subject: account,
                                       detail: "RESCIND_CONSENT for app transaction \(appTransactionId)", at: signedDate))
            }
        }
    }
}
