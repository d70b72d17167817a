import _CryptoExtras
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import JWTKit
import PurchaseAPI
import IAPKit
import PurchaseServer
import StoreSimulator
import Testing

@Suite("Who may call: app tokens (HS256, ES256, RS256), restore across devices", .timeLimit(.minutes(3)))
struct AccessTests {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func claims(_ account: String, lifetime: TimeInterval = 300) -> Claims {
        Claims(sub: .init(value: account), exp: .init(value: Date().addingTimeInterval(lifetime)))
    }

    @Test("ES256: the configured public key's tokens pass; another key, an expired token or an HS256 token do not")
    func es256() async throws {
        let key = P256.Signing.PrivateKey()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID().uuidString).pem")
        try Data(key.publicKey.pemRepresentation.utf8).write(to: file)
        let authenticator = try await AccountAuthenticator(.init(publicKeyPEMFile: file.path, algorithm: "ES256"))
        let signer = JWTKeyCollection()
        await signer.add(ecdsa: try ES256PrivateKey(pem: key.pemRepresentation))
        #expect(await authenticator.account(fromAuthorization: "Bearer \(try await signer.sign(claims("ann")))") == "ann")
        #expect(await authenticator.account(fromAuthorization: "Bearer \(try await signer.sign(claims("ann", lifetime: -10)))") == nil)
        let stranger = JWTKeyCollection()
        await stranger.add(ecdsa: ES256PrivateKey())
        #expect(await authenticator.account(fromAuthorization: "Bearer \(try await stranger.sign(claims("ann")))") == nil)
        let hmac = try await AccountAuthenticator.issueToken(account: "ann", secret: key.publicKey.pemRepresentation)
        #expect(await authenticator.account(fromAuthorization: "Bearer \(hmac)") == nil, "no algorithm confusion")
        #expect(await authenticator.account(fromAuthorization: nil) == nil)
        #expect(await authenticator.account(fromAuthorization: "Basic abc") == nil)
    }

    @Test("RS256 works the same; HS256 refuses a short secret")
    func rs256AndSecrets() async throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID().uuidString).pem")
        try Data(key.publicKey.pemRepresentation.utf8).write(to: file)
        let authenticator = try await AccountAuthenticator(.init(publicKeyPEMFile: file.path, algorithm: "RS256"))
        let signer = JWTKeyCollection()
        await signer.add(rsa: try Insecure.RSA.PrivateKey(pem: key.pemRepresentation), digestAlgorithm: .sha256)
        #expect(await authenticator.account(fromAuthorization: "Bearer \(try await signer.sign(claims("bo")))") == "bo")
        await #expect(throws: ConfigurationError.self) { try await AccountAuthenticator(.init(hs256Secret: "short")) }
    }

    @Test("Restore on a new device: store-restored transactions and the ledger's non-renewing pass; another account is refused them")
    func restore() async throws {
        try await System.run { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-cy"])
            for product in ["com.example.iapkit.premium", "com.example.iapkit.season.pass"] {
                _ = try await system.buy(product, account: "cy", storeAccount: "store-cy")
            }
            let signed = try decode(SimulatedSignedTransactions.self, await system.device(.post, "/sim/accounts/store-cy/restore")).signedTransactions
            #expect(signed.count == 1, "the store restores the non-consumable only")
            let (status, reply) = try await system.call(.post, "/v1/restore", as: "cy", RestoreRequest(signedTransactions: signed))
            #expect(status == .ok)
            #expect(Set(try decode(RestoreReply.self, reply).entitlements.entitlementNames) == ["premium", "season"])
            let other = try decode(RestoreReply.self, await system.call(.post, "/v1/restore", as: "mallory", RestoreRequest(signedTransactions: signed)).1)
            #expect(other.refused.count == 1)
            #expect(other.entitlements.entitlementNames.isEmpty)
        }
    }
}

@Suite("The SDK's own input limits")
struct ClientLimitTests {
    @Test("An answer over 8 MiB is refused before it is parsed")
    func oversizedAnswer() async throws {
        let router = Router()
        router.get("v1/entitlements") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: " "), count: 9 << 20)))
        }
        try await Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0))).test(.live) { client in
            let server = PurchaseServerClient(baseURL: URL(string: "http://127.0.0.1:\(client.port!)")!) { "token" }
            do {
                _ = try await server.entitlements()
                Issue.record("an oversized answer was accepted")
            } catch {
                #expect((error as? PurchaseFailure)?.code == .responseTooLarge, "\(error)")
            }
        }
    }
}
