import Foundation
@testable import PurchaseLedger
import Testing

/// The pool a PostgreSQL URL configures: read without a server, as the store's initializer reads it.
@Suite("PostgreSQL: what the ledger's URL configures — a fixed pool and its size, the keep-alive query")
struct PostgresConfigurationTests {
    @Test("A fixed pool: its every connection opened at the start and kept, so none starts an idle-timeout timer when it goes idle")
    func fixedPool() throws {
        let configuration = try PostgresLedgerStore.configuration(url: "postgres://app:secret@db.internal:6543/ledger?sslmode=disable", connections: 12)
        #expect(configuration.options.maximumConnections == 12 && configuration.options.minimumConnections == 12)
        #expect(configuration.host == "db.internal" && configuration.port == 6543)
        #expect(configuration.username == "app" && configuration.password == "secret" && configuration.database == "ledger")
        let fallback = try PostgresLedgerStore.configuration(url: "postgres://db/ledger", connections: nil)
        #expect(fallback.options.maximumConnections == 8 && fallback.options.minimumConnections == 8)
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger", connections: 0).options.minimumConnections == 1)
    }

    @Test("A keep-alive query every 30 s idle unless the URL says otherwise: keepalive=off, or keepalive=SECONDS")
    func keepAlive() throws {
        // A fixed pool's connections may idle for hours, past what a NAT or firewall between remembers.
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger", connections: nil).options.keepAliveBehavior?.frequency == .seconds(30))
        let configuration = try PostgresLedgerStore.configuration(url: "postgres://db/ledger?sslmode=disable&keepalive=45", connections: 4)
        #expect(configuration.options.keepAliveBehavior?.frequency == .seconds(45))
        #expect(configuration.options.maximumConnections == 4)
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?keepalive=3600", connections: 4).options.keepAliveBehavior?.frequency
            == .seconds(3600))
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?keepalive=off", connections: 4).options.keepAliveBehavior == nil)
    }

    @Test("connections=N sizes the pool (every replica's must fit in PostgreSQL's max_connections) unless the caller names a size")
    func poolSize() throws {
        let sized = try PostgresLedgerStore.configuration(url: "postgres://db/ledger?sslmode=require&connections=4&keepalive=20", connections: nil)
        #expect(sized.options.maximumConnections == 4 && sized.options.minimumConnections == 4)
        #expect(sized.options.keepAliveBehavior?.frequency == .seconds(20))
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?connections=1000", connections: nil).options.maximumConnections == 1000)
        #expect(try PostgresLedgerStore.configuration(url: "postgres://db/ledger?connections=4", connections: 1).options.maximumConnections == 1)
    }

    @Test("On a real server, connections=2 lends at most two connections to forty concurrent operations")
    func poolSizeOnAServer() async throws {
        let server = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        var components = try #require(URLComponents(string: server))
        components.queryItems = (components.queryItems ?? []).filter { $0.name != "connections" } + [URLQueryItem(name: "connections", value: "2")]
        let store = try await PostgresLedgerStore(url: try #require(components.string))
        let pids = try await withThrowingTaskGroup(of: SQLValue?.self) { group in
            for _ in 0..<40 {
                group.addTask { try await store.read { sql in try await sql.first("SELECT pg_backend_pid(), pg_sleep(0.01)", []) }?.values.first }
            }
            return try await group.reduce(into: Set<SQLValue>()) { if let pid = $1 { $0.insert(pid) } }
        }
        try await store.close()
        #expect((1...2).contains(pids.count), "\(pids.count) backends served the store")
    }

    @Test("On a real server, a fixed pool's connections are all open before the first operation needs them")
    func fixedPoolOnAServer() async throws {
        try await withOwnPostgresDatabase("pool_") { url in
            let store = try await PostgresLedgerStore(url: url, connections: 3)
            let query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            var open: Int64 = 0
            // The pool opens them as it starts, beside the store's first statement: given a moment.
            for _ in 0..<100 where open != 3 {
                open = try await store.read { sql in try await sql.first(query, []) }?.int(0) ?? 0
                if open != 3 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(open == 3)
            try await store.close()
        }
    }

    @Test("A keepalive neither off nor 1…3600 seconds, connections not 1…1000, an option named twice, or a URL without a host: invalid input")
    func refusals() {
        for url in ["postgres://db/l?keepalive=0", "postgres://db/l?keepalive=3601", "postgres://db/l?keepalive=on", "postgres://db/l?keepalive=abc", "postgres://db/l?keepalive",
                    "postgres://db/l?keepalive=-5", "postgres://db/l?connections=0", "postgres://db/l?connections=1001",
                    "postgres://db/l?connections=many", "postgres://db/l?connections", "postgres://db/l?connections=4&connections=2",
                    "postgres://db/l?keepalive=off&keepalive=30", "postgres:///ledger", "not a url"] {
            let refused = #expect(throws: LedgerError.self, "\(url)") { try PostgresLedgerStore.configuration(url: url, connections: 4) }
            #expect(refused?.code == .invalidInput, "\(url)")
        }
    }
}
