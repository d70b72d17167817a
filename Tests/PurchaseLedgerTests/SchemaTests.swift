import Foundation
@testable import PurchaseLedger
import Testing

@Suite("The ledger's schema: migrations in one transaction, statements written once for both databases")
struct SchemaTests {
    func sqliteStore() throws -> SQLiteLedgerStore {
        try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)/ledger.sqlite").path)
    }

    /// The ledger as a server of an older version left it: the first `count` migrations applied.
    func applyFirst(_ count: Int, to store: SQLiteLedgerStore) async throws {
        try await store.write { sql in
            _ = try sql.rows("CREATE TABLE ledger_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
            for (index, statements) in Schema.migrations.prefix(count).enumerated() {
                for statement in statements { _ = try sql.rows(statement, []) }
                _ = try sql.rows("INSERT INTO ledger_migrations (version, applied_at) VALUES ($1, 1)", [.int(Int64(index + 1))])
            }
        }
    }

    func versions(_ store: SQLiteLedgerStore) async throws -> [Int64: Int64] {
        try await store.read { sql in
            Dictionary(uniqueKeysWithValues: try sql.rows("SELECT version, applied_at FROM ledger_migrations", []).map { (try $0.int(0), try $0.int(1)) })
        }
    }

    @Test("A ledger an older version left is brought up to date; starting again over it changes nothing")
    func upgradesOlderLedger() async throws {
        let store = try sqliteStore()
        try await applyFirst(Schema.migrations.count - 2, to: store)
        try await Schema.migrate(store)
        let after = try await versions(store)
        #expect(after.keys.sorted() == (1...Int64(Schema.migrations.count)).map { $0 })
        #expect(after[1] == 1, "a migration applied before is not applied again")
        // The last migration's column is there: a purchase can be written with it.
        try await store.write { sql in _ = try sql.rows("SELECT app_transaction_id, revocation_percentage FROM purchases", []) }
        try await Schema.migrate(store)
        #expect(try await versions(store) == after)
        try await store.close()
    }

    @Test("A migration that fails leaves the schema as it was: the migrations before it in the same start are undone too")
    func failedMigrationUndoesItsStart() async throws {
        let store = try sqliteStore()
        // The migration adding revocation_type, and the one after it adding app_transaction_id.
        let refunds = try #require(Schema.migrations.firstIndex { $0.contains { $0.contains("ADD COLUMN revocation_type") } })
        #expect(Schema.migrations[refunds + 1].contains { $0.contains("ADD COLUMN app_transaction_id") })
        try await applyFirst(refunds, to: store)
        // The column the later migration adds is there already (added by hand): its ALTER TABLE fails, after the
        // migration before it ran in the same start.
        try await store.write { sql in _ = try sql.rows("ALTER TABLE purchases ADD COLUMN app_transaction_id TEXT", []) }
        await #expect(throws: (any Error).self) { try await Schema.migrate(store) }
        #expect(try await versions(store).keys.sorted() == (1...Int64(refunds)).map { $0 })
        // The column the earlier migration adds was rolled back with the failure.
        await #expect(throws: (any Error).self) {
            try await store.read { sql in _ = try sql.rows("SELECT revocation_type FROM purchases", []) }
        }
        try await store.close()
    }

    @Test("What an account owns is read without its consumables: every read of purchases goes through the index that leaves them out")
    func ownedQueryUsesEntitlingIndex() async throws {
        let store = try sqliteStore()
        try await Schema.migrate(store)
        let plan = try await store.read { sql in
            try sql.rows("EXPLAIN QUERY PLAN " + LedgerSession.ownedQuery, [.text("account")]).map { try $0.text(3) }
        }
        let purchaseReads = plan.filter { $0.contains(" purchases ") }
        // Both the entitling purchases and the account's subscription series.
        #expect(purchaseReads.count == 2, "\(plan)")
        #expect(purchaseReads.allSatisfy { $0.contains("USING INDEX purchases_account_entitling (account_id=?") }, "\(plan)")
        try await store.close()
    }

    @Test("PostgreSQL's $n placeholders become SQLite's ?n; a $ inside a name stays", arguments: [
        ("SELECT * FROM purchases WHERE transaction_id = $1 AND account_id = $12", "SELECT * FROM purchases WHERE transaction_id = ?1 AND account_id = ?12"),
        ("SELECT a$1, _$2, 9$3 FROM t", "SELECT a$1, _$2, 9?3 FROM t"),
        ("VALUES ($1,$2)", "VALUES (?1,?2)"),
        ("SELECT 'é$1' ", "SELECT 'é$1' "),
    ])
    func numberedParameters(_ sql: String, _ expected: String) {
        #expect(SQLiteConnection.numberedParameters(sql) == expected)
    }
}
