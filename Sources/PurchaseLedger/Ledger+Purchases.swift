import AppStoreFormats
import Foundation
import SQLKit

/// A verified transaction an account presents, with the order it was paid for when the app still knows it.
public struct PurchaseSubmission: Sendable {
    public var accountId: String
    public var orderId: String?
    /// Already verified by the caller (signature, chain, bundle, environment).
    public var transaction: JWSTransactionDecodedPayload
    /// Where the proof came from: `jws`, `receipt`, `server-api`, `restore`.
    public var source: String

    public init(accountId: String, orderId: String? = nil, transaction: JWSTransactionDecodedPayload, source: String = "jws") {
        self.accountId = accountId
        self.orderId = orderId
        self.transaction = transaction
        self.source = source
    }
}

/// What a submission came to.
public struct SubmissionResult: Sendable, Hashable {
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// This submission bound and granted the transaction.
        case granted
        /// The transaction was already bound to this account: nothing more was granted.
        case alreadyGranted
    }

    public var outcome: Outcome
    public var transactionId: String
    public var orderId: String?
    public var entitlements: AccountEntitlements
}

extension Ledger {
    /// Binds a verified transaction to an order and an account and grants it — once. The order comes from
    /// `orderId`, or from the transaction's `appAccountToken` when the app lost its order id; renewals follow their
    /// series' account. A transaction that already belongs to another account is refused
    /// (``LedgerError/Code/transactionBoundElsewhere``) and the attempt recorded.
    public func submit(_ submission: PurchaseSubmission, now: Date = Date()) async throws -> SubmissionResult {
        try Self.checkAccountId(submission.accountId)
        let record = try PurchaseRecord(submission.transaction)
        guard catalog.rule(for: record.productId) != nil else { throw LedgerError(.unknownProduct, "no product \(record.productId) is sold here") }
        enum Step: Sendable { case done(SubmissionResult), conflict(owner: String) }
        let step = try await transaction { [self] db -> Step in
            var order: Order?
            if let orderId = submission.orderId {
                guard let found = try await Self.order(db, where: "order_id", equals: orderId) else {
                    throw LedgerError(.orderNotFound, "no order \(orderId)")
                }
                guard found.accountId == submission.accountId else { throw LedgerError(.orderAccountMismatch, "order \(orderId) belongs to another account") }
                guard found.productId == record.productId else {
                    throw LedgerError(.orderProductMismatch, "order \(orderId) is for \(found.productId), the transaction for \(record.productId)")
                }
                order = found
            } else if let token = record.appAccountToken {
                order = try await Self.order(db, where: "app_account_token", equals: token.uuidString.lowercased())
            }
            let owner = try await owner(db, of: record) ?? order?.accountId ?? submission.accountId
            guard owner == submission.accountId else {
                try await recordConflict(db, transactionId: record.transactionId, claimedBy: submission.accountId, owner: owner, now: now)
                return .conflict(owner: owner)
            }
            var bound = record
            bound.accountId = owner
            bound.orderId = order?.accountId == owner ? order?.orderId : nil
            let outcome = try await bind(db, bound, source: submission.source, now: now)
            if case .boundElsewhere(let other) = outcome {
                try await recordConflict(db, transactionId: record.transactionId, claimedBy: submission.accountId, owner: other, now: now)
                return .conflict(owner: other)
            }
            let entitlements = try await entitlements(db, accountId: owner, now: now)
            let orderId = outcome == .bound ? bound.orderId
                : try await db.raw("SELECT order_id FROM purchases WHERE transaction_id = \(bind: record.transactionId)").first()?
                    .decode(column: "order_id", as: String?.self)
            return .done(SubmissionResult(outcome: outcome == .bound ? .granted : .alreadyGranted, transactionId: record.transactionId,
                                          orderId: orderId, entitlements: entitlements))
        }
        switch step {
        case .done(let result): return result
        case .conflict: throw LedgerError(.transactionBoundElsewhere, "transaction \(record.transactionId) belongs to another account")
        }
    }

    /// The account a transaction (or its subscription series) is already bound to.
    func owner(_ db: any SQLDatabase, of record: PurchaseRecord) async throws -> String? {
        // The transaction's own row first, else the series' first bound row: one query either way.
        let row = try await db.raw("""
            SELECT account_id FROM purchases
            WHERE (transaction_id = \(bind: record.transactionId) OR original_transaction_id = \(bind: record.originalTransactionId)) AND account_id IS NOT NULL
            ORDER BY CASE WHEN transaction_id = \(bind: record.transactionId) THEN 0 ELSE 1 END, purchase_date LIMIT 1
            """).first()
        return try row?.decode(column: "account_id", as: String?.self)
    }

    enum BindOutcome: Equatable, Sendable { case bound, alreadyBound, boundElsewhere(String) }

    /// Stores `record` bound to its account and grants it, unless the database already holds it bound: then nothing
    /// is granted. A row that a notification stored unbound is claimed. Later news (by `signedDate`) updates dates.
    func bind(_ db: any SQLDatabase, _ record: PurchaseRecord, source: String, now: Date) async throws -> BindOutcome {
        guard let account = record.accountId else { return .alreadyBound }
        if try await insert(db, record, source: source, now: now) {
            try await grant(db, record, fresh: true, now: now)
            return .bound
        }
        try await refresh(db, record)
        let claimed = try await db.raw("""
            UPDATE purchases SET account_id = \(bind: account), order_id = \(bind: record.orderId)
            WHERE transaction_id = \(bind: record.transactionId) AND account_id IS NULL RETURNING transaction_id
            """).first()
        if claimed != nil {
            try await grant(db, record, now: now)
            return .bound
        }
        let row = try await db.raw("SELECT account_id FROM purchases WHERE transaction_id = \(bind: record.transactionId)").first()
        let holder = try row?.decode(column: "account_id", as: String?.self)
        guard holder == account else { return .boundElsewhere(holder ?? "") }
        if let orderId = record.orderId {
            // Bound before its order was known (say, from a receipt): the order is fulfilled by it all the same.
            let linked = try await db.raw("""
                UPDATE purchases SET order_id = \(bind: orderId) WHERE transaction_id = \(bind: record.transactionId) AND order_id IS NULL
                RETURNING transaction_id
                """).first()
            if linked != nil {
                try await db.raw("""
                    UPDATE orders SET state = 'granted', transaction_id = \(bind: record.transactionId), updated_at = \(bind: Millis.of(now))
                    WHERE order_id = \(bind: orderId) AND transaction_id IS NULL
                    """).run()
            }
        }
        return .alreadyBound
    }

    /// Inserts the transaction unless its id is already there. Returns whether this call inserted it.
    func insert(_ db: any SQLDatabase, _ record: PurchaseRecord, source: String, now: Date) async throws -> Bool {
        let inserted = try await db.raw("""
            INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment,
                quantity, purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token,
                signed_date, source, recorded_at)
            VALUES (\(bind: record.transactionId), \(bind: record.originalTransactionId), \(bind: record.accountId), \(bind: record.orderId),
                \(bind: record.productId), \(bind: record.productType.rawValue), \(bind: record.environment.rawValue), \(bind: Int64(record.quantity)),
                \(bind: Millis.of(record.purchaseDate)), \(bind: record.expiresDate.map(Millis.of)), \(bind: record.revocationDate.map(Millis.of)),
                \(bind: record.revocationReason.map { Int64($0.rawValue) }), \(bind: Int64(record.isUpgraded ? 1 : 0)), \(bind: record.ownership?.rawValue),
                \(bind: record.appAccountToken?.uuidString.lowercased()), \(bind: Millis.of(record.signedDate)), \(bind: source), \(bind: Millis.of(now)))
            ON CONFLICT (transaction_id) DO NOTHING RETURNING transaction_id
            """).first()
        return inserted != nil
    }

    /// Takes newer news of a stored transaction (expiry, revocation, upgrade) when Apple signed it later than what is
    /// stored; older news changes nothing. Returns whether the row changed.
    @discardableResult
    func refresh(_ db: any SQLDatabase, _ record: PurchaseRecord) async throws -> Bool {
        let changed = try await db.raw("""
            UPDATE purchases SET expires_date = \(bind: record.expiresDate.map(Millis.of)), revocation_date = \(bind: record.revocationDate.map(Millis.of)),
                revocation_reason = \(bind: record.revocationReason.map { Int64($0.rawValue) }), is_upgraded = \(bind: Int64(record.isUpgraded ? 1 : 0)),
                signed_date = \(bind: Millis.of(record.signedDate))
            WHERE transaction_id = \(bind: record.transactionId) AND signed_date < \(bind: Millis.of(record.signedDate))
            RETURNING transaction_id
            """).first()
        return changed != nil
    }

    /// What binding grants beyond the row itself: consumable credit, and the order marked granted. A `fresh` row (just
    /// inserted) has no balance movements yet, so an unrevoked consumable is credited without reading them.
    func grant(_ db: any SQLDatabase, _ record: PurchaseRecord, fresh: Bool = false, now: Date) async throws {
        if let orderId = record.orderId {
            try await db.raw("""
                UPDATE orders SET state = 'granted', transaction_id = \(bind: record.transactionId), updated_at = \(bind: Millis.of(now))
                WHERE order_id = \(bind: orderId) AND transaction_id IS NULL
                """).run()
        }
        if fresh, record.revocationDate == nil, let account = record.accountId, let rule = catalog.rule(for: record.productId),
           rule.type == .consumable, let currency = rule.currency, let amount = rule.amount {
            try await moveBalance(db, key: "grant:\(record.transactionId)", accountId: account, currency: currency,
                                  delta: amount * Int64(record.quantity), transactionId: record.transactionId, now: now)
            return
        }
        try await settleConsumable(db, transactionId: record.transactionId, now: now)
    }

    /// Brings a consumable transaction's balance movements in line with its state: credited once while it stands,
    /// clawed back while refunded, credited again when a refund is reversed — each movement a uniquely keyed entry,
    /// so the net is right whatever order the news came in and however often.
    func settleConsumable(_ db: any SQLDatabase, transactionId: String, now: Date) async throws {
        guard let row = try await db.raw("""
            SELECT account_id, product_id, quantity, revocation_date FROM purchases WHERE transaction_id = \(bind: transactionId)
            """).first(),
              let account = try row.decode(column: "account_id", as: String?.self),
              let rule = catalog.rule(for: try row.decode(column: "product_id", as: String.self)), rule.type == .consumable,
              let currency = rule.currency, let amount = rule.amount else { return }
        let revoked = try row.decode(column: "revocation_date", as: Int64?.self) != nil
        let credit = amount * (try row.decode(column: "quantity", as: Int64.self))
        let entries = try await db.raw("SELECT entry_key, delta FROM balance_entries WHERE transaction_id = \(bind: transactionId)").all()
        let net = try entries.reduce(Int64(0)) { $0 + (try $1.decode(column: "delta", as: Int64.self)) }
        let granted = try entries.contains { try $0.decode(column: "entry_key", as: String.self) == "grant:\(transactionId)" }
        // A transaction refunded before it was ever bound is never credited at all.
        let wanted: Int64 = revoked ? 0 : credit
        let key = granted ? "adjust:\(transactionId):\(entries.count)" : "grant:\(transactionId)"
        if !granted && revoked { return }
        let delta = granted ? wanted - net : credit
        guard delta != 0 else { return }
        try await moveBalance(db, key: key, accountId: account, currency: currency, delta: delta, transactionId: transactionId, now: now)
    }

    /// Records one uniquely keyed balance movement and applies it. Returns whether this call made it.
    @discardableResult
    func moveBalance(_ db: any SQLDatabase, key: String, accountId: String, currency: String, delta: Int64, transactionId: String?, now: Date) async throws -> Bool {
        let made = try await db.raw("""
            INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at)
            VALUES (\(bind: key), \(bind: accountId), \(bind: currency), \(bind: delta), \(bind: transactionId), \(bind: Millis.of(now)))
            ON CONFLICT (entry_key) DO NOTHING RETURNING entry_key
            """).first()
        guard made != nil else { return false }
        try await db.raw("""
            INSERT INTO balances (account_id, currency, amount) VALUES (\(bind: accountId), \(bind: currency), \(bind: delta))
            ON CONFLICT (account_id, currency) DO UPDATE SET amount = balances.amount + excluded.amount
            """).run()
        return true
    }

    func recordConflict(_ db: any SQLDatabase, transactionId: String, claimedBy: String, owner: String, now: Date) async throws {
        try await db.raw("""
            INSERT INTO conflicts (transaction_id, claimed_by, owner, first_seen, attempts)
            VALUES (\(bind: transactionId), \(bind: claimedBy), \(bind: owner), \(bind: Millis.of(now)), 1)
            ON CONFLICT (transaction_id, claimed_by) DO UPDATE SET attempts = conflicts.attempts + 1
            """).run()
    }

    /// Attempts to present another account's transaction, most recent first.
    public func conflicts(limit: Int = 100) async throws -> [(transactionId: String, claimedBy: String, owner: String, attempts: Int64)] {
        try await transaction { db in
            try await db.raw("SELECT transaction_id, claimed_by, owner, attempts FROM conflicts ORDER BY first_seen DESC LIMIT \(bind: Int64(limit))").all().map {
                (try $0.decode(column: "transaction_id", as: String.self), try $0.decode(column: "claimed_by", as: String.self),
                 try $0.decode(column: "owner", as: String.self), try $0.decode(column: "attempts", as: Int64.self))
            }
        }
    }
}
