import Foundation

/// A value bound to, or read from, a SQL statement. The ledger stores only these three kinds: dates are milliseconds
/// since 1970 and booleans 0/1, so one schema serves SQLite and PostgreSQL alike.
enum SQLValue: Sendable, Hashable {
    case null
    case int(Int64)
    case text(String)

    var int: Int64? { if case .int(let value) = self { value } else { nil } }
    var text: String? { if case .text(let value) = self { value } else { nil } }
}

/// One result row, columns in the order the statement names them.
struct SQLRow: Sendable {
    var values: [SQLValue]

    init(_ values: [SQLValue]) { self.values = values }

    func text(_ index: Int) throws -> String {
        guard index < values.count, case .text(let value) = values[index] else { throw SQLRow.typeError(index, "text") }
        return value
    }

    func optionalText(_ index: Int) -> String? { index < values.count ? values[index].text : nil }

    func int(_ index: Int) throws -> Int64 {
        guard index < values.count, case .int(let value) = values[index] else { throw SQLRow.typeError(index, "integer") }
        return value
    }

    func optionalInt(_ index: Int) -> Int64? { index < values.count ? values[index].int : nil }

    private static func typeError(_ index: Int, _ kind: String) -> LedgerError {
        LedgerError(.storage, "column \(index) of a stored row is not \(kind)")
    }
}

/// Runs statements on one connection, inside whatever transaction its store opened.
///
/// Statements are written once, in the SQL that SQLite and PostgreSQL share, with `$1`, `$2`… placeholders. A
/// statement is awaited: on SQLite it never suspends (the whole operation runs on the thread that owns the connection,
/// with no hop per statement); on PostgreSQL it waits for the server without holding a thread.
protocol SQLExecutor {
    /// Runs `sql` with `binds` and returns every row it produces.
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]

    /// Runs `sql` with `binds` and hands each row to `body` as it comes: a read of many rows keeps none it is done with.
    /// `body` reads the row and runs no statement.
    func forEachRow(_ sql: String, _ binds: [SQLValue], _ body: (SQLRow) throws -> Void) async throws

    /// The select list of a read of many rows of `columns`, whose rows come as those columns in that order: SQLite's
    /// are the columns; PostgreSQL packs them into one record, a cell per row where the columns were a cell each, and
    /// reads the record back as its fields (BENCHMARKS.md, business view run 10). Each column must be an integer, a
    /// boolean or text (`CAST` a literal): PostgreSQL's record reader refuses any other type by name rather than guess.
    func selectList(_ columns: [String]) -> String
}

extension SQLExecutor {
    /// A store whose driver hands over a statement's rows at once: each in turn.
    func forEachRow(_ sql: String, _ binds: [SQLValue], _ body: (SQLRow) throws -> Void) async throws {
        for row in try await rows(sql, binds) { try body(row) }
    }

    func selectList(_ columns: [String]) -> String { columns.joined(separator: ", ") }

    func execute(_ sql: String, _ binds: [SQLValue] = []) async throws {
        _ = try await rows(sql, binds)
    }

    func first(_ sql: String, _ binds: [SQLValue] = []) async throws -> SQLRow? {
        try await rows(sql, binds).first
    }
}

/// How bound values are written from the ledger's Swift types.
extension SQLValue {
    static func of(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
    static func of(_ value: Int64?) -> SQLValue { value.map { .int($0) } ?? .null }
    static func of(_ date: Date?) -> SQLValue { date.map { .int(Millis.of($0)) } ?? .null }
    static func of(_ flag: Bool) -> SQLValue { .int(flag ? 1 : 0) }
}

extension SQLValue {
    /// Refuses text holding a NUL before any statement runs, on both stores alike (``StorableText``): on PostgreSQL
    /// it was a storage failure that named its SQL, on SQLite an id like any other. Every caller's input passes here.
    static func refuseNUL(in binds: [SQLValue]) throws {
        for case .text(let text) in binds where StorableText.holdsNUL(text) { throw nulRefused }
    }

    static let nulRefused = LedgerError(.invalidInput, "text with a NUL character cannot be stored")
}
