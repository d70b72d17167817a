import AppStoreFormats
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import IAPKit
import PurchaseServer
import Testing

@Suite("Signed entitlement answers: the server signs, the SDK believes only what it signed", .timeLimit(.minutes(3)))
struct SignedEntitlementsTests {
    @Test("The signing key is made once in the data directory, readable by its owner only, and loaded again on the next start")
    func keyFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)").path
        let first = try EntitlementSigner.loadOrCreate(in: directory)
        let path = (directory as NSString).appendingPathComponent(EntitlementSigner.keyFileName)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o777 == 0o600)
        let second = try EntitlementSigner.loadOrCreate(in: directory)
        #expect(second.keyId == first.keyId)
        #expect(second.publicKeyPEM == first.publicKeyPEM)
        #expect(EntitlementSigner.validNonce("short") == false)
        #expect(EntitlementSigner.validNonce(String(repeating: "a", count: 129)) == false)
        #expect(EntitlementSigner.validNonce("abcdefghijklmnop-_09"))
        #expect(EntitlementSigner.validNonce("abcdefghijklmnop+/09") == false, "base64url only")
    }

    @Test("Over HTTP: the public key is served; answers carry a signature only when asked; a proxy that edits, re-signs or replays an answer grants nothing")
    func endToEnd() async throws {
        var options = System.Options(deliver: false)
        options.signEntitlements = true
        try await System.run(options) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-yan"])
            let keyResponse = try await system.server.execute(uri: "/v1/keys/entitlements", method: .get)
            #expect(keyResponse.status == .ok)
            let pem = String(buffer: keyResponse.body)
            let verifier = try EntitlementsVerifier(publicKeyPEM: pem)

            // Asked without a nonce: no signature; with a bad one: refused.
            #expect(try await system.entitlements("yan").signedEntitlements == nil)
            var headers = HTTPFields()
            headers[.authorization] = "Bearer \(try await system.token("yan"))"
            headers[.init("X-Entitlements-Nonce")!] = "short"
            let bad = try await system.server.execute(uri: "/v1/entitlements", method: .get, headers: headers)
            #expect(bad.status == .badRequest)

            let app = try App.launch(system, account: "yan", storeAccount: "store-yan", verifier: verifier)
            guard case .granted(let owned) = await app.client.purchase("com.example.iapkit.coins.100") else { Issue.record("a signed grant was not believed"); return }
            #expect(owned.balances["coins"] == 100)
            #expect(try await app.client.entitlements().balances["coins"] == 100)

            // A proxy on the device between the SDK and the server.
            enum Tamper: CaseIterable { case editUnsigned, resign, replay }
            let replayed = Shared<String?>(nil)
            let proxyKey = P256.Signing.PrivateKey()
            for tamper in Tamper.allCases {
                let transport: @Sendable (URLRequest) async throws -> (Data, URLResponse) = { request in
                    let (data, response) = try await URLSession.shared.data(for: request)
                    guard var object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return (data, response) }
                    let premium: [String: Any] = ["name": "premium", "productId": "com.example.iapkit.premium", "transactionId": "1", "state": "active"]
                    switch tamper {
                    case .editUnsigned:
                        object["entitlements"] = [premium]
                    case .resign:
                        let jws = try #require(object["signedEntitlements"] as? String)
                        let parts = jws.split(separator: ".")
                        var payload = try #require(try JSONSerialization.jsonObject(with: Data(Base64.decode(Array(parts[1].utf8)) ?? [])) as? [String: Any])
                        var entitlements = try #require(payload["entitlements"] as? [String: Any])
                        entitlements["entitlements"] = [premium]
                        payload["entitlements"] = entitlements
                        let input = String(parts[0]) + "." + Base64.urlEncode(Array(try JSONSerialization.data(withJSONObject: payload)))
                        object["signedEntitlements"] = input + "." + Base64.urlEncode(try proxyKey.signature(for: Data(input.utf8)).rawRepresentation)
                    case .replay:
                        if let old = replayed.value { object["signedEntitlements"] = old } else { replayed.value = object["signedEntitlements"] as? String }
                    }
                    return (try JSONSerialization.data(withJSONObject: object), response)
                }
                let proxied = try App.launch(system, account: "yan", storeAccount: "store-yan", verifier: verifier, transport: transport)
                switch tamper {
                case .editUnsigned:
                    let believed = try await proxied.client.entitlements()
                    #expect(!believed.has("premium"), "only what the server signed is believed")
                case .resign:
                    await #expect(throws: PurchaseFailure(.untrustedAnswer, "")) { try await proxied.client.entitlements() }
                case .replay:
                    _ = try await proxied.client.entitlements()
                    await #expect(throws: PurchaseFailure(.untrustedAnswer, ""), "an answer to another request") { try await proxied.client.entitlements() }
                }
                #expect(await proxied.client.currentEntitlements?.has("premium") != true)
            }
        }
    }
}
