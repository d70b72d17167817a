import AppStoreFormats
import Foundation

extension Ledger {
    /// What `accountId` owns at `now`.
    public func entitlements(accountId: String, now: Date = Date()) async throws -> AccountEntitlements {
        try Self.checkAccountId(accountId)
        let catalog = catalog
        if let fast = store.fastPath {
            do {
                return try LedgerSession.owned(try await fast.owned(accountId: accountId), accountId: accountId,
                                               catalog: catalog, now: now)
            } catch {
                throw Self.ledgerError(error)
            }
        }
        return try await read { try $0.entitlements(accountId: accountId, catalog: catalog, now: now) }
    }

    /// Every transaction bound to `accountId`, oldest first.
    public func purchases(accountId: String) async throws -> [PurchaseRecord] {
        try await read { try $0.purchases(accountId: accountId) }
    }

    /// The transactions bound to `accountId` that can carry an entitlement (consumables left out), oldest first: what
    /// offer and retention rules judge, read without the account's coin purchases.
    public func entitlingPurchases(accountId: String) async throws -> [PurchaseRecord] {
        try await read { try $0.entitlingPurchases(accountId: accountId) }
    }
}

// MARK: Spending

extension Ledger {
    /// Spends `amount` of a consumable currency once per `idempotencyKey`: a repeat returns the same balance and spends
    /// nothing more; the same key for another amount, currency or account is refused.
    /// - Returns: the balance after the spend.
    public func spend(accountId: String, currency: String, amount: Int64, idempotencyKey: String, now: Date = Date()) async throws -> Int64 {
        try Self.checkAccountId(accountId)
        guard amount > 0 else { throw LedgerError(.invalidInput, "amount must be positive") }
        guard amount <= Self.largestSpend else { throw LedgerError(.invalidInput, "amount is over the limit of \(Self.largestSpend) a spend") }
        guard !idempotencyKey.isEmpty, idempotencyKey.utf8.count <= 200 else { throw LedgerError(.invalidInput, "idempotency keys are 1 to 200 bytes") }
        guard !currency.isEmpty, currency.utf8.count <= 64 else { throw LedgerError(.invalidInput, "currency names are 1 to 64 bytes") }
        // The account's length first, so that no account and key can spell another's ("a" + "b:c" vs "a:b" + "c").
        let key = "spend:\(accountId.utf8.count):\(accountId):\(idempotencyKey)"
        return try await write { session in
            if let first = try session.balanceEntry(key: key) {
                guard first.currency == currency, first.delta == -amount else {
                    throw LedgerError(.idempotencyKeyReused, "idempotency key \(idempotencyKey) was used for another spend")
                }
            } else {
                // The debit is guarded in the database: two replicas spending the last coins cannot both succeed.
                guard try session.debit(accountId: accountId, currency: currency, amount: amount) else {
                    throw LedgerError(.insufficientBalance, "not enough \(currency)")
                }
                try session.recordSpend(key: key, accountId: accountId, currency: currency, amount: amount, at: now)
            }
            return try session.balance(accountId: accountId, currency: currency)
        }
    }
}

extension Ledger {
    /// The most one spend takes: far above any balance a purchase grants, far below where sums of movements overflow.
    public static let largestSpend: Int64 = 1_000_000_000_000
}

extension LedgerSession {
    /// The spend's movement; its key's uniqueness refuses a racing replica's second spend of it (which then re-runs
    /// and finds this one).
    func recordSpend(key: String, accountId: String, currency: String, amount: Int64, at now: Date) throws {
        let made = try sql.first("""
            INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($1, $2, $3, $4, NULL, $5)
            ON CONFLICT (entry_key) DO NOTHING RETURNING entry_key
            """, [.text(key), .text(accountId), .text(currency), .int(-amount), .of(now)])
        guard made != nil else { throw LedgerRace() }
    }
}
