import CSQLite
import Foundation

/// One SQLite connection through the C API, with its prepared statements kept for its whole life.
///
/// Not thread-safe by design: each connection belongs to one thread at a time (the writer thread, or a reader that
/// checked it out), which is what lets a ledger operation run with no hop per statement.
final class SQLiteConnection: SQLExecutor {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    /// Savepoint journals stay in memory (SQLite's default spills them to a temporary file past 64 KiB). Under the
    /// purchase load, a group's savepoints spilled: 58 % of the writer's pwrite calls, 63 KB written per purchase (27 KB
    /// without). Never spilled (-1), not spilled past a larger size: SQLite (3.40, Debian 12's) copies an in-memory
    /// journal to its file in one write per chunk, a chunk is the spill size, and its unix layer writes at most 128 KiB
    /// less one byte per call — a larger chunk's write came back short and every statement whose journal outgrew the
    /// spill failed with "database or disk is full" (migration 23's DROP INDEX at a million purchases; SchemaTests keeps
    /// that case). A journal holds each page a transaction changed once, so memory follows the largest transaction (a
    /// migration's), not the load. Only the journal: `temp_store` stays on disk, so sorts (a migration's CREATE INDEX
    /// over a million rows) still spill instead of growing the process. Set once, before SQLite's first use in the
    /// process; false when something else in the process had used SQLite first (the default then stays, which costs
    /// writes, not answers).
    static let statementJournalInMemory: Bool = iapkit_sqlite_statement_journal_spill(-1) == SQLITE_OK

    init(path: String, readOnly: Bool = false) throws {
        _ = Self.statementJournalInMemory
        self.path = path
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        var db: OpaquePointer?
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw LedgerError(.storage, "cannot open SQLite database \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, 10_000)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs statements that take no binds and return nothing worth reading (pragmas, BEGIN, COMMIT).
    func exec(_ sql: String) throws {
        guard let handle else { throw LedgerError(.storage, "the SQLite connection is closed") }
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(error)
            throw LedgerError(.storage, "SQLite refused \(sql.prefix(60)): \(message)")
        }
    }

    func rows(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow] {
        var result: [SQLRow] = []
        try forEachRow(sql, binds) { result.append($0) }
        return result
    }

    func forEachRow(_ sql: String, _ binds: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        try SQLValue.refuseNUL(in: binds)
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in binds.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32 = switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .int(let number): sqlite3_bind_int64(statement, index, number)
            // With its byte length: text is bound whole, a NUL inside it included, never cut at the first NUL.
            case .text(let text): text.withCString { sqlite3_bind_text(statement, index, $0, Int32(text.utf8.count), Self.transient) }
            }
            guard status == SQLITE_OK else { throw failure(sql) }
        }
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw failure(sql) }
            let count = sqlite3_column_count(statement)
            var values: [SQLValue] = []
            values.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_NULL: values.append(.null)
                case SQLITE_INTEGER: values.append(.int(sqlite3_column_int64(statement, column)))
                default:
                    let length = Int(sqlite3_column_bytes(statement, column))
                    let bytes = sqlite3_column_text(statement, column)
                    values.append(bytes.map { .text(String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)) } ?? .null)
                }
            }
            try body(SQLRow(values))
        }
    }

    /// Whether the connection is inside a transaction (SQLite rolls one back by itself on some errors).
    var inTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        guard let handle else { throw LedgerError(.storage, "the SQLite connection is closed") }
        // The ledger writes PostgreSQL's `$n` placeholders; SQLite spells numbered parameters `?n`.
        let native = Self.numberedParameters(sql)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(handle, native, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
            throw failure(sql)
        }
        statements[sql] = statement
        return statement
    }

    private func failure(_ sql: String) -> LedgerError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
        return LedgerError(.storage, "SQLite: \(message) (in \(sql.prefix(80)))")
    }

    /// `$n` → `?n`, byte by byte (a `$` after a letter, `_` or a non-ASCII byte is part of a name; after a digit it is a
    /// parameter: `9$3` is `9?3`, as the test says). Runs once per
    /// distinct statement and connection, which is every statement a new ledger prepares.
    static func numberedParameters(_ sql: String) -> String {
        var bytes = Array(sql.utf8)
        var previous: UInt8 = 0x20
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == UInt8(ascii: "$"), !Self.continuesName(previous) { bytes[index] = UInt8(ascii: "?") }
            previous = byte
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func continuesName(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"), 0x80...: true
        default: false
        }
    }

    /// SQLITE_TRANSIENT: SQLite copies the bound text before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}
