import Foundation
@testable import PurchaseLedger
import Testing

/// The pool a PostgreSQL URL configures: read without a server, as the store's initializer reads it.
@Suite("PostgreSQL: what the ledger's URL configures — its pool, a keep-alive query only when asked for")
struct PostgresConfigurationTests {
    @Test("Without keepalive: no keep-alive timer starts each time a connection goes idle (every purchase under load)")
    func withoutKeepAlive() throws {
        let configuration = try PostgresLedgerStore.configuration(url: "postgres://app:secret@db.internal:6543/ledger?sslmode=disable", connections: 12)
        #expect(configuration.options.maximumConnections == 12)
        #expect(configuration.options.keepAliveBehavior == nil)
        #expect(configuration.host == "db.internal" && configuration.port == 6543)
        #expect(configuration.username == "app" && configuration.password == "secret" && configuration.database == "ledger")
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger", connections: 0).options.maximumConnections == 1)
    }

    @Test("keepalive=SECONDS: PostgresNIO's SELECT 1 on a connection idle that long, beside the other options")
    func keepAliveWhenAsked() throws {
        let configuration = try PostgresLedgerStore.configuration(url: "postgres://db/ledger?sslmode=disable&keepalive=45", connections: 4)
        #expect(configuration.options.keepAliveBehavior?.frequency == .seconds(45))
        #expect(configuration.options.maximumConnections == 4)
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?keepalive=59", connections: 4).options.keepAliveBehavior?.frequency
            == .seconds(59))
        // The pool's idle timeout stays PostgresNIO's 60 s: a keep-alive is only worth something below it.
        #expect(configuration.options.connectionIdleTimeout == .seconds(60))
    }

    @Test("connections=N sizes the pool (every replica's must fit in PostgreSQL's max_connections), above the caller's default")
    func poolSize() throws {
        let sized = try PostgresLedgerStore.configuration(url: "postgres://db/ledger?sslmode=require&connections=4&keepalive=20", connections: 16)
        #expect(sized.options.maximumConnections == 4)
        #expect(sized.options.keepAliveBehavior?.frequency == .seconds(20))
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?connections=1000", connections: 16).options.maximumConnections == 1000)
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger", connections: 16).options.maximumConnections == 16)
        // On demand: a minimum above 0 can crash PostgresNIO's pool when connections fail to reopen under load.
        #expect(sized.options.minimumConnections == 0)
    }

    @Test("On a real server, connections=2 lends at most two connections to forty concurrent operations, and no size at most eight")
    func poolSizeOnAServer() async throws {
        let server = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        #expect((1...2).contains(try await Self.backends(serving: try await PostgresLedgerStore(url: server + (server.contains("?") ? "&" : "?") + "connections=2"))))
        // More than eight operations wait for a connection rather than start another PostgreSQL process on the cores.
        #expect((1...8).contains(try await Self.backends(serving: try await PostgresLedgerStore(url: server))))
    }

    /// How many PostgreSQL backends served forty concurrent operations of `store` (then closed).
    static func backends(serving store: PostgresLedgerStore) async throws -> Int {
        let pids = try await withThrowingTaskGroup(of: SQLValue?.self) { group in
            for _ in 0..<40 {
                group.addTask { try await store.read { sql in try await sql.first("SELECT pg_backend_pid(), pg_sleep(0.01)", []) }?.values.first }
            }
            return try await group.reduce(into: Set<SQLValue>()) { if let pid = $1 { $0.insert(pid) } }
        }
        try await store.close()
        return pids.count
    }

    @Test("A keepalive that is not 1…59 seconds (at 60 the pool has closed the idle connection already), connections not 1…1000, an option named twice, or a URL without a host: invalid input")
    func refusals() {
        for url in ["postgres://db/l?keepalive=0", "postgres://db/l?keepalive=60", "postgres://db/l?keepalive=3600", "postgres://db/l?keepalive=abc", "postgres://db/l?keepalive",
                    "postgres://db/l?keepalive=-5", "postgres://db/l?connections=0", "postgres://db/l?connections=1001",
                    "postgres://db/l?connections=many", "postgres://db/l?connections", "postgres://db/l?connections=4&connections=2",
                    "postgres://db/l?keepalive=20&keepalive=30", "postgres:///ledger", "not a url"] {
            let refused = #expect(throws: LedgerError.self, "\(url)") { try PostgresLedgerStore.configuration(url: url, connections: 4) }
            #expect(refused?.code == .invalidInput, "\(url)")
        }
    }
}
