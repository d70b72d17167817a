import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// The store for many replicas: a PostgreSQL server, reached through one PostgresNIO client (its pool of connections).
/// A ledger operation runs in its caller's task on a leased connection as one PostgreSQL transaction, each statement
/// awaited without holding a thread; unique keys, guarded updates and `ON CONFLICT` make racing replicas agree (a
/// replica that loses a race re-runs the operation from fresh facts), and PostgreSQL groups concurrent commits itself.
public final class PostgresLedgerStore: SQLLedgerStore, Sendable {
    public var operations: LedgerStoreOperations { LedgerStoreOperations(self) }
    public let kind = LedgerStoreKind.postgres
    private let pool: PostgresPool
    private let autocommit: PostgresAutocommit
    var fastPath: (any LedgerFastPath)? { autocommit }

    /// Connects to `postgres://user:password@host:port/database` (TLS when the server offers it; `?sslmode=disable`
    /// turns it off, `?sslmode=require` insists; `?keepalive=SECONDS`, below 60, sends `SELECT 1` on a connection idle that
    /// long). `connections` is the most the pool opens, unless the URL's `?connections=N` says otherwise.
    public init(url: String, connections: Int = 8) async throws {
        pool = PostgresPool(configuration: try Self.configuration(url: url, connections: connections))
        autocommit = PostgresAutocommit(pool: pool)
        // Fail now, not at the first purchase, when the server cannot be reached.
        do {
            _ = try await read { sql in try await sql.rows("SELECT 1", []) }
        } catch {
            await pool.close(waiting: .zero)
            throw error
        }
    }

    /// The client's configuration for `url`.
    ///
    /// No keep-alive query unless the URL asks for one: PostgresNIO starts a keep-alive timer (three tasks) each time a
    /// connection goes idle and cancels it when the connection is lent again, which under load is every purchase
    /// (BENCHMARKS.md, 2026-11-29 21:05–22:10 UTC: 1.03–1.07× with the option alone, a lower p99). The pool closes a
    /// connection idle for 60 s (PostgresNIO's idle timeout, kept), so no connection sits idle longer than that; a
    /// connection the server closes is replaced at once. What the keep-alive adds is traffic on a connection idle 30 to
    /// 60 s — for a NAT or firewall that forgets idle flows within a minute — and a connection found dead by its query
    /// rather than by a purchase's statement: `?keepalive=SECONDS`, below 60 (docs/PRODUCTION.md).
    ///
    /// At most 8 connections unless said: on two cores 8 served 1.02–1.28× the purchases of 16, with a lower p99 (each
    /// busy connection is a PostgreSQL process competing for the cores; BENCHMARKS.md, 2026-11-30). The pool opens them
    /// on demand: PostgresNIO's `minimumConnections` above 0 (a fixed pool, measured no faster than 8 on demand) can
    /// reach a precondition failure in its pool's state machine when connections fail to reopen under load — a crash of
    /// every replica at a database failover.
    static func configuration(url: String, connections: Int) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw LedgerError(.invalidInput, "not a PostgreSQL URL: postgres://user@host:port/database expected")
        }
        let query = components.queryItems ?? []
        for (name, items) in Dictionary(grouping: query, by: \.name) where items.count > 1 {
            // Which one would count is a guess the operator should not have to make.
            throw LedgerError(.invalidInput, "the PostgreSQL URL names \(name) more than once")
        }
        let sslmode = query.first { $0.name == "sslmode" }?.value ?? "prefer"
        let tls: PostgresClient.Configuration.TLS = switch sslmode {
        case "disable": .disable
        case "require", "verify-full": .require(.makeClientConfiguration())
        default: .prefer(.makeClientConfiguration())
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = max(1, connections)
        if let limit = query.first(where: { $0.name == "connections" }) {
            // Every replica's pool must fit in PostgreSQL's max_connections: the operator sizes it here.
            guard let count = limit.value.flatMap({ Int($0) }), (1...1000).contains(count) else {
                throw LedgerError(.invalidInput, "the PostgreSQL URL's connections is a number from 1 to 1000")
            }
            configuration.options.maximumConnections = count
        }
        configuration.options.keepAliveBehavior = nil
        if let keepalive = query.first(where: { $0.name == "keepalive" }) {
            // At 60 s or more it would never run: the pool closes a connection idle for 60 s.
            guard let seconds = keepalive.value.flatMap({ Int($0) }), (1...59).contains(seconds) else {
                throw LedgerError(.invalidInput, "the PostgreSQL URL's keepalive is a number of seconds from 1 to 59 (the pool closes a connection idle for 60)")
            }
            configuration.options.keepAliveBehavior = .init(frequency: .seconds(seconds))
        }
        return configuration
    }

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        try await pool.leased { executor in
            try await executor.execute("BEGIN")
            let value: R
            do {
                value = try await body(executor)
                try await executor.execute("COMMIT")
            } catch {
                try await executor.rollBack(after: error)
            }
            return value
        }
    }

    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        try await pool.leased { try await body($0) }
    }

    /// Refuses new operations, waits (up to 10 s) for those running to end, then closes the pool's connections.
    public func close() async throws {
        await pool.close(waiting: .seconds(10))
    }
}

/// The store's one PostgresNIO client, lent an operation at a time, and what is running on it (so that closing waits
/// for it).
final class PostgresPool: @unchecked Sendable {
    let client: PostgresClient
    let logger: Logger
    private let maximumConnections: Int
    private let runner: Task<Void, Never>
    private let lock = NSLock()
    private var running = 0
    private var closing = false

    init(configuration: PostgresClient.Configuration) {
        var logger = Logger(label: "iapkit.ledger.postgres")
        logger.logLevel = .warning
        self.logger = logger
        maximumConnections = configuration.options.maximumConnections
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        // Started at once, in this call (the pool knows it runs before the first lease; PostgresNIO warns otherwise),
        // and detached: a store opened inside a service must not take that service's graceful shutdown as its own.
        runner = Task.immediateDetached { await client.run() }
    }

    deinit {
        runner.cancel()
    }

    /// `body` on a connection of the pool. A connection left unusable (a transaction that could not end, a kept
    /// statement that failed) is closed, so the pool opens another instead of lending it again; when nothing ran
    /// (a kept statement the server forgot), `body` runs again on another connection — as many times as the pool has
    /// connections, all of which may have lost it alike (`DEALLOCATE ALL` through a pooler).
    func leased<R>(_ body: (PostgresExecutor) async throws -> R) async throws -> R {
        try lock.withLock {
            if closing { throw LedgerError(.storage, "the PostgreSQL store is closed") }
            running += 1
        }
        defer { lock.withLock { running -= 1 } }
        var again = 0
        while true {
            let outcome: Result<R, any Error>
            do {
                // What the body threw is answered as it is (its statements' errors are the ledger's already); what the
                // pool threw (no connection to be had) is a storage error.
                outcome = try await client.withConnection { connection in
                    do {
                        return .success(try await body(PostgresExecutor(connection: connection, logger: logger)))
                    } catch let unusable as PostgresUnusableConnection {
                        try? await connection.close()
                        return .failure(unusable)
                    } catch {
                        return .failure(error)
                    }
                }
            } catch {
                throw PostgresExecutor.ledgerError(error)
            }
            switch outcome {
            case .success(let value):
                return value
            case .failure(let unusable as PostgresUnusableConnection):
                guard unusable.nothingRan else { throw unusable.reason }
                // Lost on every connection tried: not one replica's migration or one pooler's reset, but a server (or
                // a pooler in front of it) that does not keep prepared statements. A storage error, not a race that
                // the ledger's retries would multiply.
                guard again < maximumConnections else {
                    throw LedgerError(.storage, "PostgreSQL keeps losing prepared statements (a pooler that does not keep them?)")
                }
                again += 1
            case .failure(let error):
                throw error
            }
        }
    }

    /// Refuses new leases, waits up to `waiting` for those running to end, then closes every connection.
    func close(waiting: Duration) async {
        lock.withLock { closing = true }
        let deadline = ContinuousClock.now + waiting
        // In a task of its own: a caller already cancelled (a service group that is cancelled, not shut down) would
        // have every sleep return at once, and spin.
        await Task.detached { [self] in
            while lock.withLock({ running }) > 0, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }.value
        runner.cancel()
        await runner.value
    }
}

/// Thrown inside a lease when its connection must not be lent again; the caller is answered `reason`, unless
/// `nothingRan` and the lease runs the operation again on another connection.
struct PostgresUnusableConnection: Error {
    let reason: any Error
    var nothingRan = false
}

/// Statements in autocommit on the store's client, awaited from the caller's task: no transaction held across round
/// trips.
struct PostgresAutocommit: LedgerFastPath {
    let pool: PostgresPool

    func facts(_ binds: [SQLValue]) async throws -> SQLRow? {
        try await run(Prepared<FactsTag>(binds: binds)).first
    }

    func entries(transactionId: String) async throws -> [SQLRow] {
        try await run(Prepared<EntriesTag>(binds: [.text(transactionId)]))
    }

    func owned(accountId: String) async throws -> [SQLRow] {
        try await run(Prepared<OwnedTag>(binds: [.text(accountId)]))
    }

    func apply(_ effects: [LedgerEffect], owner: String?, events: Bool) async throws -> [SQLRow] {
        let rows = try await run(Prepared<ApplyTag>(binds: [.text(try PostgresFunctions.json(effects, events: events)), .of(owner)]))
        switch rows.first?.values.first {
        case .text("r"): throw LedgerRace()
        case .text("h"): throw LedgerHandBack()
        default: return rows
        }
    }

    func ping() async throws {
        _ = try await run(Prepared<PingTag>(binds: []))
    }

    /// Runs a statement prepared once per connection (no parse or analysis per purchase).
    private func run<Tag: StatementTag>(_ statement: Prepared<Tag>) async throws -> [SQLRow] {
        try await pool.leased { try await $0.run(statement) }
    }
}

/// Which statement a ``Prepared`` is: its name on a connection, its SQL and the types of its binds.
protocol StatementTag: Sendable {
    static var name: String { get }
    static var sql: String { get }
    static var types: [PostgresDataType] { get }
}

extension StatementTag {
    /// `iapkit_<label>_` and a hash of the SQL: a statement whose SQL changed between versions is another statement,
    /// so no connection (behind a pooler that shares them between clients, say) runs a replica's statement under the
    /// name of another's.
    static func named(_ label: String) -> String { "iapkit_\(label)_" + PostgresFunctions.fnv1a(sql) }
}

enum FactsTag: StatementTag {
    static let name = named("facts")
    static let sql = LedgerSession.factsQuery
    static let types: [PostgresDataType] = [.text, .text, .text, .text, .text]
}

enum EntriesTag: StatementTag {
    static let name = named("entries")
    static let sql = LedgerSession.entriesQuery
    static let types: [PostgresDataType] = [.text]
}

enum OwnedTag: StatementTag {
    static let name = named("owned")
    static let sql = LedgerSession.ownedQuery
    static let types: [PostgresDataType] = [.text]
}

enum PingTag: StatementTag {
    static let name = named("ping")
    static let sql = Ledger.healthQuery
    static let types: [PostgresDataType] = []
}

enum ApplyTag: StatementTag {
    static let name = named("apply")
    static let sql = "SELECT * FROM \(PostgresFunctions.applyFunction)($1::jsonb, $2)"
    static let types: [PostgresDataType] = [.text, .text]
}

/// The preconditions every decision in a held transaction checks (``EffectStatements/preconditionsQuery``). Its
/// binds are all text compared with text columns, so the types declared are the ones PostgreSQL would infer.
enum PreconditionsTag: StatementTag {
    static let name = named("preconditions")
    static let sql = EffectStatements.preconditionsQuery
    static let types: [PostgresDataType] = Array(repeating: .text, count: EffectStatements.preconditionsBindCount)
}

struct Prepared<Tag: StatementTag>: PostgresPreparedStatement {
    typealias Row = SQLRow
    static var name: String { Tag.name }
    static var sql: String { Tag.sql }
    static var bindingDataTypes: [PostgresDataType] { Tag.types }
    let binds: [SQLValue]

    func makeBindings() throws -> PostgresBindings {
        try SQLValue.refuseNUL(in: binds)
        return PostgresExecutor.bindings(binds)
    }
    func decodeRow(_ row: PostgresRow) throws -> SQLRow { try PostgresExecutor.convert(row) }
}

/// Statements on one leased connection.
struct PostgresExecutor: SQLExecutor {
    let connection: PostgresConnection
    let logger: Logger

    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try SQLValue.refuseNUL(in: binds)
        // The two statements every decision in a held transaction reads stay prepared on each connection: planning the
        // facts' joins cost PostgreSQL more than running them (460 µs against 50 µs a notification, BENCHMARKS.md).
        // Their binds are text; a statement given an integer is run as written.
        if !binds.contains(where: { if case .int = $0 { true } else { false } }) {
            if sql == FactsTag.sql { return try await run(Prepared<FactsTag>(binds: binds)) }
            if sql == PreconditionsTag.sql { return try await run(Prepared<PreconditionsTag>(binds: binds)) }
        }
        var rows: [SQLRow] = []
        do {
            for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql, binds: Self.bindings(binds)), logger: logger) {
                rows.append(try Self.convert(row))
            }
        } catch {
            throw Self.ledgerError(error)
        }
        return rows
    }

    /// Each row handed to `body` as PostgresNIO reads it off the socket, on its event loop while the caller waits:
    /// the server's execution, the rows' transfer and their decoding overlap, with no await per row (the business
    /// view's instant at a million purchases: ~28,000 rows; iterating them as an async sequence made it ~10 % slower).
    func forEachRow(_ sql: String, _ binds: [SQLValue], _ body: (SQLRow) throws -> Void) async throws {
        try SQLValue.refuseNUL(in: binds)
        try await withoutActuallyEscaping(body) { body in
            // The caller is suspended until the last row: `body` never runs beside it, and the future's completion
            // orders its effects before the caller reads them.
            let handOver = RowHandOver(body)
            // PostgresNIO may keep its row closure after a stopped read: `body` must not outlive this call.
            defer { handOver.release() }
            do {
                _ = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: Self.bindings(binds)), logger: logger) { row in
                    try handOver.hand(try Self.convert(row))
                }.get()
            } catch {
                // What stopped the read, not the query's cancellation that followed (PostgresNIO reports either).
                throw handOver.failure ?? Self.ledgerError(error)
            }
        }
    }

    /// A statement prepared once per connection by PostgresNIO, which remembers on the connection how its preparation
    /// went: one the server no longer runs as prepared is still taken for prepared, and a preparation that failed (a
    /// lock or statement timeout behind another replica's migration, a deadlock) is answered with that failure for
    /// good. So a refusal by the server closes the connection (``PostgresPool/leased(_:)``); a forgotten statement ran
    /// nothing, and the operation runs again on another connection.
    func run<Tag: StatementTag>(_ statement: Prepared<Tag>) async throws -> [SQLRow] {
        do {
            var rows: [SQLRow] = []
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
            return rows
        } catch where Self.isStale(error) {
            logger.warning("a kept statement is stale: its connection is closed", metadata: [
                "sqlState": "\(Self.sqlState(error) ?? "")", "message": "\(Self.serverField(error, .message) ?? "")"])
            throw PostgresUnusableConnection(reason: LedgerRace(), nothingRan: true)
        } catch let error as PSQLError where error.serverInfo != nil {
            // The server's refusal (a failed preparation among them): these statements fail only by accident, and a
            // new connection costs less than a doubt about this one.
            throw PostgresUnusableConnection(reason: Self.ledgerError(error))
        } catch {
            // Refused before it was sent (text with a NUL), or the connection itself failed: nothing to close for.
            throw Self.ledgerError(error)
        }
    }

    /// Ends a transaction that failed with `failure`, which is thrown on; a connection whose transaction cannot end is
    /// not lent again.
    func rollBack(after failure: any Error) async throws -> Never {
        do {
            try await execute("ROLLBACK")
        } catch {
            // Closing the connection ends its transaction: nothing of it is committed.
            throw failure as? PostgresUnusableConnection ?? PostgresUnusableConnection(reason: failure)
        }
        throw failure
    }

    /// A kept statement the server no longer runs as prepared: its result type changed under it (another replica's
    /// migration: 0A000 "cached plan must not change result type") or it is gone while the connection stays
    /// (`DEALLOCATE ALL`, a pooler: 26000). Any other 0A000 (feature not supported) is a real error, kept with its
    /// message rather than retried into an anonymous race.
    static func isStale(_ error: any Error) -> Bool {
        switch sqlState(error) {
        case "26000": true
        // The routine is not translated (a server with another lc_messages words the message in its language).
        case "0A000": serverField(error, .routine) == "RevalidateCachedQuery"
            || serverField(error, .message)?.contains("cached plan must not change result type") == true
        default: false
        }
    }

    /// A cell's binary bytes as the value they are: read in place, not through PostgresNIO's generic decoding (which
    /// was a large share of a read of many rows, the business view's instant among them).
    private static func binaryValue(_ cell: PostgresCell) throws -> SQLValue {
        guard var bytes = cell.bytes else { return .null }
        let value: SQLValue? = switch cell.dataType {
        case .int8: bytes.readableBytes == 8 ? bytes.readInteger(as: Int64.self).map { .int($0) } : nil
        case .int4: bytes.readableBytes == 4 ? bytes.readInteger(as: Int32.self).map { .int(Int64($0)) } : nil
        case .int2: bytes.readableBytes == 2 ? bytes.readInteger(as: Int16.self).map { .int(Int64($0)) } : nil
        case .bool: bytes.readableBytes == 1 ? bytes.readInteger(as: UInt8.self).map { .int($0 == 0 ? 0 : 1) } : nil
        default: .text(String(buffer: bytes))
        }
        guard let value else { throw LedgerError(.storage, "PostgreSQL: column \(cell.columnName) is not binary \(cell.dataType)") }
        return value
    }

    /// The SQLSTATE of a server error.
    static func sqlState(_ error: any Error) -> String? { serverField(error, .sqlState) }

    /// A field of the server's error.
    static func serverField(_ error: any Error, _ field: PSQLError.ServerInfo.Field) -> String? {
        (error as? PSQLError)?.serverInfo?[field]
    }

    static func ledgerError(_ error: any Error) -> any Error {
        if PostgresFunctions.retriedStates.contains(sqlState(error) ?? "") { return LedgerRace() }
        if let error = error as? LedgerError { return error }
        return LedgerError(.storage, "PostgreSQL: \(String(reflecting: error))")
    }

    static func bindings(_ binds: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .null: bindings.appendNull()
            case .int(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            }
        }
        return bindings
    }

    /// One record a row: PostgreSQL hands each column over as a cell of its own (its length, and in PostgresNIO a
    /// cell value with its column's name and a slice of the row), which was most of the server's time in a read of
    /// 28,000 rows; a record's fields are read straight from its bytes (``recordFields(_:column:)``).
    func selectList(_ columns: [String]) -> String { "ROW(" + columns.joined(separator: ", ") + ")" }

    /// A row that is one record (``selectList(_:)``) as the row of its fields; nil for any other row. `binary`: the
    /// cell's bytes are binary whatever its format says (a kept statement's rows, ``convertBinary(_:)``).
    static func packedRow(_ row: PostgresRow, binary: Bool) throws -> SQLRow? {
        guard row.count == 1, let cell = row.first, cell.dataType == .record, binary || cell.format == .binary, let bytes = cell.bytes else {
            return nil
        }
        return SQLRow(try recordFields(bytes, column: cell.columnName))
    }

    /// The fields of a binary record cell (PostgreSQL's `record_send`: the number of fields, then each field's type,
    /// its length or -1 for NULL, and its bytes), as the values a row of those columns would give; bytes that are not such
    /// a record are a storage error, never a trap.
    static func recordFields(_ record: ByteBuffer, column: String) throws -> [SQLValue] {
        func malformed(_ what: String) -> LedgerError { LedgerError(.storage, "PostgreSQL: a record of column \(column) \(what)") }
        var bytes = record
        guard let count = bytes.readInteger(as: Int32.self), count >= 0, Int(count) <= bytes.readableBytes / 8 else {
            throw malformed("has no field count")
        }
        var values: [SQLValue] = []
        values.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let oid = bytes.readInteger(as: UInt32.self), let length = bytes.readInteger(as: Int32.self) else { throw malformed("ends early") }
            if length == -1 { values.append(.null); continue }
            guard length >= 0 else { throw malformed("has a field of length \(length)") }
            guard Int(length) <= bytes.readableBytes else { throw malformed("ends inside a field") }
            let type = PostgresDataType(oid)
            let value: SQLValue? = switch type {
            case .int8: length == 8 ? bytes.readInteger(as: Int64.self).map { .int($0) } : nil
            case .int4: length == 4 ? bytes.readInteger(as: Int32.self).map { .int(Int64($0)) } : nil
            case .int2: length == 2 ? bytes.readInteger(as: Int16.self).map { .int(Int64($0)) } : nil
            case .bool: length == 1 ? bytes.readInteger(as: UInt8.self).map { .int($0 == 0 ? 0 : 1) } : nil
            case .text, .varchar, .name, .bpchar: bytes.readString(length: Int(length)).map { .text($0) }
            default: throw malformed("holds a field of type \(type) this store does not read")
            }
            guard let value else { throw malformed("holds a \(type) field of \(length) bytes") }
            values.append(value)
        }
        guard bytes.readableBytes == 0 else { throw malformed("has bytes after its fields") }
        return values
    }

    /// Whether a binary cell of this type is read in place (``binaryValue(_:)``). A switch, not a set: a set hashed
    /// every cell of every row read.
    private static func readsInPlace(_ type: PostgresDataType) -> Bool {
        switch type {
        case .int8, .int4, .int2, .bool, .text, .varchar, .name, .bpchar: true
        default: false
        }
    }

    /// A row's cells as values, walked once by the row's own iterator (the collection's `map` read each cell's length
    /// twice, by index and by subscript).
    static func convert(_ row: PostgresRow) throws -> SQLRow {
        if let packed = try packedRow(row, binary: false) { return packed }
        var values: [SQLValue] = []
        values.reserveCapacity(row.count)
        for cell in row {
            guard cell.bytes != nil else { values.append(.null); continue }
            // PostgresNIO asks for binary rows: integers and text are read in place, anything else decoded as it says.
            if cell.format == .binary, readsInPlace(cell.dataType) { values.append(try binaryValue(cell)); continue }
            switch cell.dataType {
            case .int8, .int4, .int2: values.append(.int(try cell.decode(Int64.self)))
            case .bool: values.append(.int(try cell.decode(Bool.self) ? 1 : 0))
            default: values.append(.text(try cell.decode(String.self)))
            }
        }
        return SQLRow(values)
    }
}

/// A row handler handed to PostgresNIO's event loop while its owner waits for the query to end; what it threw;
/// released when the owner goes on.
private final class RowHandOver: @unchecked Sendable {
    private let lock = NSLock()
    private var body: ((SQLRow) throws -> Void)?
    private var thrown: (any Error)?

    init(_ body: @escaping (SQLRow) throws -> Void) { self.body = body }

    func hand(_ row: SQLRow) throws {
        try lock.withLock {
            guard let body else { throw LedgerError(.storage, "PostgreSQL: a row came after its read had ended") }
            do {
                try body(row)
            } catch {
                thrown = error
                throw error
            }
        }
    }

    var failure: (any Error)? { lock.withLock { thrown } }

    func release() { lock.withLock { body = nil } }
}
