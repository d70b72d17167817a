import AppStoreTrust
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseServer

/// A purchase server alone over its own ledger, without the simulator: for what asks nothing of the App Store (who may
/// call, the dashboard's sessions, `/metrics`). Several may be opened over one ledger, as replicas are.
struct LoneServer {
    static let adminKey = "lone-admin-key-for-tests"
    static let secret = String(repeating: "lone-secret-", count: 4)

    /// A configuration with an admin key, an HS256 secret and a fresh ledger of `kind`.
    static func configuration(_ kind: LedgerKind = .sqlite) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        // On PostgreSQL a database of its own: the server opens as an operator's does, and refuses the suite's shared one,
        // where other tests' customers own products this catalog does not sell.
        configuration.database = kind == .postgres ? try PostgresDatabases.fresh("lone") : try kind.databaseURL()
        configuration.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("lone-\(UUID().uuidString)").path
        configuration.auth.hs256Secret = secret
        configuration.adminKey = adminKey
        return configuration
    }

    /// Runs `body` against a live server (real connections: the peer address is loopback) configured by `configuration`.
    static func run(_ configuration: ServerConfiguration, _ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try configuration.validate()
        let services = try await PurchaseServices.open(configuration, roots: TrustRoots())
        try await buildApplication(services, port: 0).test(.live) { client in try await body(client) }
    }
}
