import AppStoreFormats
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import StoreSimulator
import Testing

/// The signatures the app's server makes for StoreKit — made here by Apple's own Python creators — checked by the
/// simulator's purchase route as the App Store does.
@Suite("Offer signatures: Apple's creators' JWS and original signatures taken once, forgeries refused")
struct OfferSignatureTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"
    static let offer = "pro.monthly.comeback"
    let key = P256.Signing.PrivateKey()
    let keyId = "OFFERKEY01"
    let issuerId = "57246542-96fe-1a63-e053-0824d011072a"

    /// What Apple's library signs for `transactionId` and `token`.
    func appleSignatures(transactionId: String, token: UUID) async throws -> [String: Any] {
        guard let python = ProcessInfo.processInfo.environment["IAPKIT_PYTHON"] else {
            throw SimulatorError.catalog("IAPKIT_PYTHON is not set: run the suite with scripts/test, which installs Apple's library")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-offers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyPath = directory.appendingPathComponent("key.p8").path
        let otherPath = directory.appendingPathComponent("other.p8").path
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherPath))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/apple_library_offers.py").path
        let run = try await Subprocess.run(python, [script, keyPath, keyId, issuerId, "com.example.iapkit", Self.monthly, Self.offer, transactionId,
                                                    token.uuidString.lowercased(), otherPath])
        #expect(run.status == 0, "\(run.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
    }

    /// A purchase whose body is built as a JSON object: signatures tampered with, taken from Apple's library as it printed them.
    func purchase(_ client: some TestClientProtocol, _ body: [String: Any]) async throws -> SimulatedPurchaseAnswer {
        try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(body)))
    }

    @Test("Promotional offers (JWS and original) and introductory-offer eligibility from Apple's creators; a changed byte, another key, an expired or reused one refused")
    func appleCreators() async throws {
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority))
        let authenticator = APIAuthenticator(keyId: keyId, issuerId: issuerId, publicKey: key.publicKey, bundleId: "com.example.iapkit")
        try await SimulatorServer.application(.init(engine: engine, authenticator: authenticator), port: 0).test(.live) { client in
            for id in ["ann", "bob", "cid"] { _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": id])) }
            // Ann subscribes (with the free week), then redeems the comeback offer for her plan's next periods.
            let first = try await purchase(client, ["account": "ann", "device": "d", "productId": Self.monthly])
            let annTransaction = try #require(first.transactionId)
            let token = UUID()
            let signed = try await appleSignatures(transactionId: annTransaction, token: token)
            let jws = try #require(signed["promotional"] as? String)
            func offer(_ signature: String) -> [String: String] { ["kind": "promotional", "id": Self.offer, "signature": signature] }
            let base: [String: Any] = ["account": "ann", "device": "d", "productId": Self.monthly]

            var missing = base
            missing["offer"] = ["kind": "promotional", "id": Self.offer]
            #expect((try await purchase(client, missing)).status == "failed", "a promotional offer needs a signature")
            var tampered = base
            let parts = jws.split(separator: ".").map(String.init)
            let claims = try #require(Base64.decode(parts[1].utf8)).map { $0 }
            let changed = String(decoding: claims, as: UTF8.self).replacingOccurrences(of: Self.offer, with: "pro.monthly.comebacK")
            tampered["offer"] = offer([parts[0], Base64.urlEncode(Array(changed.utf8)), parts[2]].joined(separator: "."))
            #expect((try await purchase(client, tampered)).status == "failed")
            var otherKey = base
            otherKey["offer"] = offer(try #require(signed["promotionalOtherKey"] as? String))
            #expect((try await purchase(client, otherKey)).status == "failed")
            var otherProduct = base
            otherProduct["productId"] = Self.yearly
            otherProduct["offer"] = ["kind": "promotional", "id": "pro.yearly.upgrade", "signature": jws]
            #expect((try await purchase(client, otherProduct)).status == "failed", "signed for another product")
            // Apple's claims as its creators write them, issued 25 hours ago.
            let stale = OfferSignatureClaims(iss: issuerId, iat: Date().timeIntervalSince1970 - 25 * 3600, aud: OfferSignatureClaims.promotionalOfferAudience,
                                             bid: "com.example.iapkit", nonce: UUID().uuidString.lowercased(), productId: Self.monthly,
                                             offerIdentifier: Self.offer, transactionId: annTransaction)
            let header = Base64.urlEncode(Array(#"{"alg":"ES256","kid":"\#(keyId)","typ":"JWT"}"#.utf8))
            let input = header + "." + Base64.urlEncode(Array(try JSONEncoder().encode(stale)))
            var expiredJWS = base
            expiredJWS["offer"] = offer(input + "." + Base64.urlEncode(try key.signature(for: Array(input.utf8)).rawRepresentation))
            let refusedStale = try await purchase(client, expiredJWS)
            #expect(refusedStale.status == "failed" && refusedStale.reason?.contains("expired") == true, "\(refusedStale)")

            var good = base
            good["offer"] = offer(jws)
            let redeemed = try await purchase(client, good)
            #expect(redeemed.status == "purchased", "\(redeemed)")
            #expect(await engine.notifications().last?.type == .offerRedeemed)
            let replayed = try await purchase(client, good)
            #expect(replayed.status == "failed", "a nonce is taken once")
            #expect(replayed.reason?.contains("invalidOfferSignature") == true)
            // Bob may not use a signature that names Ann's transaction.
            var stolen = base
            stolen["account"] = "bob"
            stolen["offer"] = offer(try #require(signed["introAllowed"] as? String))
            #expect((try await purchase(client, stolen)).status == "failed", "wrong audience")

            // The original API's signature, over the purchase's appAccountToken.
            let legacy = try #require(signed["legacy"] as? [String: Any])
            var original = base
            original["appAccountToken"] = token.uuidString
            original["offer"] = ["kind": "promotional", "id": Self.offer, "legacySignature": legacy]
            var wrongToken = original
            wrongToken["appAccountToken"] = UUID().uuidString
            #expect((try await purchase(client, wrongToken)).status == "failed", "signed for another appAccountToken")
            #expect((try await purchase(client, original)).status == "purchased")
            #expect((try await purchase(client, original)).status == "failed", "reused")
            var expired = original
            expired["offer"] = ["kind": "promotional", "id": Self.offer, "legacySignature": try #require(signed["legacyExpired"] as? [String: Any])]
            #expect((try await purchase(client, expired)).status == "failed", "older than 24 hours")

            // Introductory-offer eligibility: the server's word overrides the App Store's for a new subscriber.
            let bobApp = try #require(await engine.account("bob")?.appTransactionId)
            let bobSigned = try await appleSignatures(transactionId: bobApp, token: token)
            let denied = try await purchase(client, ["account": "bob", "device": "d", "productId": Self.monthly,
                                                     "introductoryOfferEligibility": try #require(bobSigned["introDenied"] as? String)])
            #expect(denied.status == "purchased")
            #expect(await engine.transaction(try #require(denied.transactionId))?.offerType == nil, "no free week")
            let cidApp = try #require(await engine.account("cid")?.appTransactionId)
            let cidSigned = try await appleSignatures(transactionId: cidApp, token: token)
            let allowed = try await purchase(client, ["account": "cid", "device": "d", "productId": Self.monthly,
                                                      "introductoryOfferEligibility": try #require(cidSigned["introAllowed"] as? String)])
            #expect(await engine.transaction(try #require(allowed.transactionId))?.offerType == .introductoryOffer)
            #expect(await engine.transaction(try #require(first.transactionId))?.offerType == .introductoryOffer)
        }
    }
}
