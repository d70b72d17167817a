import AppStoreFormats
import Foundation

/// A signed app transaction an account presented: the App Store's proof that this Apple ID obtained the app.
public struct AppTransactionRecord: Sendable, Hashable, Codable {
    public var appTransactionId: String
    public var accountId: String
    public var bundleId: String
    public var environment: AppStoreEnvironment
    public var originalPurchaseDate: Date?
    public var originalApplicationVersion: String?
    public var firstSeen: Date
    public var lastSeen: Date
}

extension Ledger {
    /// Keeps a verified app transaction for `accountId` (once per app transaction and account; presenting it again
    /// only moves `lastSeen`).
    public func recordAppTransaction(_ payload: AppTransactionDecodedPayload, accountId: String, now: Date = Date()) async throws {
        try Self.checkAccountId(accountId)
        guard let id = payload.appTransactionId ?? payload.originalPurchaseDate.map({ "purchase-\(Millis.of($0))" }), !id.isEmpty, id.utf8.count <= 128,
              let bundleId = payload.bundleId, bundleId.utf8.count <= 200 else {
            throw LedgerError(.invalidInput, "the app transaction lacks its id or bundle id")
        }
        try await write { session in
            try await session.sql.execute("""
                INSERT INTO app_transactions (app_transaction_id, account_id, bundle_id, environment, original_purchase_date,
                    original_application_version, first_seen, last_seen)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
                ON CONFLICT (app_transaction_id, account_id) DO UPDATE SET last_seen = excluded.last_seen
                """, [.text(id), .text(accountId), .text(bundleId), .text((payload.receiptType ?? .production).rawValue),
                      .of(payload.originalPurchaseDate), .of(payload.originalApplicationVersion.map { String($0.prefix(64)) }), .of(now)])
        }
    }

    /// The app transactions `accountId` presented, first seen first.
    public func appTransactions(accountId: String) async throws -> [AppTransactionRecord] {
        try await read { session in
            try await session.sql.rows("""
                SELECT app_transaction_id, account_id, bundle_id, environment, original_purchase_date, original_application_version, first_seen, last_seen
                FROM app_transactions WHERE account_id = $1 ORDER BY first_seen
                """, [.text(accountId)]).map {
                AppTransactionRecord(appTransactionId: try $0.text(0), accountId: try $0.text(1), bundleId: try $0.text(2),
                                     environment: AppStoreEnvironment(rawValue: try $0.text(3)), originalPurchaseDate: $0.optionalInt(4).map(Millis.date),
                                     originalApplicationVersion: $0.optionalText(5), firstSeen: Millis.date(try $0.int(6)), lastSeen: Millis.date(try $0.int(7)))
            }
        }
    }
}
