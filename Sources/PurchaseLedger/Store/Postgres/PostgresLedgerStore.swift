import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// The store for many replicas: a PostgreSQL server, reached through PostgresNIO connections each owned by one
/// worker thread. A ledger operation runs synchronously on its worker as one PostgreSQL transaction; unique keys,
/// guarded updates and `ON CONFLICT` make racing replicas agree (a replica that loses a race re-runs the operation
/// from fresh facts), and PostgreSQL groups concurrent commits itself.
public final class PostgresLedgerStore: SQLLedgerStore, @unchecked Sendable {
    public let kind = LedgerStoreKind.postgres
    private let workers: PostgresWorkers
    private let autocommit: PostgresAutocommit
    var fastPath: (any LedgerFastPath)? { autocommit }

    /// Connects to `postgres://user:password@host:port/database` (TLS when the server offers it; `?sslmode=disable`
    /// turns it off, `?sslmode=require` insists).
    public init(url: String, connections: Int = 16) async throws {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw LedgerError(.invalidInput, "not a PostgreSQL URL: postgres://user@host:port/database expected")
        }
        let sslmode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "prefer"
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch sslmode {
            case "disable": tls = .disable
            case "require", "verify-full": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        } catch {
            throw LedgerError(.storage, "cannot set up TLS for PostgreSQL: \(error)")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let configuration = PostgresConnection.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: database.isEmpty ? nil : database, tls: tls)
        workers = PostgresWorkers(configuration: configuration, count: max(1, connections / 4))
        let clientTLS: PostgresClient.Configuration.TLS = switch sslmode {
        case "disable": .disable
        case "require", "verify-full": .require(.makeClientConfiguration())
        default: .prefer(.makeClientConfiguration())
        }
        var clientConfiguration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: database.isEmpty ? nil : database, tls: clientTLS)
        clientConfiguration.options.maximumConnections = max(1, connections)
        autocommit = PostgresAutocommit(configuration: clientConfiguration)
        // Fail now, not at the first purchase, when the server cannot be reached.
        _ = try await read { sql in try sql.rows("SELECT 1", []) }
    }

    deinit {
        workers.stop()
        autocommit.stop()
    }

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            workers.enqueue(PostgresJob(transactional: true, body: body, answer: PendingAnswer(continuation)))
        }
    }

    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            workers.enqueue(PostgresJob(transactional: false, body: body, answer: PendingAnswer(continuation)))
        }
    }

    public func close() async throws {
        workers.stop()
        await workers.finished()
        autocommit.stop()
    }
}

/// Statements in autocommit through a PostgresNIO client pool, awaited from the caller's task: no worker thread, no
/// transaction held across round trips.
final class PostgresAutocommit: LedgerFastPath, @unchecked Sendable {
    private let client: PostgresClient
    private let runner: Task<Void, Never>

    init(configuration: PostgresClient.Configuration) {
        var logger = Logger(label: "iapkit.ledger.postgres.autocommit")
        logger.logLevel = .warning
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    func stop() { runner.cancel() }

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
        do {
            var rows: [SQLRow] = []
            for try await row in try await client.execute(statement) { rows.append(row) }
            return rows
        } catch {
            throw PostgresExecutor.ledgerError(error)
        }
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

/// A queued operation for a worker.
protocol PostgresWork: AnyObject {
    func run(_ connection: PostgresExecutor)
    func fail(_ error: any Error)
}

final class PostgresJob<R: Sendable>: PostgresWork {
    let transactional: Bool
    let body: @Sendable (any SQLExecutor) throws -> R
    let answer: PendingAnswer<R>

    init(transactional: Bool, body: @escaping @Sendable (any SQLExecutor) throws -> R, answer: PendingAnswer<R>) {
        self.transactional = transactional
        self.body = body
        self.answer = answer
    }

    func run(_ executor: PostgresExecutor) {
        guard transactional else {
            answer.hold(Result { try body(executor) })
            answer.deliver(commitError: nil)
            return
        }
        do {
            _ = try executor.rows("BEGIN", [])
        } catch {
            fail(error)
            return
        }
        do {
            let value = try body(executor)
            _ = try executor.rows("COMMIT", [])
            answer.hold(.success(value))
            answer.deliver(commitError: nil)
        } catch {
            _ = try? executor.rows("ROLLBACK", [])
            answer.hold(.failure(error))
            answer.deliver(commitError: nil)
        }
    }

    func fail(_ error: any Error) {
        answer.hold(.failure(error))
        answer.deliver(commitError: nil)
    }
}

/// Worker threads, each with its own connection, taking operations from one queue.
final class PostgresWorkers: @unchecked Sendable {
    private let configuration: PostgresConnection.Configuration
    private let queue: JobQueue<any PostgresWork>
    private let logger: Logger

    init(configuration: PostgresConnection.Configuration, count: Int) {
        self.configuration = configuration
        queue = JobQueue(threads: count)
        var logger = Logger(label: "iapkit.ledger.postgres")
        logger.logLevel = .warning
        self.logger = logger
        for index in 0..<count {
            let thread = Thread { [self] in work(id: index) }
            thread.name = "iapkit.ledger.postgres.\(index)"
            thread.start()
        }
    }

    func enqueue(_ job: any PostgresWork) {
        if !queue.enqueue(job) { job.fail(LedgerError(.storage, "the PostgreSQL store is closed")) }
    }

    func stop() { queue.stop() }

    func finished() async { await queue.finished() }

    private func work(id: Int) {
        var connection: PostgresConnection?
        var prepared = PreparedStatements()
        while let job = queue.take(upTo: 1).first {
            do {
                if connection == nil || connection?.isClosed == true {
                    connection = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration,
                                                                id: id, logger: logger).wait()
                    prepared = PreparedStatements()
                }
                job.run(PostgresExecutor(connection: connection!, logger: logger, prepared: prepared))
            } catch {
                connection = nil
                job.fail(LedgerError(.storage, "cannot reach PostgreSQL: \(String(reflecting: error))"))
            }
        }
        try? connection?.close().wait()
        queue.threadEnded()
    }
}

/// The statements a worker's connection keeps prepared: the two every decision in a held transaction reads. Planning
/// the facts' joins cost PostgreSQL more than running them (460 µs against 50 µs a notification, BENCHMARKS.md). Their
/// parameters are all text compared with text columns, so the types PostgreSQL infers are the ones declared elsewhere.
final class PreparedStatements {
    static let kept = [LedgerSession.factsQuery, EffectStatements.preconditionsQuery]
    private var statements: [Int: PreparedQuery] = [:]

    func statement(for sql: String, binds: [SQLValue], on connection: PostgresConnection) throws -> PreparedQuery? {
        guard let index = Self.kept.firstIndex(of: sql), !binds.contains(where: { if case .int = $0 { true } else { false } }) else { return nil }
        if let statement = statements[index] { return statement }
        do {
            let statement = try connection.prepare(query: sql).wait()
            statements[index] = statement
            return statement
        } catch {
            throw PostgresExecutor.ledgerError(error)
        }
    }

    /// A kept statement the server no longer runs as prepared: its result type changed under it (another replica's
    /// migration: 0A000 "cached plan must not change result type") or it is gone while the connection stays
    /// (`DEALLOCATE ALL`, a pooler: 26000). It is prepared again by the operation's next attempt instead of failing
    /// every operation of this worker until a restart. Any other 0A000 (feature not supported) is a real error, kept
    /// with its message rather than retried into an anonymous race.
    static func isStale(_ error: any Error) -> Bool {
        switch PostgresExecutor.sqlState(error) {
        case "26000": true
        // The routine is not translated (a server with another lc_messages words the message in its language).
        case "0A000": PostgresExecutor.serverField(error, .routine, .routine) == "RevalidateCachedQuery"
            || PostgresExecutor.serverField(error, .message, .message)?.contains("cached plan must not change result type") == true
        default: false
        }
    }

    func forget(_ sql: String) {
        guard let index = Self.kept.firstIndex(of: sql), let statement = statements.removeValue(forKey: index) else { return }
        _ = statement.deallocate()
    }
}

/// Statements on one connection, each waited for on the worker's own thread.
struct PostgresExecutor: SQLExecutor {
    let connection: PostgresConnection
    let logger: Logger
    var prepared: PreparedStatements?

    func rows(_ sql: String, _ binds: [SQLValue]) throws -> [SQLRow] {
        try SQLValue.refuseNUL(in: binds)
        if let statement = try prepared?.statement(for: sql, binds: binds, on: connection) {
            do {
                return try statement.execute(binds.map(Self.data)).wait().map(Self.convertBinary)
            } catch where PreparedStatements.isStale(error) {
                logger.warning("a kept statement is prepared again", metadata: ["sqlState": "\(Self.sqlState(error) ?? "")",
                                                                             "message": "\(Self.serverField(error, .message, .message) ?? "")"])
                prepared?.forget(sql)
                throw LedgerRace()
            } catch {
                throw Self.ledgerError(error)
            }
        }
        let result: PostgresQueryResult
        do {
            result = try connection.query(PostgresQuery(unsafeSQL: sql, binds: Self.bindings(binds)), logger: logger).wait()
        } catch {
            throw Self.ledgerError(error)
        }
        return try result.rows.map(Self.convert)
    }

    /// Each row handed to `body` as PostgresNIO reads it off the socket, on its event loop while this thread waits:
    /// the server's execution, the rows' transfer and their decoding overlap (the business view's instant at a million
    /// purchases: ~28,000 rows). A kept statement goes through ``rows(_:_:)``.
    func forEachRow(_ sql: String, _ binds: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        try SQLValue.refuseNUL(in: binds)
        guard !PreparedStatements.kept.contains(sql) else {
            for row in try rows(sql, binds) { try body(row) }
            return
        }
        try withoutActuallyEscaping(body) { body in
            // The caller's thread blocks in `wait()` until the last row: `body` never runs beside it, and the future's
            // completion orders its effects before the caller reads them.
            let handOver = RowHandOver(body)
            // PostgresNIO may keep its row closure after a stopped read: `body` must not outlive this call.
            defer { handOver.release() }
            do {
                _ = try connection.query(PostgresQuery(unsafeSQL: sql, binds: Self.bindings(binds)), logger: logger) { row in
                    try handOver.hand(try Self.convert(row))
                }.wait()
            } catch {
                // What stopped the read, not the query's cancellation that followed (PostgresNIO reports either).
                throw handOver.failure ?? Self.ledgerError(error)
            }
        }
    }

    /// A row of a statement prepared through `PostgresDatabase.prepare(query:)`. PostgresNIO asks PostgreSQL for every
    /// row in binary, but applies to these the row description of the preparation, which says text: decoding as the
    /// cells claim reads an 8-byte integer as digits. The bytes are read as the binary they are.
    static func convertBinary(_ row: PostgresRow) throws -> SQLRow {
        // A packed row is a record here too: its bytes are binary whatever the description says.
        if let packed = try packedRow(row, binary: true) { return packed }
        var values: [SQLValue] = []
        values.reserveCapacity(row.count)
        for cell in row { values.append(try binaryValue(cell)) }
        return SQLRow(values)
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

    private static func data(_ value: SQLValue) -> PostgresData {
        switch value {
        case .null: PostgresData(type: .text, value: nil)
        case .int(let number): PostgresData(int64: number)
        case .text(let text): PostgresData(string: text)
        }
    }

    /// The SQLSTATE of a server error, as PostgresNIO reports it: `PSQLError` from its current API, `PostgresError`
    /// from the one prepared statements of worker connections go through.
    static func sqlState(_ error: any Error) -> String? { serverField(error, .sqlState, .sqlState) }

    /// A field of the server's error, from either of PostgresNIO's error types.
    static func serverField(_ error: any Error, _ field: PSQLError.ServerInfo.Field, _ legacy: PostgresMessage.Error.Field) -> String? {
        if let error = error as? PSQLError { return error.serverInfo?[field] }
        if case .server(let message) = error as? PostgresError { return message.fields[legacy] }
        return nil
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

/// A row handler handed to PostgresNIO's event loop while its owner's thread waits for the query to end; what it
/// threw; released when the owner goes on.
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
