import Foundation
import Logging
import SQLiteKit

/// The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a commit survives a power cut.
/// Transactions run one at a time on one connection (SQLite has a single writer); `BEGIN IMMEDIATE` takes the write
/// lock up front so a transaction never fails half-way for another process's lock.
public final class SQLiteLedgerStore: LedgerStore {
    public let kind = "sqlite"
    public let path: String
    private let connection: SQLiteConnection
    private let gate = SerialGate()

    /// Opens (creating if needed) the database at `path`, or an in-memory one for `:memory:`.
    public init(path: String) async throws {
        self.path = path
        if path != ":memory:" {
            try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        var logger = Logger(label: "iapkit.ledger.sqlite")
        logger.logLevel = .warning
        do {
            connection = try await SQLiteConnection.open(storage: path == ":memory:" ? .memory : .file(path: path), logger: logger)
            let sql = connection.sql()
            try await sql.raw("PRAGMA journal_mode=WAL").run()
            try await sql.raw("PRAGMA synchronous=FULL").run()
            try await sql.raw("PRAGMA busy_timeout=10000").run()
        } catch {
            throw LedgerError(.storage, "cannot open SQLite database \(path): \(String(reflecting: error))")
        }
    }

    public func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        await gate.enter()
        let sql = connection.sql()
        do {
            try await sql.raw("BEGIN IMMEDIATE").run()
            let result = try await body(sql)
            try await sql.raw("COMMIT").run()
            await gate.leave()
            return result
        } catch {
            try? await sql.raw("ROLLBACK").run()
            await gate.leave()
            throw error
        }
    }

    public func close() async throws {
        try await connection.close()
    }

    deinit {
        // A store dropped without close() still closes its connection; the close keeps it alive until done.
        if !connection.isClosed { connection.close().whenComplete { _ in } }
    }
}
