import Foundation
import IAPKit
import IAPTestSupport
import PurchaseAPI
import Testing

/// StoreKit's own views (`SubscriptionStoreView`, `StoreView`, `ProductView`) pay by themselves; the SDK's modifier gives
/// each payment an order (`.inAppPurchaseOptions`) and takes what completes (`onInAppPurchaseCompletion`). Here the
/// simulator's store pays as the view would, with the options the SDK gave, and the real server judges.
@Suite("Purchases made in StoreKit's views are ordered, journaled and delivered like purchase(_:)", .timeLimit(.minutes(3)))
struct StoreViewPurchaseTests {
    static let monthly = "com.example.iapkit.pro.monthly"

    func grantedOrders(_ system: System) async throws -> [AdminOrder] {
        try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
    }

    @Test("The view's payment carries the order's token; its completion is delivered, bound to that order, and finished")
    func completed() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-vic"])
            let app = try App.launch(system, account: "vic", storeAccount: "store-vic")
            await app.client.start()
            let token = try #require(await app.client.storeViewOrder(for: Self.monthly))
            let paid = try await app.store.purchase(StorePurchaseRequest(productId: Self.monthly, appAccountToken: token))
            guard case .granted(let owned) = await app.client.storeViewPurchaseCompleted(productId: Self.monthly, result: .success(paid)) else {
                Issue.record("not granted"); return
            }
            #expect(owned.has("pro"))
            #expect(try await grantedOrders(system).contains { $0.accountId == "vic" && $0.productId == Self.monthly })
            #expect(try await app.store.unfinished().isEmpty)
            #expect(app.journalEntries.isEmpty)
            await app.client.stop()
        }
    }

    @Test("The app dies after the view's payment, before its completion: the next launch finds the order by the payment's token; with another account signed in the payment waits for the one that ordered it, and is delivered to it when it signs in")
    func diedBeforeCompletion() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-wen"])
            let app = try App.launch(system, account: "wen", storeAccount: "store-wen")
            let token = try #require(await app.client.storeViewOrder(for: Self.monthly))
            _ = try await app.store.purchase(StorePurchaseRequest(productId: Self.monthly, appAccountToken: token))
            await app.client.stop()
            // Relaunched on the same device and journal, with Xan signed in.
            let next = try App.launch(system, account: "xan", storeAccount: "store-wen", journal: app.journalDirectory)
            await next.client.start()
            #expect(next.journalEntries.contains { $0.kind == .paid && $0.accountId == "wen" }, "journaled as the payment of the account that ordered it")
            #expect(try await next.store.unfinished().count == 1, "not finished under Xan")
            #expect(try await system.entitlements("xan").entitlements.has("pro") == false)
            await next.signIn("wen")
            #expect(await eventually(30) { try await next.store.unfinished().isEmpty })
            #expect(try await system.entitlements("wen").entitlements.has("pro"), "delivered to the account whose order it was")
            #expect(try await grantedOrders(system).contains { $0.accountId == "wen" && $0.productId == Self.monthly })
            await next.client.stop()
        }
    }

    @Test("The customer's own tools through PurchaseClient: a cancellation in the manage sheet reaches the server, a refund asked for reaches Apple's side, an offer code redeemed in the sheet is delivered to the signed-in account")
    func customerTools() async throws {
        try await System.run(.init(deliver: true)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-yan"])
            let app = try App.launch(system, account: "yan", storeAccount: "store-yan")
            await app.client.start()
            guard case .granted = await app.client.purchase(Self.monthly) else { Issue.record("not granted"); return }
            let bought = try #require(try await system.entitlements("yan").entitlements.entitlements.first { $0.name == "pro" })
            await app.store.setManageSubscriptionsAction(.turnOffAutoRenew(bought.originalTransactionId ?? bought.transactionId))
            try await app.client.showManageSubscriptions()
            let original = bought.originalTransactionId ?? bought.transactionId
            #expect(await eventually(30) {
                try decode(NotificationsReply.self, await system.admin(.get, "/admin/notifications").1).notifications.contains {
                    $0.notificationType == "DID_CHANGE_RENEWAL_STATUS" && $0.subtype == "AUTO_RENEW_DISABLED" && $0.originalTransactionId == original
                }
            }, "the server heard that the customer turned renewal off")
            #expect(try await app.client.requestRefund(for: bought.transactionId) == .success)
            let asked = try decode(SimRefundRequest.self, await system.device(.get, "/sim/transactions/\(bought.transactionId)/refund-request"))
            #expect(asked.decision == nil, "Apple has the request and has not decided yet")
            await app.client.stop()

            _ = try await system.device(.post, "/sim/accounts", ["id": "store-zoe"])
            let coder = try App.launch(system, account: "zoe", storeAccount: "store-zoe")
            await coder.client.start()
            await coder.store.setOfferCodeToRedeem(productId: Self.monthly, offerId: "PRO-FRIENDS")
            try await coder.client.presentOfferCodeRedeemSheet()
            #expect(await eventually(30) { try await system.entitlements("zoe").entitlements.has("pro") }, "the redeemed code reached Zoe's account")
            #expect(await eventually(30) { try await coder.store.unfinished().isEmpty })
            await coder.client.stop()
        }
    }
}
