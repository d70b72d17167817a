import AppStoreFormats
import Foundation
import SQLKit

extension Ledger {
    /// What `accountId` owns at `now`.
    public func entitlements(accountId: String, now: Date = Date()) async throws -> AccountEntitlements {
        try await transaction { [self] db in try await entitlements(db, accountId: accountId, now: now) }
    }

    func entitlements(_ db: any SQLDatabase, accountId: String, now: Date) async throws -> AccountEntitlements {
        let purchases = try await db.raw("""
            SELECT transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment, quantity, purchase_date,
                   expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token, signed_date
            FROM purchases WHERE account_id = \(bind: accountId)
            """).all().map(Self.decodePurchase)
        let series = try await db.raw("""
            SELECT original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew, auto_renew_product_id, signed_date
            FROM subscriptions WHERE original_transaction_id IN (SELECT original_transaction_id FROM purchases WHERE account_id = \(bind: accountId))
            """).all().map(Self.decodeSubscription)
        var balances: [String: Int64] = [:]
        for row in try await db.raw("SELECT currency, amount FROM balances WHERE account_id = \(bind: accountId)").all() {
            balances[try row.decode(column: "currency", as: String.self)] = try row.decode(column: "amount", as: Int64.self)
        }
        let entitlements = EntitlementRules.entitlements(
            purchases: purchases, subscriptions: Dictionary(series.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, _ in a }),
            catalog: catalog, now: now)
        return AccountEntitlements(accountId: accountId, entitlements: entitlements, balances: balances)
    }

    /// Every transaction bound to `accountId`, oldest first.
    public func purchases(accountId: String) async throws -> [PurchaseRecord] {
        try await transaction { db in
            try await db.raw("""
                SELECT transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment, quantity, purchase_date,
                       expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token, signed_date
                FROM purchases WHERE account_id = \(bind: accountId) ORDER BY purchase_date, transaction_id
                """).all().map(Self.decodePurchase)
        }
    }

    static func decodePurchase(_ row: any SQLRow) throws -> PurchaseRecord {
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = try row.decode(column: "transaction_id", as: String.self)
        payload.originalTransactionId = try row.decode(column: "original_transaction_id", as: String.self)
        payload.productId = try row.decode(column: "product_id", as: String.self)
        payload.type = ProductType(rawValue: try row.decode(column: "product_type", as: String.self))
        payload.environment = AppStoreEnvironment(rawValue: try row.decode(column: "environment", as: String.self))
        payload.quantity = Int(try row.decode(column: "quantity", as: Int64.self))
        payload.purchaseDate = Millis.date(try row.decode(column: "purchase_date", as: Int64.self))
        payload.expiresDate = try row.decode(column: "expires_date", as: Int64?.self).map(Millis.date)
        payload.revocationDate = try row.decode(column: "revocation_date", as: Int64?.self).map(Millis.date)
        payload.revocationReason = try row.decode(column: "revocation_reason", as: Int64?.self).map { RevocationReason(rawValue: Int($0)) }
        payload.isUpgraded = try row.decode(column: "is_upgraded", as: Int64.self) != 0
        payload.inAppOwnershipType = try row.decode(column: "ownership", as: String?.self).map(InAppOwnershipType.init(rawValue:))
        payload.appAccountToken = try row.decode(column: "app_account_token", as: String?.self).flatMap(UUID.init(uuidString:))
        payload.signedDate = Millis.date(try row.decode(column: "signed_date", as: Int64.self))
        var record = try PurchaseRecord(payload)
        record.accountId = try row.decode(column: "account_id", as: String?.self)
        record.orderId = try row.decode(column: "order_id", as: String?.self)
        return record
    }

    static func decodeSubscription(_ row: any SQLRow) throws -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: try row.decode(column: "original_transaction_id", as: String.self),
            productId: try row.decode(column: "product_id", as: String?.self),
            status: try row.decode(column: "status", as: Int64?.self).map { SubscriptionStatus(rawValue: Int($0)) },
            expiresDate: try row.decode(column: "expires_date", as: Int64?.self).map(Millis.date),
            gracePeriodExpiresDate: try row.decode(column: "grace_period_expires_date", as: Int64?.self).map(Millis.date),
            autoRenew: try row.decode(column: "auto_renew", as: Int64?.self).map { $0 != 0 },
            autoRenewProductId: try row.decode(column: "auto_renew_product_id", as: String?.self),
            signedDate: Millis.date(try row.decode(column: "signed_date", as: Int64.self)))
    }
}

// MARK: Spending

extension Ledger {
    /// Spends `amount` of a consumable currency once per `idempotencyKey`: a repeat returns the same balance and spends
    /// nothing more; the same key for another amount, currency or account is refused.
    /// - Returns: the balance after the spend.
    public func spend(accountId: String, currency: String, amount: Int64, idempotencyKey: String, now: Date = Date()) async throws -> Int64 {
        try Self.checkAccountId(accountId)
        guard amount > 0, amount <= 1_000_000_000_000 else { throw LedgerError(.invalidInput, "amount must be positive") }
        guard !idempotencyKey.isEmpty, idempotencyKey.utf8.count <= 200 else { throw LedgerError(.invalidInput, "idempotency keys are 1 to 200 bytes") }
        guard !currency.isEmpty, currency.utf8.count <= 64 else { throw LedgerError(.invalidInput, "currency names are 1 to 64 bytes") }
        let key = "spend:\(accountId):\(idempotencyKey)"
        return try await transaction { db in
            let made = try await db.raw("""
                INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at)
                VALUES (\(bind: key), \(bind: accountId), \(bind: currency), \(bind: -amount), NULL, \(bind: Millis.of(now)))
                ON CONFLICT (entry_key) DO NOTHING RETURNING entry_key
                """).first()
            if made == nil {
                let first = try await db.raw("SELECT currency, delta FROM balance_entries WHERE entry_key = \(bind: key)").first()
                guard try first?.decode(column: "currency", as: String.self) == currency, try first?.decode(column: "delta", as: Int64.self) == -amount else {
                    throw LedgerError(.idempotencyKeyReused, "idempotency key \(idempotencyKey) was used for another spend")
                }
            } else {
                let spent = try await db.raw("""
                    UPDATE balances SET amount = amount - \(bind: amount)
                    WHERE account_id = \(bind: accountId) AND currency = \(bind: currency) AND amount >= \(bind: amount) RETURNING amount
                    """).first()
                guard spent != nil else { throw LedgerError(.insufficientBalance, "not enough \(currency)") }
            }
            let row = try await db.raw("SELECT amount FROM balances WHERE account_id = \(bind: accountId) AND currency = \(bind: currency)").first()
            return try row?.decode(column: "amount", as: Int64.self) ?? 0
        }
    }
}
