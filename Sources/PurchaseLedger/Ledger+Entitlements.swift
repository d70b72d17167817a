import AppStoreFormats
import Foundation

extension Ledger {
    /// What `accountId` owns at `now`.
    public func entitlements(accountId: String, now: Date = Date()) async throws -> AccountEntitlements {
        try Self.checkAccountId(accountId)
        let catalog = catalog
        if let fast = sqlStore.fastPath {
            do {
                return try LedgerSession.owned(try await fast.owned(accountId: accountId), accountId: accountId,
                                               catalog: catalog, now: now)
            } catch {
                throw Self.ledgerError(error)
            }
        }
        return try await read { try await $0.entitlements(accountId: accountId, catalog: catalog, now: now) }
    }

    /// Every transaction bound to `accountId`, oldest first.
    public func purchases(accountId: String) async throws -> [PurchaseRecord] {
        try await read { try await $0.purchases(accountId: accountId) }
    }

    /// The transactions bound to `accountId` that can carry an entitlement (consumables left out), oldest first: what
    /// offer and retention rules judge, read without the account's coin purchases.
    public func entitlingPurchases(accountId: String) async throws -> [PurchaseRecord] {
        try await read { try await $0.entitlingPurchases(accountId: accountId) }
    }
}

// MARK: Spending

extension Ledger {
    /// Spends `amount` of a consumable currency once per `idempotencyKey`: a repeat returns the same balance and spends
    /// nothing more; the same key for another amount, currency or account is refused.
    /// - Returns: the balance after the spend.
    public func spend(accountId: String, currency: String, amount: Int64, idempotencyKey: String, now: Date = Date()) async throws -> Int64 {
        try Self.checkAccountId(accountId)
        let request = SpendRules.Request(accountId: accountId, currency: currency, amount: amount, idempotencyKey: idempotencyKey)
        if let refusal = SpendRules.check(request) { throw refusal }
        return try await write { session in
            let facts = try await session.spendFacts(key: SpendRules.key(request), accountId: accountId, currency: currency)
            switch SpendRules.decide(request, earlier: facts.earlier, balance: facts.balance, now: now) {
            case .refused(let refusal): throw refusal
            case .repeated: return facts.balance
            case .spend(let effects):
                try await session.apply(effects)
                return try await session.balance(accountId: accountId, currency: currency)
            }
        }
    }
}

extension Ledger {
    /// The most one spend takes (``SpendRules/largestSpend``).
    public static let largestSpend = SpendRules.largestSpend
}
