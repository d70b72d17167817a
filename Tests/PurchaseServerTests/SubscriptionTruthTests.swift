import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// Walks a subscription through what real sandbox data showed the server getting wrong — upgrade, auto-renew off,
/// a refund of a past period, expiry, resubscribing, a downgrade — with the server learning everything after the
/// first purchase from notifications alone, and at every step compares the server's `pro` with the simulator's own
/// record of the series (its status and latest transaction: what Apple would answer).
@Suite("Subscriptions judged as Apple judges them, step by step against the App Store's truth", .timeLimit(.minutes(3)))
struct SubscriptionTruthTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    /// What the App Store says the account is entitled to now: the product of a series whose status is active or in
    /// its grace period, and which.
    func truth(_ system: System, _ original: String) async throws -> (productId: String, state: String)? {
        let statuses = try await system.engine.subscriptionStatuses(containing: original)
        for item in statuses where item.status == .active || item.status == .billingGracePeriod {
            return (item.latest.productId ?? "", item.status == .active ? "active" : "gracePeriod")
        }
        return nil
    }

    func pro(_ system: System, _ account: String) async throws -> (productId: String, state: String)? {
        let owned = try await system.entitlements(account)
        guard let item = owned.entitlements.entitlement("pro") else { return nil }
        return (item.productId, item.state.rawValue)
    }

    /// Checks the server against the store now; returns the store's answer so a walk can assert it went where meant.
    @discardableResult
    func agree(_ system: System, _ account: String, _ original: String, _ step: String,
               sourceLocation: SourceLocation = #_sourceLocation) async throws -> (productId: String, state: String)? {
        let expected = try await truth(system, original)
        let actual = try await pro(system, account)
        #expect(actual?.productId == expected?.productId && actual?.state == expected?.state,
                "\(step): the App Store says \(String(describing: expected)), the server \(String(describing: actual))", sourceLocation: sourceLocation)
        return expected
    }


    func walk(_ kind: LedgerKind, faults: NotificationFaults) async throws {
        try await System.run(kind, faults: faults) { system in
            let (account, store) = try await system.customer("truth")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let original = try #require(purchase.transactionId)
            #expect(try await agree(system, account, original, "bought")?.productId == Self.monthly)
            try await system.advance(by: 180 + 301)
            try await agree(system, account, original, "renewed")

            // Upgrade in the store: the monthly's own transaction never says isUpgraded in a notification.
            _ = try await system.device(.post, "/sim/purchases", ["account": store, "device": "phone", "productId": Self.yearly])
            try await system.advance(by: 0)
            #expect(try await agree(system, account, original, "upgraded")?.productId == Self.yearly)
            // Then cancelled: access lasts to the end of the paid period.
            _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": false])
            try await system.advance(by: 60)
            #expect(try await agree(system, account, original, "auto-renew off")?.productId == Self.yearly)
            // A refund of the first (past) period, signed after everything else: the current period stands.
            _ = try await system.device(.post, "/sim/transactions/\(original)/refund")
            try await system.advance(by: 60)
            #expect(try await agree(system, account, original, "past period refunded")?.productId == Self.yearly)
            // Expiry.
            try await system.advance(by: 3700)
            #expect(try await agree(system, account, original, "expired") == nil)
            // Resubscribe to the monthly, then downgrade is moot; refund the current period.
            let again = try await system.storePurchase(["account": store, "device": "phone", "productId": Self.monthly])
            try await system.advance(by: 0)
            #expect(try await agree(system, account, original, "resubscribed")?.productId == Self.monthly)
            let current = try #require(again.transactionId)
            _ = try await system.device(.post, "/sim/transactions/\(current)/refund")
            try await system.advance(by: 0)
            #expect(try await agree(system, account, original, "current period refunded") == nil)
        }
    }

    @Test("Upgrade, cancel, refund of a past period, expiry, resubscribe, refund", arguments: LedgerKind.allCases)
    func upgradeCancelRefund(_ kind: LedgerKind) async throws {
        try await walk(kind, faults: NotificationFaults())
    }

    @Test("The same with every notification twice and out of order")
    func reordered() async throws {
        try await walk(.sqlite, faults: NotificationFaults(duplicate: true, outOfOrder: true))
    }

    @Test("An upgrade refunded at once leaves nothing: the earlier product does not come back", arguments: LedgerKind.allCases)
    func upgradeRefunded(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let (account, store) = try await system.customer("upref")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let original = try #require(purchase.transactionId)
            try await system.advance(by: 190)
            #expect(try await agree(system, account, original, "paid monthly period")?.productId == Self.monthly)
            let upgrade = try await system.storePurchase(["account": store, "device": "phone", "productId": Self.yearly])
            try await system.advance(by: 0)
            #expect(try await agree(system, account, original, "upgraded")?.productId == Self.yearly)
            let upgradeId = try #require(upgrade.transactionId)
            _ = try await system.device(.post, "/sim/transactions/\(upgradeId)/refund")
            try await system.advance(by: 10)
            #expect(try await agree(system, account, original, "upgrade refunded") == nil,
                    "the monthly's nominal expiry is still ahead, but the series' latest period was refunded")
        }
    }

    @Test("A downgrade takes effect at the next renewal, not before")
    func downgrade() async throws {
        try await System.run { system in
            let (account, store) = try await system.customer("down")
            let (_, purchase, _) = try await system.buy(Self.yearly, account: account, storeAccount: store)
            let original = try #require(purchase.transactionId)
            _ = try await system.device(.post, "/sim/purchases", ["account": store, "device": "phone", "productId": Self.monthly])
            try await system.advance(by: 60)
            #expect(try await agree(system, account, original, "downgrade chosen")?.productId == Self.yearly)
            try await system.advance(by: 3700)
            #expect(try await agree(system, account, original, "renewed as the monthly")?.productId == Self.monthly)
        }
    }
}
