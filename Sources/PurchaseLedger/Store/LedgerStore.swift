import Foundation

/// Where the ledger keeps its records: ``SQLiteLedgerStore`` (embedded, the default) or ``PostgresLedgerStore`` (for
/// many replicas). The ledger is their only user: SQL, its values and its rows never leave `PurchaseLedger`, and this
/// protocol says only what a store is and how it is closed.
public protocol LedgerStore: Sendable {
    var kind: LedgerStoreKind { get }

    /// Releases connections and threads. The store is unusable afterwards: its operations fail as `storage` errors.
    func close() async throws

    /// What the ledger runs its operations through. Only IAPKit's stores make one: a type of another module conforms
    /// only by handing over one of theirs (a wrapper that logs or counts, say), so a ``Ledger`` never meets a store whose
    /// SQL is not its own — checked when compiling, not when the ledger starts.
    var operations: LedgerStoreOperations { get }
}

/// A store's operations, as the ledger runs them (``LedgerStore/operations``); made only inside `PurchaseLedger`.
public struct LedgerStoreOperations: Sendable {
    let store: any SQLLedgerStore

    init(_ store: any SQLLedgerStore) { self.store = store }
}

/// What the ledger runs its operations through.
///
/// A store runs a whole ledger operation on one connection: `write` as one database transaction (all its writes commit
/// together, or none), `read` against a consistent view that never waits for the write lock. Exactly-once does not rest
/// on this process: unique keys and guarded updates make it hold in the database itself, so several servers sharing one
/// PostgreSQL stay correct.
protocol SQLLedgerStore: LedgerStore {
    /// Runs `body` as one write transaction; answers only once it is durable.
    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R

    /// Runs `body` as a read; it may not write.
    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R

    /// Runs `body` as a read of many rows (the business view): a store may keep a connection for it whose cache
    /// holds such a read's pages. Otherwise as ``read(_:)``.
    func readMany<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R

    /// Set when the store reads and applies a submission without holding a transaction open (PostgreSQL: one round
    /// trip for the facts, one for the effects and the answer). Nil: submissions run through ``write(_:)``.
    var fastPath: (any LedgerFastPath)? { get }
}

extension SQLLedgerStore {
    var fastPath: (any LedgerFastPath)? { nil }

    func readMany<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        try await read(body)
    }
}

/// The statements of a submission and of an entitlements read, each its own round trip in autocommit, for stores
/// where a held transaction costs a round trip per statement.
protocol LedgerFastPath: Sendable {
    /// The row of `LedgerSession.factsQuery` for these binds.
    func facts(_ binds: [SQLValue]) async throws -> SQLRow?
    /// A transaction's balance movements (rows of `LedgerSession.entriesQuery`).
    func entries(transactionId: String) async throws -> [SQLRow]
    /// What an account owns (rows of `LedgerSession.ownedQuery`).
    func owned(accountId: String) async throws -> [SQLRow]
    /// Applies `effects` as one atomic statement and then, when `owner` is given, reads what that account owns.
    /// Throws ``LedgerRace`` when an effect's precondition no longer held, ``LedgerHandBack`` when an effect is
    /// decided in Swift (the operation then runs in a held transaction); either way nothing was applied.
    func apply(_ effects: [LedgerEffect], owner: String?, events: Bool) async throws -> [SQLRow]
    /// One read of the schema's migrations, for health checks.
    func ping() async throws
}

public enum LedgerStoreKind: String, Sendable, Codable, CustomStringConvertible {
    case sqlite, postgres
    public var description: String { rawValue }
}

extension Ledger {
    /// Opens the store a database URL names: `postgres://user:password@host:port/database` or `sqlite:///path/to/file`
    /// (a bare path is a SQLite file too).
    public static func openStore(url: String) async throws -> any LedgerStore {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return try await PostgresLedgerStore(url: url)
        }
        let path = url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
        return try SQLiteLedgerStore(path: path)
    }
}

/// A waiting caller's answer, handed from a store's thread back to the caller's task.
final class PendingAnswer<R: Sendable>: @unchecked Sendable {
    private let continuation: CheckedContinuation<R, any Error>
    private(set) var result: Result<R, any Error>?

    init(_ continuation: CheckedContinuation<R, any Error>) { self.continuation = continuation }

    /// Keeps the body's result; it is given to the caller only by `deliver`, after the commit.
    func hold(_ result: Result<R, any Error>) { self.result = result }

    /// With a `commitError`, the group's writes are gone: every operation of it is answered that error, a refusal too
    /// (it may have been decided on an earlier operation's writes of the same group: a spend refused for want of coins
    /// that another spend of the group took, and that the failed commit gave back), and one that never ran.
    func deliver(commitError: (any Error)?) {
        if let commitError { continuation.resume(throwing: commitError); return }
        continuation.resume(with: result ?? .failure(LedgerError(.storage, "the operation never ran")))
    }
}
