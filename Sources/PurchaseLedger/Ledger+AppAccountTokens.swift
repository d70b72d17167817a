import AppStoreFormats
import Foundation
import PurchaseAPI

extension Ledger {
    /// The `appAccountToken` that names `accountId` for the series of `transactionId`, for a purchase made outside the
    /// app's flow (an offer code redeemed in the App Store, a promotion, a purchase on a device without the app's order):
    /// the token of an order of the account's that names a transaction of the series, or a new granted order of its own
    /// naming this transaction. The server then sets it at Apple (Set App Account Token), so Apple's later transactions of
    /// the series — renewals, refunds, consumption requests — name the account by the same rule as any order's.
    /// Nil when the transaction is not bound to `accountId`, or is a family member's copy (Apple refuses those: 4000185),
    /// or when the series is no longer this account's: its latest bound period is another's, or one of its transactions
    /// carries another account's order token (a resubscription through that account's order) — an old period
    /// uploaded again must not name its series' later owner's renewals after the uploader.
    public func appAccountToken(accountId: String, forTransaction transactionId: String, now: Date = Date()) async throws -> UUID? {
        try Self.checkAccountId(accountId)
        return try await write { session in
            guard let record = try await session.purchase(transactionId), record.accountId == accountId, record.ownership != .familyShared else { return nil }
            // One decision per series at a time across replicas (two uploads at once would make two orders).
            try await session.lockSeries(record.originalTransactionId)
            let latestOwner = try await session.sql.first("""
                SELECT account_id FROM purchases WHERE original_transaction_id = $1 AND account_id IS NOT NULL ORDER BY purchase_date DESC LIMIT 1
                """, [.text(record.originalTransactionId)])?.optionalText(0)
            guard latestOwner == accountId else { return nil }
            let namedElsewhere = try await session.sql.first("""
                SELECT 1 FROM purchases p JOIN orders o ON o.app_account_token = p.app_account_token
                WHERE p.original_transaction_id = $1 AND o.account_id <> $2 LIMIT 1
                """, [.text(record.originalTransactionId), .text(accountId)])
            guard namedElsewhere == nil else { return nil }
            if let text = try await session.sql.first("""
                SELECT o.app_account_token FROM orders o JOIN purchases p ON p.transaction_id = o.transaction_id
                WHERE p.original_transaction_id = $1 AND o.account_id = $2 ORDER BY o.created_at LIMIT 1
                """, [.text(record.originalTransactionId), .text(accountId)])?.text(0), let token = UUID(uuidString: text) {
                return token
            }
            let token = UUID()
            try await session.sql.execute("""
                INSERT INTO orders (order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, updated_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7)
                """, [.text("external-" + UUID().lowercasedString), .text(accountId), .text(record.productId), .text(token.lowercasedString),
                      .text(Order.State.granted.rawValue), .text(transactionId), .of(now)])
            try await session.apply(.audit(actor: "server", action: .appAccountTokenAssigned, subject: accountId,
                                           detail: "series \(record.originalTransactionId), bought outside the app's flow (transaction \(transactionId))", at: now))
            return token
        }
    }
}
