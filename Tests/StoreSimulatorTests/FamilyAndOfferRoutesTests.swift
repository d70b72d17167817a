import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import StoreSimulator
import Testing

@Suite("Family Sharing and offers over HTTP")
struct FamilyAndOfferRoutesTests {
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.example.iapkit"))

    @Test("PUT /sim/accounts/{id}/family shares and revokes; /sim/purchases redeems offers; /sim/products lists them")
    func familyAndOffers() async throws {
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority))
        let authenticator = APIAuthenticator(keyId: "K", issuerId: "I", publicKey: P256.Signing.PrivateKey().publicKey, bundleId: "com.example.iapkit")
        try await SimulatorServer.application(.init(engine: engine, authenticator: authenticator), port: 0).test(.live) { client in
            for id in ["mum", "son"] { _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": id])) }
            let family = try await client.execute(uri: "/sim/accounts/mum/family", method: .put, body: jsonBody(["members": ["son"]]))
            #expect(family.status == .ok)
            let unknown = try await client.execute(uri: "/sim/accounts/mum/family", method: .put, body: jsonBody(["members": ["stranger"]]))
            #expect(unknown.status == .notFound)
            // "stranger" was refused as a whole: the son is still in the family.

            let products = try decode(SimProducts.self, try await client.execute(uri: "/sim/products?ids=com.example.iapkit.pro.monthly", method: .get))
            let monthly = try #require(products.products.first)
            #expect(monthly.familyShareable == true)
            #expect(monthly.promotionalOffers.first?.id == "pro.monthly.comeback")
            #expect(monthly.offerCodes.first?.id == "PRO-FRIENDS")

            let bought = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody([
                "account": "mum", "device": "phone", "productId": "com.example.iapkit.pro.monthly",
                "offer": ["kind": "offerCode", "id": "PRO-FRIENDS"],
            ])))
            #expect(bought.status == "purchased")
            let transaction = try await verifier.verifyTransaction(try #require(bought.signedTransaction)).payload
            #expect(transaction.offerType == .offerCode)
            let refused = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody([
                "account": "mum", "device": "phone", "productId": "com.example.iapkit.pro.monthly",
                "offer": ["kind": "offerCode", "id": "PRO-FRIENDS"],
            ])))
            #expect(refused.status == "failed")

            let sonsRestore = try decode(SimulatedSignedTransactions.self, try await client.execute(uri: "/sim/accounts/son/restore", method: .post))
            let shared = try #require(sonsRestore.signedTransactions.first)
            #expect(try await verifier.verifyTransaction(shared).payload.inAppOwnershipType == .familyShared)

            _ = try await client.execute(uri: "/sim/accounts/mum/family", method: .put, body: jsonBody(["members": [String]()]))
            let types = await engine.notifications().map(\.type)
            #expect(types == [.subscribed, .subscribed, .revoke], "a code redeemed to subscribe for the first time is SUBSCRIBED, mirrored to the family")
        }
    }
}
