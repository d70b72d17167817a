extension Schema {
    /// Migration 14: transactions of an environment other than Apple's two are keyed apart (``TransactionKey``):
    /// `7` of Xcode becomes `Xcode:7` wherever the ledger names it — the purchase, its series, its order, its balance
    /// movements (`grant:Xcode:7`), its conflicts and device reports. Without it such a transaction uploaded again after
    /// the upgrade would be a new one, granted twice.
    ///
    /// Which rows are test transactions is read once, before anything moves, into two work tables: a transaction id and
    /// a series id are looked up apart (a forged series may carry a real purchase's id as its original). Keys that must
    /// stay unique move in two steps, through a form longer than any stored id (ids are at most 64 bytes, keys 77): a
    /// key forged before the upgrade to look like a new one (an Xcode id `Xcode:7`) cannot make the start fail midway.
    static let keyTestEnvironmentsApart: [String] = {
        let apple = "('Production', 'Sandbox')"
        let parked = String(repeating: "#", count: 80)
        /// Moves `column` of `table` (a transaction or series id, or built from one) to its key, for the rows `matching`.
        func move(_ table: String, _ column: String, to key: String, where matching: String) -> [String] {
            [
                "UPDATE \(table) SET \(column) = '\(parked)' || \(column) WHERE \(matching)",
                "UPDATE \(table) SET \(column) = \(key) WHERE \(column) LIKE '\(parked)%'",
            ]
        }
        let unparked = "substr(%@, \(parked.utf8.count + 1))"
        func original(_ column: String) -> String { unparked.replacingOccurrences(of: "%@", with: column) }
        let transactionEnvironment = "(SELECT k.environment FROM test_transactions_14 k WHERE k.old_id = %@)"
        let seriesEnvironment = "(SELECT k.environment FROM test_series_14 k WHERE k.old_id = %@)"
        func keyed(_ lookup: String, _ id: String) -> String { "\(lookup.replacingOccurrences(of: "%@", with: id)) || ':' || \(id)" }
        func inTransactions(_ column: String) -> String { "\(column) IN (SELECT old_id FROM test_transactions_14)" }
        func inSeries(_ column: String) -> String { "\(column) IN (SELECT old_id FROM test_series_14)" }

        var statements = [
            "CREATE TABLE test_transactions_14 (old_id TEXT PRIMARY KEY, environment TEXT NOT NULL)",
            "CREATE TABLE test_series_14 (old_id TEXT PRIMARY KEY, environment TEXT NOT NULL)",
            """
            INSERT INTO test_transactions_14 (old_id, environment)
            SELECT transaction_id, environment FROM purchases WHERE environment NOT IN \(apple)
            """,
            """
            INSERT INTO test_series_14 (old_id, environment)
            SELECT original_transaction_id, MIN(environment) FROM purchases WHERE environment NOT IN \(apple)
            GROUP BY original_transaction_id
            """,
            "UPDATE orders SET transaction_id = \(keyed(transactionEnvironment, "transaction_id")) WHERE \(inTransactions("transaction_id"))",
            "UPDATE device_reports SET transaction_id = \(keyed(transactionEnvironment, "transaction_id")) WHERE \(inTransactions("transaction_id"))",
        ]
        // Balance movements: the entry key (`grant:7`, `adjust:7:2`) first, while the transaction id still finds it.
        let entryKey = """
            CASE WHEN \(original("entry_key")) LIKE 'grant:%' THEN 'grant:' || \(keyed(transactionEnvironment, "transaction_id"))
            WHEN \(original("entry_key")) LIKE 'adjust:%' THEN 'adjust:' || \(transactionEnvironment.replacingOccurrences(of: "%@", with: "transaction_id")) || ':' || substr(\(original("entry_key")), 8)
            ELSE \(original("entry_key")) END
            """
        statements += move("balance_entries", "entry_key", to: entryKey, where: inTransactions("transaction_id"))
        statements.append("UPDATE balance_entries SET transaction_id = \(keyed(transactionEnvironment, "transaction_id")) WHERE \(inTransactions("transaction_id"))")
        statements += move("conflicts", "transaction_id", to: keyed(transactionEnvironment, original("transaction_id")), where: inTransactions("transaction_id"))
        statements += move("subscriptions", "original_transaction_id", to: keyed(seriesEnvironment, original("original_transaction_id")),
                           where: inSeries("original_transaction_id"))
        statements += move("subscription_checks", "original_transaction_id", to: keyed(seriesEnvironment, original("original_transaction_id")),
                           where: inSeries("original_transaction_id"))
        // The purchases last: the work tables above were read from them.
        statements.append("""
            UPDATE purchases SET original_transaction_id = environment || ':' || original_transaction_id WHERE environment NOT IN \(apple)
            """)
        statements += move("purchases", "transaction_id", to: "environment || ':' || \(original("transaction_id"))", where: "environment NOT IN \(apple)")
        statements += ["DROP TABLE test_transactions_14", "DROP TABLE test_series_14"]
        return statements
    }()
}
