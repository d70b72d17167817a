import AppStoreFormats
import Foundation
import IAPKit
import IAPTestSupport
import PurchaseAPI
import StoreSimulator
import Testing

/// The SDK's paths that only a store answering as the App Store reaches: what the Apple ID already owns answered with
/// the transaction that bought it, and Ask to Buy naming its request.
@Suite("PurchaseClient against a simulator that answers as the App Store: owned purchases and Ask to Buy requests", .timeLimit(.minutes(3)))
struct OwnedPurchaseFlowTests {
    static let premium = "com.example.iapkit.premium"

    @Test("Account B buys a non-consumable the Apple ID already bought for account A: the store answers A's transaction, the purchase ends deliveredToOwner, and Apple charged once")
    func deliveredToOwner() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-household"])
            let app = try App.launch(system, account: "ann", storeAccount: "store-household")
            guard case .granted(let owned) = await app.client.purchase(Self.premium) else { Issue.record("ann's purchase was not granted"); return }
            #expect(owned.has("premium"))
            let charged = await system.engine.recordedTransactions().filter { $0.account == "store-household" }
            let first = try #require(charged.first?.payload.transactionId)
            #expect(charged.count == 1)

            await app.signIn("ben")
            #expect(await app.client.purchase(Self.premium) == .deliveredToOwner(transactionId: first))
            #expect(try await app.client.entitlements().has("premium") == false, "ben was given nothing: the purchase is ann's")
            #expect(await system.engine.recordedTransactions().filter { $0.account == "store-household" }.count == 1, "Apple charged once")
            #expect(await system.engine.notifications().filter { $0.type == .oneTimeCharge }.count == 1)
            // ben's order was never paid (the store answered ann's transaction): it ends, and the server hears why.
            #expect(app.journalEntries.isEmpty, "\(app.journalEntries)")
            #expect(await eventually {
                let listed = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=abandoned").1).orders
                return listed.contains { $0.accountId == "ben" && $0.abandonReason == "alreadyOwned" }
            })
        }
    }

    @Test("Ask to Buy: the pendingApproval event names the simulator's request, GET /sim/requests lists it, and approving that id delivers it")
    func askToBuyRequestId() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-kit", "askToBuy": true])
            let app = try App.launch(system, account: "kit", storeAccount: "store-kit")
            await app.client.start()
            let events = app.client.events
            let named = Task { () -> String? in
                for await event in events { if case .pendingApproval(Self.premium, let requestId) = event { return requestId } }
                return nil
            }
            let timeout = Task { try await Task.sleep(for: .seconds(20)); named.cancel() }
            #expect(await app.client.purchase(Self.premium) == .pendingApproval)
            let requestId = try #require(await named.value)
            timeout.cancel()

            let listed = try JSONDecoder().decode(Requests.self, from: try await system.device(.get, "/sim/requests?account=store-kit")).requests
            #expect(listed.map(\.requestId) == [requestId])
            #expect(listed.first?.productId == Self.premium)
            _ = try await system.device(.post, "/sim/requests/\(requestId)/approve")
            var granted = false
            for await state in app.client.entitlementUpdates where state.entitlements?.has("premium") == true { granted = true; break }
            #expect(granted)
            await app.client.stop()
        }
    }

    struct Requests: Decodable {
        struct Request: Decodable { var requestId: String; var productId: String }
        var requests: [Request]
    }
}
