import Foundation
import Logging
import PostgresKit

/// The store for many replicas: a PostgreSQL server through a connection pool. Each ledger operation is one
/// PostgreSQL transaction; unique keys and `ON CONFLICT` make racing replicas agree.
public final class PostgresLedgerStore: LedgerStore {
    public let kind = "postgres"
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger

    /// Connects to `postgres://user:password@host:port/database` (TLS when the server offers it; `?sslmode=disable`
    /// turns it off, `?sslmode=require` insists).
    public init(url: String, maximumConnections: Int = 20) throws {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw LedgerError(.invalidInput, "not a PostgreSQL URL: postgres://user@host:port/database expected")
        }
        let sslmode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "prefer"
        let tls: PostgresClient.Configuration.TLS
        switch sslmode {
        case "disable": tls = .disable
        case "require", "verify-full": tls = .require(.makeClientConfiguration())
        default: tls = .prefer(.makeClientConfiguration())
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres", password: components.password,
            database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        var logger = Logger(label: "iapkit.ledger.postgres")
        logger.logLevel = .warning
        self.logger = logger
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    public func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        do {
            return try await client.withTransaction(logger: logger) { connection in
                try await body(connection.sql(queryLogLevel: nil))
            }
        } catch let error as PostgresTransactionError {
            // The driver wraps what the body threw (after rolling back); callers want the body's own error.
            throw error.closureError ?? error.beginError ?? error.commitError ?? error
        }
    }

    public func close() async throws {
        runner.cancel()
        _ = await runner.value
    }

    deinit {
        runner.cancel()
    }
}
