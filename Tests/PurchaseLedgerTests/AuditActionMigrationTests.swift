import Foundation
@testable import PurchaseLedger
import PurchaseAPI
import Testing

@Suite("Audit actions: one spelling, the old snake_case entries respelled on upgrade")
struct AuditActionMigrationTests {
    @Test("Migration 16 respells the ledger's snake_case audit actions in kebab-case and leaves every other entry as it was", arguments: StoreKind.allCases)
    func respelledOnUpgrade(_ kind: StoreKind) async throws {
        func check(_ store: any SQLLedgerStore) async throws {
            let respelling = try #require(Schema.migrations.firstIndex { $0.contains { $0.contains("UPDATE audit_log SET action") } })
            let subject = "audit-\(UUID().uuidString)"
            let stored = ["app_account_token_assigned", "consumption_consent_given", "consumption_request_answered", "sign-out", "settle-with-transaction",
                          "consumptionish_kept", "some_other_action"]
            try await store.write { sql in
                _ = try await sql.rows("CREATE TABLE ledger_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
                for (index, statements) in Schema.migrations.prefix(respelling).enumerated() {
                    for statement in statements { _ = try await sql.rows(statement, []) }
                    _ = try await sql.rows("INSERT INTO ledger_migrations (version, applied_at) VALUES ($1, 1)", [.int(Int64(index + 1))])
                }
                for (n, action) in stored.enumerated() {
                    _ = try await sql.rows("INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at) VALUES ($1, 'old', $2, $3, '', $4)",
                                           [.text(UUID().uuidString), .text(action), .text(subject), .int(Int64(1_000 + n))])
                }
            }
            let ledger = Ledger(store: store, catalog: .demo)
            try await ledger.migrate()
            let actions = Set(try await ledger.auditLog(limit: 10_000).filter { $0.subject == subject }.map(\.action.rawValue))
            #expect(actions == ["app-account-token-assigned", "consumption-consent-given", "consumption-request-answered", "sign-out",
                                "settle-with-transaction", "consumptionish_kept", "some_other_action"], "\(actions)")
            #expect(actions.contains(AuditAction.appAccountTokenAssigned.rawValue) && actions.contains(AuditAction.consumptionRequest("answered").rawValue))
            try await ledger.store.close()
        }
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID().uuidString)/ledger.sqlite").path
            try await check(try SQLiteLedgerStore(path: path))
        case .postgres:
            try await withOwnPostgresDatabase("audit_") { url in try await check(try await PostgresLedgerStore(url: url)) }
        }
    }
}
