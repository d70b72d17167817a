import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPKit
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// The device's own signed renewal info (StoreKit's `Product.SubscriptionInfo.Status.renewalInfo`) is the server's third
/// source of a series' renewal state, beside notifications and the Server API: with notifications not delivered, what
/// the customer did in the App Store's subscription settings still reaches the entitlements, through the SDK's uploads.
@Suite("The device's signed renewal info reaches the server", .timeLimit(.minutes(3)))
struct DeviceRenewalInfoTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let coins = "com.example.iapkit.coins.100"

    /// An order, a payment in the simulator with its token, and the upload with the renewal info the store gave with it.
    func buy(_ system: System, _ productId: String, account: String, store: String,
             renewalInfo: (SimulatedPurchaseAnswer) -> String?) async throws -> (SimulatedPurchaseAnswer, PurchaseReply) {
        let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: productId)).1)
        let purchase = try await system.storePurchase(["account": store, "device": "phone", "productId": productId,
                                                       "appAccountToken": order.appAccountToken.lowercasedString])
        let (status, body) = try await system.call(.post, "/v1/purchases", as: account,
                                                   PurchaseRequest(signedTransaction: purchase.signedTransaction, orderId: order.orderId,
                                                                   signedRenewalInfo: renewalInfo(purchase)))
        #expect(status == .ok, "\(text(body))")
        return (purchase, try decode(PurchaseReply.self, body))
    }

    func pro(_ entitlements: Entitlements) -> Entitlements.Item? { entitlements.entitlements.first { $0.productId == Self.monthly } }

    /// What the simulated device's StoreKit holds of the account's series now: its renewal info, signed now.
    func storeRenewalInfo(_ system: System, store: String, original: String) async throws -> String? {
        try decode(SimulatedSignedTransactions.self, await system.device(.get, "/sim/accounts/\(store)/currentEntitlements")).signedRenewalInfos?[original]
    }

    @Test("No notifications: the SDK's restore carries the renewal info — the customer's auto-renew on, then off — which the purchase upload does not wait for")
    func sdkUploadsRenewalInfo() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (account, store) = try await system.customer("rin")
            let app = try App.launch(system, account: account, storeAccount: store)
            await app.client.start()
            guard case .granted(let granted) = await app.client.purchase(Self.monthly) else { Issue.record("not granted"); return }
            // Without notifications the server knows nothing of the renewal state: the purchase is journaled and uploaded
            // without waiting for StoreKit's subscription status. The restore sends it.
            let bought = try #require(pro(granted))
            #expect(bought.renewalInfo == nil)
            let original = try #require(bought.originalTransactionId)
            let first = try #require(pro(try await app.client.restore()))
            #expect(first.renewalInfo?.autoRenewStatus == 1)
            #expect(first.renewalInfo?.autoRenewProductId == Self.monthly)

            // The customer turns auto-renew off in the App Store's settings; Apple's notification never arrives.
            try await system.advance(by: 60)
            _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": false])
            #expect(try await pro(system.entitlements(account).entitlements)?.renewalInfo?.autoRenewStatus == 1, "nothing told the server yet")

            let restored = try await app.client.restore()
            let after = try #require(pro(restored))
            #expect(after.renewalInfo?.autoRenewStatus == 0)
            #expect(after.renewalInfo?.autoRenewProductId == Self.monthly)
            #expect(after.willAutoRenew == false)
            let served = try await pro(system.entitlements(account).entitlements)
            #expect(served?.renewalInfo?.autoRenewStatus == 0, "kept by the server, not only answered")
            #expect(served?.state == .active, "the paid period stands")
            await app.client.stop()
        }
    }

    @Test("Another account's upload of the owner's renewal info changes nothing on the owner's series; the owner's applies")
    func anotherAccountsUploadChangesNothing() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (owner, ownerStore) = try await system.customer("own")
            let (_, reply) = try await buy(system, Self.monthly, account: owner, store: ownerStore) { $0.signedRenewalInfo }
            let original = try #require(pro(reply.entitlements)?.originalTransactionId)
            #expect(pro(reply.entitlements)?.renewalInfo?.autoRenewStatus == 1)

            try await system.advance(by: 60)
            _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": false])
            let signed = try #require(try await storeRenewalInfo(system, store: ownerStore, original: original))

            // Another account sends it with a purchase of its own (granted all the same) and with a restore.
            let (mallory, malloryStore) = try await system.customer("mal")
            let (_, theirs) = try await buy(system, Self.coins, account: mallory, store: malloryStore) { _ in signed }
            #expect(theirs.outcome == .granted)
            #expect(theirs.renewalInfoIgnored == "notOwned")
            #expect(theirs.entitlements.balances["coins"] == 100)
            #expect(pro(theirs.entitlements) == nil)
            let (status, restored) = try await system.call(.post, "/v1/restore", as: mallory, RestoreRequest(signedTransactions: [], signedRenewalInfos: [signed]))
            #expect(status == .ok, "\(text(restored))")
            #expect(try pro(decode(RestoreReply.self, restored).entitlements) == nil)
            #expect(try await pro(system.entitlements(owner).entitlements)?.renewalInfo?.autoRenewStatus == 1, "the owner's series untouched")

            // The same renewal info from its owner applies.
            let (ownStatus, own) = try await system.call(.post, "/v1/restore", as: owner, RestoreRequest(signedTransactions: [], signedRenewalInfos: [signed]))
            #expect(ownStatus == .ok, "\(text(own))")
            #expect(try pro(decode(RestoreReply.self, own).entitlements)?.renewalInfo?.autoRenewStatus == 0)
        }
    }

    @Test("A forged renewal info (signed by a key Apple's roots do not vouch for) does not block the grant and changes nothing")
    func forgedRenewalInfo() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (account, store) = try await system.customer("frg")
            let (purchase, reply) = try await buy(system, Self.monthly, account: account, store: store) { $0.signedRenewalInfo }
            let original = try #require(pro(reply.entitlements)?.originalTransactionId)
            #expect(pro(reply.entitlements)?.renewalInfo?.autoRenewStatus == 1)

            // The genuine one, turned off and dated later, signed again by a certificate authority of the forger's own.
            var renewal = try CompactJWS(try #require(purchase.signedRenewalInfo)).unverifiedPayload(as: JWSRenewalInfoDecodedPayload.self)
            #expect(renewal.originalTransactionId == original)
            renewal.autoRenewStatus = .off
            renewal.autoRenewProductId = "com.example.iapkit.pro.yearly"
            renewal.signedDate = Date().addingTimeInterval(86_400)
            let forged = try Minter(authority: try CertificateAuthority.create()).sign(renewal)

            for bad in [forged, "not.a.jws", String(repeating: "a", count: 20_000)] {
                let (coins, answer) = try await buy(system, Self.coins, account: account, store: store) { _ in bad }
                #expect(answer.outcome == .granted, "a bad renewal info never blocks a paid transaction")
                #expect(answer.transactionId == coins.transactionId)
                #expect(answer.renewalInfoIgnored == "unverified")
                #expect(pro(answer.entitlements)?.renewalInfo?.autoRenewStatus == 1)
            }
            #expect(try await system.entitlements(account).entitlements.balances["coins"] == 300)
            let (status, restored) = try await system.call(.post, "/v1/restore", as: account, RestoreRequest(signedTransactions: [], signedRenewalInfos: [forged]))
            #expect(status == .ok, "\(text(restored))")
            let served = try #require(try pro(decode(RestoreReply.self, restored).entitlements))
            #expect(served.renewalInfo?.autoRenewStatus == 1)
            #expect(served.renewalInfo?.autoRenewProductId == Self.monthly)
        }
    }
}
