import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import PurchaseServer
import Testing

/// What an app token must say besides its account and expiry: when it starts (`nbf`), whom it is for (`aud`), who
/// issued it (`iss`), and — in its header — the algorithm the server is configured for.
@Suite("App tokens: nbf honoured, aud and iss checked when configured, the header's alg held to the configured one", .timeLimit(.minutes(3)))
struct TokenClaimsTests {
    /// The status `GET /v1/entitlements` answers with `token`.
    static func status(_ client: any TestClientProtocol, _ token: String) async throws -> HTTPResponse.Status {
        try await client.execute(uri: "/v1/entitlements", method: .get, headers: [.authorization: "Bearer \(token)"]).status
    }

    static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A token with `header`, signed with HMAC-SHA256 under `secret` whatever the header says.
    static func hs256Signed(header: String, account: String, secret: String) -> String {
        let exp = Int(Date().addingTimeInterval(600).timeIntervalSince1970)
        let input = base64URL(Data(header.utf8)) + "." + base64URL(Data(#"{"sub":"\#(account)","exp":\#(exp)}"#.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return input + "." + base64URL(Data(mac))
    }

    @Test("A token whose nbf is an hour ahead is refused (401); one whose nbf is now, or seconds ahead (the sign-in's clock a little fast), is accepted")
    func notBefore() async throws {
        try await LoneServer.run(try LoneServer.configuration()) { client async throws in
            let ahead = try await AccountAuthenticator.issueToken(account: "nia", secret: LoneServer.secret, lifetime: 7200,
                                                                  notBefore: Date().addingTimeInterval(3600))
            #expect(try await Self.status(client, ahead) == .unauthorized)
            let now = try await AccountAuthenticator.issueToken(account: "nia", secret: LoneServer.secret, notBefore: Date())
            #expect(try await Self.status(client, now) == .ok)
            let skewed = try await AccountAuthenticator.issueToken(account: "nia", secret: LoneServer.secret, notBefore: Date().addingTimeInterval(20))
            #expect(try await Self.status(client, skewed) == .ok)
        }
    }

    @Test("With auth.audience and auth.issuer set, a token for another audience, from another issuer, or naming neither is refused (401); a matching one passes")
    func audienceAndIssuer() async throws {
        var configuration = try LoneServer.configuration()
        configuration.auth.audience = "iapkit.example.com"
        configuration.auth.issuer = "https://signin.example.com"
        try await LoneServer.run(configuration) { client async throws in
            func token(audience: String?, issuer: String?) async throws -> String {
                try await AccountAuthenticator.issueToken(account: "ola", secret: LoneServer.secret, audience: audience, issuer: issuer)
            }
            #expect(try await Self.status(client, try await token(audience: "iapkit.example.com", issuer: "https://signin.example.com")) == .ok)
            #expect(try await Self.status(client, try await token(audience: "chat.example.com", issuer: "https://signin.example.com")) == .unauthorized)
            #expect(try await Self.status(client, try await token(audience: "iapkit.example.com", issuer: "https://evil.example.com")) == .unauthorized)
            #expect(try await Self.status(client, try await token(audience: nil, issuer: "https://signin.example.com")) == .unauthorized)
            #expect(try await Self.status(client, try await token(audience: "iapkit.example.com", issuer: nil)) == .unauthorized)
        }
        // Unset, neither is asked for, and a token carrying them passes as before.
        try await LoneServer.run(try LoneServer.configuration()) { client async throws in
            let token = try await AccountAuthenticator.issueToken(account: "ola", secret: LoneServer.secret, audience: "anyone", issuer: "anybody")
            #expect(try await Self.status(client, token) == .ok)
        }
    }

    @Test("A token whose header names another algorithm (none, HS512, RS256) is refused (401) though its HS256 signature is valid; HS256 in the header passes")
    func headerAlgorithm() async throws {
        try await LoneServer.run(try LoneServer.configuration()) { client async throws in
            #expect(try await Self.status(client, Self.hs256Signed(header: #"{"alg":"HS256","typ":"JWT"}"#, account: "al", secret: LoneServer.secret)) == .ok)
            for header in [#"{"alg":"none","typ":"JWT"}"#, #"{"alg":"HS512","typ":"JWT"}"#, #"{"alg":"RS256"}"#, #"{"typ":"JWT"}"#] {
                let token = Self.hs256Signed(header: header, account: "al", secret: LoneServer.secret)
                #expect(try await Self.status(client, token) == .unauthorized, "\(header)")
            }
        }
    }
}
