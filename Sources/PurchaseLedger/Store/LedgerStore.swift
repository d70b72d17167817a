import Foundation
import SQLKit

/// Where the ledger keeps its records: one SQL database, reached through SQLKit so the ledger's queries are written
/// once for every store.
///
/// Exactly-once does not rest on this process: unique keys and conditional updates inside ``transaction(_:)`` make it
/// hold in the database itself, so several servers sharing one PostgreSQL stay correct.
public protocol LedgerStore: Sendable {
    /// `sqlite` or `postgres`.
    var kind: String { get }

    /// Runs `body` as one database transaction: every write in it commits together, or none does when it throws.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R

    /// Releases connections. The store is unusable afterwards.
    func close() async throws
}

extension Ledger {
    /// Opens the store a database URL names: `postgres://user:password@host:port/database` or `sqlite:///path/to/file`
    /// (a bare path is a SQLite file too).
    public static func openStore(url: String) async throws -> any LedgerStore {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return try PostgresLedgerStore(url: url)
        }
        let path = url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
        return try await SQLiteLedgerStore(path: path)
    }
}

/// Lets one task at a time through, first come first served (SQLite has one writer; its connection one transaction).
actor SerialGate {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func enter() async {
        guard busy else { busy = true; return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func leave() {
        if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
    }
}
