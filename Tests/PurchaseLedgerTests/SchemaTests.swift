import Foundation
@testable import PurchaseLedger
import Testing

@Suite("The ledger's schema: migrations in one transaction, statements written once for both databases")
struct SchemaTests {
    func sqliteStore() throws -> SQLiteLedgerStore {
        try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)/ledger.sqlite").path)
    }

    /// The ledger as a server of an older version left it: the first `count` migrations applied.
    func applyFirst(_ count: Int, to store: any SQLLedgerStore) async throws {
        try await store.write { sql in
            _ = try await sql.rows("CREATE TABLE ledger_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
            for (index, statements) in Schema.migrations.prefix(count).enumerated() {
                for statement in statements { _ = try await sql.rows(statement, []) }
                _ = try await sql.rows("INSERT INTO ledger_migrations (version, applied_at) VALUES ($1, 1)", [.int(Int64(index + 1))])
            }
        }
    }

    func versions(_ store: SQLiteLedgerStore) async throws -> [Int64: Int64] {
        try await store.read { sql in
            Dictionary(uniqueKeysWithValues: try await sql.rows("SELECT version, applied_at FROM ledger_migrations", []).map { (try $0.int(0), try $0.int(1)) })
        }
    }

    @Test("Rows handed over as they come, on both stores: every row in order, integers and text as stored, NULL as nil; a refusal from the reader stops the read, comes back as it was thrown, and the store reads on", arguments: StoreKind.allCases)
    func rowsAsTheyCome(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let sql = "SELECT n, 'row ' || CAST(n AS TEXT), CASE WHEN n % 2 = 0 THEN NULL ELSE n END FROM (\(kind == .postgres ? "SELECT generate_series(1, 5000) AS n" : "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 5000) SELECT n FROM s")) t ORDER BY 1"
        let seen = try await ledger.read { session -> [Int64] in
            var numbers: [Int64] = []
            try await session.sql.forEachRow(sql, []) { row in
                let n = try row.int(0)
                guard try row.text(1) == "row \(n)", row.optionalInt(2) == (n % 2 == 0 ? nil : n) else { throw LedgerError(.storage, "row \(n) read wrong") }
                numbers.append(n)
            }
            return numbers
        }
        #expect(seen == Array(1...5000))
        let stopped = await #expect(throws: LedgerError.self) {
            try await ledger.read { session in
                try await session.sql.forEachRow(sql, []) { row in
                    if try row.int(0) == 10 { throw LedgerError(.invalidInput, "stop at ten") }
                }
            }
        }
        #expect(stopped?.code == .invalidInput && stopped?.message == "stop at ten", "\(String(describing: stopped))")
        for _ in 0..<3 {
            let count = try await ledger.read { try await $0.sql.rows("SELECT COUNT(*) FROM ledger_migrations", [])[0].int(0) }
            #expect(count == Int64(Schema.migrations.count))
        }
    }

    @Test("A read through the store's select list gives what its columns give: integers of each width, a boolean, NULLs, text of any script and empty (PostgreSQL packs them in one record a row); a record field of a type the store does not read is a clear error", arguments: StoreKind.allCases)
    func packedRows(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let numbers = kind == .postgres ? "SELECT generate_series(1, 300) AS n"
            : "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 300) SELECT n FROM s"
        let columns = ["n", "CAST(n * 1000000000000 AS BIGINT)", "CAST(-n AS INTEGER)", "CAST(n % 3 AS SMALLINT)", "n % 2 = 0",
                       "CASE WHEN n % 2 = 0 THEN NULL ELSE 'héllo ✓ ' || CAST(n AS TEXT) END", "CAST('' AS TEXT)", "CAST(NULL AS BIGINT)"]
        let (plain, packed, list) = try await ledger.read { session in
            func all(_ select: String) async throws -> [[SQLValue]] {
                var rows: [[SQLValue]] = []
                try await session.sql.forEachRow("SELECT \(select) FROM (\(numbers)) t ORDER BY n", []) { rows.append($0.values) }
                return rows
            }
            let list = session.sql.selectList(columns)
            return await (try all(columns.joined(separator: ", ")), try all(list), list)
        }
        #expect(plain.count == 300 && plain[1] == [.int(2), .int(2_000_000_000_000), .int(-2), .int(2), .int(1), .null, .text(""), .null])
        #expect(plain[2][5] == .text("héllo ✓ 3"))
        #expect(packed == plain)
        #expect(list.hasPrefix("ROW(") == (kind == .postgres))
        guard kind == .postgres else { return }
        let refused = await #expect(throws: LedgerError.self) {
            try await ledger.read { session in try await session.sql.forEachRow("SELECT ROW(1, CAST(1.5 AS DOUBLE PRECISION))", []) { _ in } }
        }
        #expect(refused?.code == .storage && refused?.message.contains("does not read") == true, "\(String(describing: refused))")
    }

    @Test("SQLite's reads of many rows: one kept reader with a 16 MB page cache, the same connection each time; a second such read meanwhile takes an ordinary reader; both see what was committed")
    func readManyReader() async throws {
        let store = try sqliteStore()
        try await store.write { sql in
            _ = try await sql.rows("CREATE TABLE seen (x BIGINT)", [])
            _ = try await sql.rows("INSERT INTO seen (x) VALUES (7)", [])
        }
        @Sendable func look(_ sql: any SQLExecutor) async throws -> (cache: Int64, connection: Int64, x: Int64) {
            let cache = try await sql.rows("PRAGMA cache_size", [])[0].int(0)
            let connection = Int64((sql as? SQLiteConnection).map { ObjectIdentifier($0).hashValue } ?? 0)
            return (cache, connection, try await sql.rows("SELECT x FROM seen", [])[0].int(0))
        }
        let first = try await store.readMany(look)
        let again = try await store.readMany(look)
        #expect(first.cache == -16_000 && again.cache == -16_000 && first.x == 7 && again.x == 7)
        #expect(first.connection == again.connection)
        #expect(try await store.read(look).cache == -2_000, "an ordinary reader keeps SQLite's default cache")
        // While the kept reader is out, a second read of many rows is not kept waiting for it.
        let held = Rendezvous()
        async let long = store.readMany { sql in
            await held.arrive()
            return try await look(sql)
        }
        while held.arrivals == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let other = try await store.readMany(look)
        await held.arrive()
        let kept = try await long
        #expect(kept.cache == -16_000 && kept.connection == first.connection)
        #expect(other.cache == -2_000 && other.x == 7)
    }

    @Test("SQLite's writer: a commit waits for the disk (synchronous=FULL), checkpoints every 4,000 pages; savepoint journals in memory, sorts still spill to disk")
    func writerSettings() async throws {
        let store = try sqliteStore()
        let settings = try await store.write { sql in
            var values: [SQLValue] = []
            for pragma in ["synchronous", "temp_store", "wal_autocheckpoint", "journal_mode"] {
                values.append(try await sql.first("PRAGMA \(pragma)")?.values.first ?? .null)
            }
            return values
        }
        #expect(settings == [.int(2), .int(0), .int(4000), .text("wal")], "\(settings)")
        #expect(SQLiteConnection.statementJournalInMemory, "the journal's spill size is set before SQLite's first use")
        try await store.close()
    }

    @Test("A statement whose savepoint journal outgrows 128 KiB still commits: dropping a 20 MB index after a change in the same transaction (SQLite copies a spilled journal in writes of at most 128 KiB)")
    func largeStatementJournal() async throws {
        let store = try sqliteStore()
        try await store.write { sql in
            _ = try await sql.rows("CREATE TABLE big (x TEXT)", [])
            _ = try await sql.rows("CREATE TABLE other (y INTEGER)", [])
            _ = try await sql.rows("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
                INSERT INTO big SELECT printf('%080d', i) FROM n
                """, [])
            _ = try await sql.rows("CREATE INDEX big_x ON big (x)", [])
        }
        // With an 8 MiB spill this DROP failed: "database or disk is full".
        try await store.write { sql in
            _ = try await sql.rows("INSERT INTO other (y) VALUES (1)", [])
            _ = try await sql.rows("DROP INDEX big_x", [])
        }
        let indexes = try await store.read { sql in try await sql.rows("SELECT name FROM sqlite_master WHERE type = 'index'", []).count }
        #expect(indexes == 0)
        #expect(try await store.read { sql in try await sql.first("SELECT COUNT(*) FROM other")?.int(0) } == 1)
        try await store.close()
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
        try await store.write { sql in
            _ = try await sql.rows("""
                SELECT app_transaction_id, revocation_percentage, price, currency, offer_type, offer_discount_type, offer_period, storefront
                FROM purchases
                """, [])
        }
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
        try await store.write { sql in _ = try await sql.rows("ALTER TABLE purchases ADD COLUMN app_transaction_id TEXT", []) }
        await #expect(throws: (any Error).self) { try await Schema.migrate(store) }
        #expect(try await versions(store).keys.sorted() == (1...Int64(refunds)).map { $0 })
        // The column the earlier migration adds was rolled back with the failure.
        await #expect(throws: (any Error).self) {
            try await store.read { sql in _ = try await sql.rows("SELECT revocation_type FROM purchases", []) }
        }
        try await store.close()
    }

    @Test("Indexes an operator built beforehand (CREATE INDEX CONCURRENTLY on a large ledger) are taken as they are; the ones they replace are dropped")
    func prebuiltIndexes() async throws {
        let store = try sqliteStore()
        let historyIndexes = try #require(Schema.migrations.firstIndex { $0.contains { $0.contains("purchases_series") } })
        try await applyFirst(historyIndexes, to: store)
        try await store.write { sql in
            _ = try await sql.rows("CREATE INDEX purchases_entitling ON purchases (account_id) WHERE product_type <> 'Consumable'", [])
            _ = try await sql.rows("CREATE INDEX purchases_series ON purchases (original_transaction_id, purchase_date)", [])
        }
        try await Schema.migrate(store)
        let indexes = try await store.read { sql in
            try await sql.rows("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'purchases'", []).map { try $0.text(0) }
        }
        // Kept as built; the series' and expiries' own were later replaced by the wider ones the business view reads.
        #expect(Set(indexes).isSuperset(of: ["purchases_entitling", "purchases_series_ends", "purchases_periods"]), "\(indexes)")
        #expect(!indexes.contains("purchases_account_entitling") && !indexes.contains("purchases_original"), "\(indexes)")
        #expect(!indexes.contains("purchases_series") && !indexes.contains("purchases_expires"), "\(indexes)")
        try await store.close()
    }

    /// A migration whose indexes an operator may build beforehand, and how to leave one of them invalid under its name.
    struct PrebuiltIndexCase: Sendable, CustomTestStringConvertible {
        var migration: Int
        var index: String
        var table: String
        var columns: String
        /// Two rows with the same value of a column, so that a unique build over it fails half-way, as a cancelled one does.
        var duplicates: String
        var uniqueColumn: String
        var replaced: String
        var testDescription: String { "migration \(migration + 1): \(index)" }
    }

    static let prebuiltIndexCases: [PrebuiltIndexCase] = [
        PrebuiltIndexCase(
            migration: Schema.migrations.firstIndex { $0.contains { $0.contains("purchases_series_ends") } }!, index: "purchases_series_ends",
            table: "purchases", columns: "(original_transaction_id, purchase_date, expires_date)",
            duplicates: """
                INSERT INTO purchases (transaction_id, original_transaction_id, account_id, product_id, product_type, environment, quantity,
                    purchase_date, is_upgraded, signed_date, source, recorded_at)
                SELECT 'tx' || g, 'tx1', 'account', 'pro', 'Auto-Renewable Subscription', 'Sandbox', 1, g, 0, g, 'app', g FROM generate_series(1, 2) g
                """,
            uniqueColumn: "product_type", replaced: "purchases_series"),
        PrebuiltIndexCase(
            migration: Schema.migrations.firstIndex { $0.contains { $0.contains("webhook_events_due_order") } }!, index: "webhook_events_due_order",
            table: "webhook_events", columns: "(state, next_attempt_at, created_at, event_id)",
            duplicates: """
                INSERT INTO webhook_events (event_id, type, account_id, body, state, attempts, next_attempt_at, created_at)
                SELECT 'event' || g, 'INITIAL_PURCHASE', 'account', '{}', 'pending', 0, g, g FROM generate_series(1, 2) g
                """,
            uniqueColumn: "state", replaced: "webhook_events_due"),
    ]

    @Test("On PostgreSQL, an index an operator began CONCURRENTLY and cancelled (left invalid under its name) is built again, not taken",
          arguments: prebuiltIndexCases)
    func invalidPrebuiltIndexIsRebuilt(_ prebuilt: PrebuiltIndexCase) async throws {
        try await withOwnPostgresDatabase("migration_") { url in
            let store = try await PostgresLedgerStore(url: url)
            try await applyFirst(prebuilt.migration, to: store)
            _ = try await store.write { sql in try await sql.rows(prebuilt.duplicates, []) }
            await #expect(throws: (any Error).self) {
                try await store.read { sql in try await sql.rows("CREATE UNIQUE INDEX CONCURRENTLY \(prebuilt.index) ON \(prebuilt.table) (\(prebuilt.uniqueColumn))", []) }
            }
            let before = try await indexes(of: prebuilt.table, in: store)
            #expect(before.contains { $0.name == prebuilt.index && !$0.valid }, "the failed build left no invalid index: \(before)")
            try await Schema.migrate(store)
            let after = try await indexes(of: prebuilt.table, in: store)
            let rebuilt = try #require(after.first { $0.name == prebuilt.index }, "\(after)")
            #expect(rebuilt.valid && rebuilt.definition.contains(prebuilt.columns), "\(rebuilt)")
            #expect(after.allSatisfy { $0.valid }, "\(after)")
            #expect(!after.contains { $0.name == prebuilt.replaced }, "\(after)")
            try await store.close()
        }
    }

    @Test("On PostgreSQL a notification's signed payload is stored as it is: never put through a compression it cannot pass")
    func postgresStoresSignedPayloadUncompressed() async throws {
        let ledger = try await makeLedger(.postgres)
        let storage = try await ledger.sqlStore.read { sql in
            try await sql.rows("SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'notifications'::regclass AND attname = 'signed_payload'", [])
                .first?.text(0)
        }
        #expect(storage == "e", "signed_payload's storage is \(storage ?? "unknown"), not external")
        // The payload still reads back whole.
        let payload = (0..<800).map { _ in UUID().uuidString }.joined().data(using: .utf8)!.base64EncodedString()
        let uuid = UUID().uuidString
        #expect(try await ledger.apply(NotificationEvent(notificationUUID: uuid, type: .test, subtype: nil, signedDate: Date(), signedPayload: payload)) == .applied)
        let stored = try await ledger.sqlStore.read { sql in
            try await sql.rows("SELECT signed_payload FROM notifications WHERE notification_uuid = $1", [.text(uuid)]).first?.text(0)
        }
        #expect(stored == payload)
    }

    @Test("On PostgreSQL a start waits at most a second for the lock that changes how signed payloads are stored, goes on without it, and a later start makes the change")
    func signedPayloadStorageWaitsBriefly() async throws {
        try await withOwnPostgresDatabase("storage_") { url in
            let store = try await PostgresLedgerStore(url: url)
            let reader = try await PostgresLedgerStore(url: url)
            try await applyFirst(Schema.migrations.count, to: store)
            func storage() async throws -> String? {
                try await store.read { sql in
                    try await sql.rows("SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'notifications'::regclass AND attname = 'signed_payload'", [])
                        .first?.text(0)
                }
            }
            // A long read of the notifications (a dump, a report) holds its lock meanwhile.
            let held = Signal(), release = Signal()
            let longRead = Task {
                try await reader.write { sql in
                    _ = try await sql.rows("SELECT 1 FROM notifications LIMIT 1", [])
                    held.raise()
                    while !release.isRaised { try await Task.sleep(for: .milliseconds(10)) }
                }
            }
            while !held.isRaised { try await Task.sleep(for: .milliseconds(10)) }
            let started = ContinuousClock.now
            try await Schema.migrate(store)
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(try await storage() == "x")
            release.raise()
            try await longRead.value
            try await Schema.migrate(store)
            #expect(try await storage() == "e")
            try await store.close()
            try await reader.close()
        }
    }

    func indexes(of table: String, in store: any SQLLedgerStore) async throws -> [(name: String, valid: Bool, definition: String)] {
        try await store.read { sql in
            try await sql.rows("""
                SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = $1::regclass
                """, [.text(table)]).map { (name: try $0.text(0), valid: try $0.int(1) == 1, definition: try $0.text(2)) }
        }
    }

    /// SQLite's plan for each statement (EXPLAIN QUERY PLAN's detail column, one line per step), on a freshly migrated
    /// ledger.
    func plans(_ statements: [(sql: String, binds: [SQLValue])]) async throws -> [[String]] {
        let store = try sqliteStore()
        try await Schema.migrate(store)
        let plans = try await store.read { session in
            var plans: [[String]] = []
            for statement in statements {
                plans.append(try await session.rows("EXPLAIN QUERY PLAN " + statement.sql, statement.binds).map { try $0.text(3) })
            }
            return plans
        }
        try await store.close()
        return plans
    }

    @Test("What an account owns is read without its consumables: every read of purchases goes through the index that leaves them out")
    func ownedQueryUsesEntitlingIndex() async throws {
        let steps = try await plans([(LedgerSession.ownedQuery, [.text("account")])])[0]
        let purchaseReads = steps.filter { $0.contains(" purchases ") }
        // Both the entitling purchases and the account's subscription series.
        #expect(purchaseReads.count == 2, "\(steps)")
        #expect(purchaseReads.allSatisfy { $0.contains("USING INDEX purchases_entitling (account_id=?") }, "\(steps)")
    }

    @Test("A series' holder is one index step (no sort of every period); stale series are found from the window of expiries, not a scan of every purchase")
    func seriesReadsDoNotGrowWithHistory() async throws {
        let found = try await plans([
            (LedgerSession.factsQuery, [.text("o"), .text("t"), .text("x"), .text("x"), .text("p")]),
            (Ledger.staleSeriesQuery, [.text("Auto-Renewable Subscription"), .int(2), .int(1), .int(100), .int(1), .int(2), .int(3)]),
        ])
        let (facts, stale) = (found[0], found[1])
        #expect(!facts.contains { $0.contains("TEMP B-TREE") }, "\(facts)")
        #expect(facts.filter { $0.contains("purchases_series") }.allSatisfy { $0.contains("original_transaction_id=?") }, "\(facts)")
        #expect(!stale.contains { $0.hasPrefix("SCAN purchases") }, "\(stale)")
        #expect(stale.contains { $0.contains("purchases_periods") }, "\(stale)")
    }

    @Test("The business view's instant reads indexes alone: no step into a table for each live series, whichever environment is asked")
    func instantReadsIndexesAlone() async throws {
        let binds: [SQLValue] = [.int(1_000), .int(2_000), .text("Production"), .int(0)]
        for steps in try await plans([(Ledger.runningPeriodsQuery(anyEnvironment: false), binds),
                                      (Ledger.runningPeriodsQuery(anyEnvironment: true), binds)]) {
            let reads = steps.filter { $0.hasPrefix("SEARCH") || $0.hasPrefix("SCAN") }
            #expect(reads.count == 3, "\(steps)")
            let periods = reads.filter { $0.contains(" p ") || $0.contains(" q ") }
            #expect(periods.count == 2 && periods.allSatisfy { $0.contains("USING COVERING INDEX") }, "\(steps)")
            #expect(reads.contains { $0.contains("purchases_periods (expires_date>?)") }, "\(steps)")
            // The status: one keyed step. Without statistics (a new ledger, never analysed) SQLite takes the primary key,
            // one row by its uniqueness, and the row; once analysed (migration 23 analyses `subscriptions`), the index
            // that holds the four columns (BENCHMARKS.md, run 5).
            #expect(reads.contains { $0.hasPrefix("SEARCH s ") && $0.contains("(original_transaction_id=?)") }, "\(steps)")
        }
    }

    @Test("Offers and retention judge an account's purchases without its consumables; passes over open orders and delivered webhook events read their window; a webhook claim reads one row")
    func occasionalReadsDoNotGrowWithHistory() async throws {
        let found = try await plans([
            (LedgerSession.entitlingPurchasesQuery, [.text("account")]),
            (Ledger.openOrdersQuery, [.int(2), .int(1), .int(100)]),
            (Ledger.pruneWebhookEventsQuery, [.int(1), .int(1_000)]),
            (Ledger.dueWebhookEventQuery, [.int(1), .int(1)]),
        ])
        let (entitling, orders, prune, due) = (found[0], found[1], found[2], found[3])
        #expect(entitling.contains { $0.contains("USING INDEX purchases_entitling (account_id=?)") }, "\(entitling)")
        #expect(orders.contains { $0.contains("orders_state_created (state=? AND created_at>? AND created_at<?)") }, "\(orders)")
        #expect(!orders.contains { $0.contains("TEMP B-TREE") }, "\(orders)")
        #expect(prune.contains { $0.contains("webhook_events_delivered (state=? AND delivered_at<?)") }, "\(prune)")
        #expect(!prune.contains { $0.hasPrefix("SCAN webhook_events") }, "\(prune)")
        #expect(due.contains { $0.contains("webhook_events_due_order (state=? AND next_attempt_at<?)") }, "\(due)")
        #expect(!due.contains { $0.contains("TEMP B-TREE") }, "\(due)")
    }

    /// Ends a write with what it read, undoing what it wrote: the PostgreSQL database is shared with other tests.
    struct Rollback: Error { let plans: [[String]] }

    @Test("On PostgreSQL too, what an account owns is read without its 2,000 coin purchases, planned for the values or generically (as inside iapkit_apply)")
    func postgresOwnedQuerySkipsConsumables() async throws {
        let ledger = try await makeLedger(.postgres)
        let (account, prefix) = (uniqueId("coins-"), uniqueId("bulk-"))
        do {
            _ = try await ledger.sqlStore.write { sql -> Int in
                // The account's 2,000 coin purchases and 60 monthly periods beside 1,500 other accounts' 12 periods each
                // (which the entitling index holds), and statistics that know it.
                _ = try await sql.rows("""
                    INSERT INTO purchases (transaction_id, original_transaction_id, account_id, product_id, product_type, environment, quantity,
                        purchase_date, is_upgraded, signed_date, source, recorded_at)
                    SELECT $1 || g, CASE WHEN g <= 2000 THEN $1 || g WHEN g <= 2060 THEN $1 || 'mine' ELSE $1 || (g / 12) END,
                        CASE WHEN g <= 2060 THEN $2 ELSE $1 || 'other-' || (g / 12) END,
                        CASE WHEN g <= 2000 THEN 'coins' ELSE 'pro' END,
                        CASE WHEN g <= 2000 THEN 'Consumable' ELSE 'Auto-Renewable Subscription' END, 'Sandbox', 1, g, 0, g, 'app', g
                    FROM generate_series(1, 20060) g
                    """, [.text(prefix), .text(account)])
                _ = try await sql.rows("ANALYZE purchases", [])
                // Planned for the account (a bound statement), and generically, as iapkit_apply's RETURN QUERY is.
                var plans = [try await sql.rows("EXPLAIN (ANALYZE, COSTS OFF) " + LedgerSession.ownedQuery, [.text(account)]).map { try $0.text(0) }]
                let name = "owned_" + uniqueId()
                _ = try await sql.rows("PREPARE \(name)(text) AS " + LedgerSession.ownedQuery, [])
                _ = try await sql.rows("SET LOCAL plan_cache_mode = force_generic_plan", [])
                plans.append(try await sql.rows("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE \(name)('\(account)')", []).map { try $0.text(0) })
                _ = try await sql.rows("DEALLOCATE \(name)", [])
                throw Rollback(plans: plans)
            }
            Issue.record("the write was not rolled back")
        } catch let rollback as Rollback {
            for plan in rollback.plans {
                #expect(!plan.contains { $0.contains("Seq Scan on purchases") }, "\(plan)")
                let removed = plan.filter { $0.contains("Rows Removed by Filter") }
                    .compactMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }
                #expect(removed.allSatisfy { $0 < 100 }, "\(plan)")
            }
        }
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
