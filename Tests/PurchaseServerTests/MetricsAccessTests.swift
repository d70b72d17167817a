import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseServer
import Testing

/// `/metrics` holds the business's figures (purchases, refunds): it answers a key unless made public.
@Suite("/metrics: closed without credentials by default; the metrics key or the admin key opens it; publicMetrics makes it public", .timeLimit(.minutes(3)))
struct MetricsAccessTests {
    static func status(_ client: any TestClientProtocol, key: String?) async throws -> HTTPResponse.Status {
        var headers = HTTPFields()
        if let key { headers[.authorization] = "Bearer \(key)" }
        let response = try await client.execute(uri: "/metrics", method: .get, headers: headers)
        if response.status == .ok { #expect(String(buffer: response.body).contains("iapkit_"), "the exposition") }
        return response.status
    }

    @Test("By default: no credentials or a wrong key 401, the admin key 200; with metricsKey, that key 200 too; an app token is no key")
    func keyed() async throws {
        try await LoneServer.run(try LoneServer.configuration()) { client async throws in
            #expect(try await Self.status(client, key: nil) == .unauthorized)
            #expect(try await Self.status(client, key: "not-the-admin-key") == .unauthorized)
            let token = try await AccountAuthenticator.issueToken(account: "ann", secret: LoneServer.secret)
            #expect(try await Self.status(client, key: token) == .unauthorized)
            #expect(try await Self.status(client, key: LoneServer.adminKey) == .ok)
        }
        var configuration = try LoneServer.configuration()
        configuration.metricsKey = "scraper-key-0123456789"
        try await LoneServer.run(configuration) { client async throws in
            #expect(try await Self.status(client, key: nil) == .unauthorized)
            #expect(try await Self.status(client, key: "scraper-key-0123456789") == .ok)
            #expect(try await Self.status(client, key: LoneServer.adminKey) == .ok)
        }
    }

    @Test("publicMetrics answers anyone; with neither key nor publicMetrics, /metrics is closed (403 metrics_disabled); a metricsKey under 16 characters is refused at start")
    func publicAndClosed() async throws {
        var open = try LoneServer.configuration()
        open.publicMetrics = true
        try await LoneServer.run(open) { client async throws in
            #expect(try await Self.status(client, key: nil) == .ok)
        }
        var keyless = try LoneServer.configuration()
        keyless.adminKey = nil
        try await LoneServer.run(keyless) { client async throws in
            let response = try await client.execute(uri: "/metrics", method: .get)
            #expect(response.status == .forbidden && String(buffer: response.body).contains("metrics_disabled"))
        }
        var short = ServerConfiguration()
        short.metricsKey = "short"
        #expect(throws: ConfigurationError.self) { try short.validate() }
        let environment = try ServerConfiguration.load(file: nil, environment: ["IAPKIT_METRICS_KEY": "scraper-key-0123456789", "IAPKIT_PUBLIC_METRICS": "false",
                                                                                "IAPKIT_TRUSTED_PROXIES": "10.0.0.0/8,::1", "IAPKIT_AUTH_AUDIENCE": "aud",
                                                                                "IAPKIT_AUTH_ISSUER": "iss"])
        #expect(environment.metricsKey == "scraper-key-0123456789" && !environment.publicMetrics && environment.trustedProxies == ["10.0.0.0/8", "::1"])
        #expect(environment.auth.audience == "aud" && environment.auth.issuer == "iss")
        #expect(try environment.printable().contains("\"metricsKey\" : \"<set>\""))
    }
}
