import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPKit
import IAPTestSupport
import PurchaseAPI
import PurchaseServer
import Testing

/// What a customer and an operator rely on around an order: a device the server's policy refuses is refused before it
/// pays; an order whose payment ended with nothing charged is not listed as lost; the offline answer is the server's
/// signed one, judged by when the server issued it rather than by a clock the customer sets.
@Suite("Orders and offline answers tell the truth", .timeLimit(.minutes(3)))
struct OrderHonestyTests {
    static let premium = "com.example.iapkit.premium"

    func orders(_ system: System, _ state: String, of account: String) async throws -> [AdminOrder] {
        try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=\(state)").1).orders.filter { $0.accountId == account }
    }

    @Test("Under the refuse policy an order from a device reporting jailbreak signals is 403 device_integrity, no order is made, and the SDK never opens the payment sheet",
          arguments: LedgerKind.allCases)
    func refusedBeforePayment(kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false, refuseSuspiciousDevices: true)) { system in
            let (account, storeAccount) = try await system.customer("ivy")
            let refused = try await system.call(.post, "/v1/orders", as: account,
                                                OrderRequest(productId: Self.premium, deviceIntegrity: DeviceIntegrityReport(signals: ["known-paths"], applicable: true)))
            #expect(refused.0 == .forbidden)
            #expect(try errorCode(refused.1) == .deviceIntegrity)
            #expect(try await orders(system, "created", of: account).isEmpty, "no order was made")

            let app = try App.launch(system, account: account, storeAccount: storeAccount,
                                     deviceIntegrity: DeviceIntegrity(signals: ["dyld-insert"], applicable: true))
            guard case .failed(let failure) = await app.client.purchase(Self.premium) else { Issue.record("the purchase was not refused"); return }
            #expect(failure.code == .deviceRefused)
            #expect(await system.engine.notifications().isEmpty, "the store charged nothing: no payment was started")
            #expect(app.journalEntries.isEmpty)
            #expect(try await orders(system, "created", of: account).isEmpty)

            // A device whose checks found nothing, or an app that sends no report, orders as ever.
            let clean = try await system.call(.post, "/v1/orders", as: account,
                                              OrderRequest(productId: Self.premium, deviceIntegrity: DeviceIntegrityReport(signals: [], applicable: true)))
            #expect(clean.0 == .created)
            #expect(try await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: Self.premium)).0 == .created)
        }
        // What the account already holds, sent again from a device that now reports signals, is answered as held: a
        // refusal would keep that device from ever finishing it. Anything else from it is refused as before.
        try await System.run(.init(kind: kind, deliver: false, refuseSuspiciousDevices: true)) { system in
            let (account, storeAccount) = try await system.customer("lia")
            let (order, purchase, reply) = try await system.buy(Self.premium, account: account, storeAccount: storeAccount)
            #expect(reply?.outcome == .granted)
            let jws = try #require(purchase.signedTransaction)
            let flagged = DeviceIntegrityReport(signals: ["known-paths"], applicable: true)
            let again = try await system.call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: jws, orderId: order.orderId, deviceIntegrity: flagged))
            #expect(again.0 == .ok)
            #expect(try decode(PurchaseReply.self, again.1).outcome == .alreadyGranted)
            let (stranger, _) = try await system.customer("max")
            let foreign = try await system.call(.post, "/v1/purchases", as: stranger, PurchaseRequest(signedTransaction: jws, deviceIntegrity: flagged))
            #expect(foreign.0 == .forbidden, "not the stranger's: refused by the policy as before")
        }
        // The default policy records the report and lets the order through.
        try await System.run(.init(kind: kind, deliver: false)) { system in
            let (account, _) = try await system.customer("jo")
            let ordered = try await system.call(.post, "/v1/orders", as: account,
                                                OrderRequest(productId: Self.premium, deviceIntegrity: DeviceIntegrityReport(signals: ["known-paths"], applicable: true)))
            #expect(ordered.0 == .created)
        }
    }

    @Test("A cancelled or refused payment is reported by the SDK: the stuck list holds only the order whose end nobody told", arguments: LedgerKind.allCases)
    func stuckListIsHonest(kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false)) { system in
            let (account, storeAccount) = try await system.customer("fay")
            let app = try App.launch(system, account: account, storeAccount: storeAccount)
            await app.store.setNextOutcome("userCancelled")
            #expect(await app.client.purchase(Self.premium) == .cancelled)
            await app.store.setNextOutcome("failed")
            guard case .failed = await app.client.purchase(Self.premium) else { Issue.record("expected a failure"); return }
            // An app killed while its payment sheet was up: nobody says how that order ended.
            let silent = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: Self.premium)).1)

            #expect(await eventually { try await orders(system, "abandoned", of: account).count == 2 }, "the SDK reports both ends")
            let abandoned = try await orders(system, "abandoned", of: account)
            #expect(Set(abandoned.compactMap(\.abandonReason)) == ["cancelled", "failed"])
            #expect(abandoned.allSatisfy { $0.abandonedAt != nil && $0.state == "created" })
            try await system.advance(by: 2 * 86_400)
            #expect(try await orders(system, "stuck", of: account).map(\.orderId) == [silent.orderId])
        }
    }

    @Test("The app's word that nothing was charged changes nothing else: a payment that still arrives is granted to the order; another account cannot say it; a paid order is not marked")
    func abandonIsOnlyAWord() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (ann, annStore) = try await system.customer("ann")
            let (bob, _) = try await system.customer("bob")
            let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: ann, OrderRequest(productId: Self.premium)).1)
            let path = "/v1/orders/\(order.orderId)/abandon"

            let foreign = try await system.call(.post, path, as: bob, OrderAbandonRequest(reason: .cancelled))
            #expect(foreign.0 == .notFound)
            #expect(try errorCode(foreign.1) == .orderNotFound)
            let odd = try await system.server.execute(uri: path, method: .post,
                                                      headers: [.authorization: "Bearer \(try await system.token(ann))", .contentType: "application/json"],
                                                      body: ByteBuffer(string: #"{"reason":"shrug"}"#))
            #expect(odd.status == .badRequest, "a reason the contract does not name is refused, not recorded")
            #expect(try await orders(system, "abandoned", of: ann).isEmpty)

            #expect(try decode(OrderAbandonReply.self, await system.call(.post, path, as: ann, OrderAbandonRequest(reason: .cancelled)).1).recorded)
            #expect(try decode(OrderAbandonReply.self, await system.call(.post, path, as: ann, OrderAbandonRequest(reason: .failed)).1).recorded == false,
                    "said once")
            #expect(try await orders(system, "abandoned", of: ann).map(\.abandonReason) == ["cancelled"])

            // The store charged after all: the payment carrying the order's token is granted to that order.
            let paid = try await system.storePurchase(["account": annStore, "device": "phone", "productId": Self.premium,
                                                       "appAccountToken": order.appAccountToken.lowercasedString])
            let jws = try #require(paid.signedTransaction)
            let reply = try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: ann, PurchaseRequest(signedTransaction: jws, orderId: order.orderId)).1)
            #expect(reply.outcome == .granted)
            #expect(reply.orderId == order.orderId)
            #expect(try await orders(system, "abandoned", of: ann).isEmpty)
            #expect(try await orders(system, "granted", of: ann).map(\.orderId) == [order.orderId])
            let late = try decode(OrderAbandonReply.self, await system.call(.post, path, as: ann, OrderAbandonRequest(reason: .cancelled)).1)
            #expect(late.recorded == false)
            #expect(late.state == "granted")
        }
    }

    @Test("Offline answers are the server's signed ones: an edited copy grants nothing more, and a clock set back before the answer was issued or an answer past the maximum age is not served")
    func offlineSignedAndClockSafe() async throws {
        var options = System.Options(deliver: false)
        options.signEntitlements = true
        try await System.run(options) { system in
            let (account, storeAccount) = try await system.customer("wes")
            let verifier = try EntitlementsVerifier(publicKeyPEM: String(buffer: try await system.server.execute(uri: "/v1/keys/entitlements", method: .get).body))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
            let cache = try FileEntitlementsCache(directory: directory)
            let app = try App.launch(system, account: account, storeAccount: storeAccount, verifier: verifier, cache: cache)
            guard case .granted = await app.client.purchase(Self.premium) else { Issue.record("not granted"); return }
            let kept = try #require(try cache.load(accountId: account))
            #expect(kept.signedEntitlements != nil && kept.nonce != nil, "the copy keeps the server's signature")

            /// A later launch with no network, the device's clock at `clock`.
            func offline(at clock: Date? = nil) async throws -> Entitlements? {
                let launched = try App.launch(system, account: account, storeAccount: storeAccount, verifier: verifier, cache: cache)
                launched.offline.value = true
                if let clock { await launched.client.setClock { clock } }
                return await launched.client.offlineEntitlements()
            }
            let served = try #require(try await offline())
            #expect(served.has("premium"))
            #expect(served.cachedAt != nil)
            #expect(try await offline(at: Date().addingTimeInterval(-86_400)) == nil, "a clock set back before the answer was issued")
            #expect(try await offline(at: Date().addingTimeInterval(8 * 86_400)) == nil, "older than the week an answer is served for")
            #expect(try await offline(at: Date().addingTimeInterval(6 * 86_400))?.has("premium") == true)

            // The file edited on the device: only what the signature covers is served.
            var edited = kept
            edited.entitlements.entitlements.append(.init(name: "pro", productId: "com.example.iapkit.pro.yearly", transactionId: "1", expiresAt: nil, state: .active))
            try cache.save(edited)
            let afterEdit = try #require(try await offline())
            #expect(afterEdit.has("premium") && !afterEdit.has("pro"))
            // Its signature removed: not served at all to a client that believes signed answers only.
            try cache.save(CachedEntitlements(entitlements: edited.entitlements, cachedAt: Date()))
            #expect(try await offline() == nil)
        }
    }
}
