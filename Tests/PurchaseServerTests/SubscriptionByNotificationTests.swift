import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

@Suite("A subscription kept current by notifications alone", .timeLimit(.minutes(3)))
struct SubscriptionByNotificationTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    /// The `pro` entitlement as the server answers it: its state and product, or nil.
    func pro(_ system: System, _ account: String) async throws -> (state: String, productId: String)? {
        let owned = try await system.entitlements(account)
        guard let item = owned.entitlements.entitlement("pro") else { return nil }
        return (item.state.rawValue, item.productId)
    }

    /// Renewals, billing failure → grace → billing retry → recovery, upgrade, auto-renew off → expiry; the app submits
    /// only its first purchase. With `faults`, every notification arrives twice and in shuffled batches.
    func walk(_ kind: LedgerKind, faults: NotificationFaults) async throws {
        try await System.run(kind, faults: faults) { system in
            let (account, store) = try await system.customer("sub")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let original = try #require(purchase.transactionId)
            #expect(try await pro(system, account)?.state == "active")

            // The free week, then renewals: each DID_RENEW keeps pro going.
            try await system.advance(by: 180 + 300 + 300)
            #expect(try await pro(system, account)?.state == "active")
            // Billing fails at the next renewal: grace period keeps pro; when grace ends, pro ends.
            _ = try await system.device(.post, "/sim/accounts", ["id": store, "billingFails": true])
            try await system.advance(by: 301)
            #expect(try await pro(system, account)?.state == "gracePeriod")
            try await system.advance(by: 16 * 180.0 / 7)
            #expect(try await pro(system, account) == nil, "billing retry without grace: not entitled")
            // Billing works again: recovered.
            _ = try await system.device(.post, "/sim/accounts", ["id": store, "billingFails": false])
            try await system.advance(by: 0)
            #expect(try await pro(system, account)?.state == "active")
            // Upgrade in the store: the server learns it from DID_CHANGE_RENEWAL_PREF / UPGRADE.
            _ = try await system.device(.post, "/sim/purchases", ["account": store, "device": "phone", "productId": Self.yearly])
            try await system.advance(by: 0)
            #expect(try await pro(system, account)?.productId == Self.yearly)
            // Auto-renew off: pro lasts until the year ends, then expires.
            _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": false])
            try await system.advance(by: 3000)
            #expect(try await pro(system, account)?.productId == Self.yearly)
            try await system.advance(by: 601)
            #expect(try await pro(system, account) == nil)
            // Every notification Apple sent is stored, once; the series' log holds nothing else (by id: on PostgreSQL
            // other tests write to the same database, so a count of the table proves nothing).
            let told = Set(await system.engine.notifications().map(\.uuid))
            #expect(try await system.services.ledger.knownNotifications(Array(told)) == told)
            let stored = try await system.services.ledger.notifications(originalTransactionId: original, limit: 10_000).map(\.notificationUUID)
            #expect(stored.count == Set(stored).count && Set(stored).isSubset(of: told) && stored.count >= 10, "\(stored.count) stored of \(told.count) told")
        }
    }


    @Test("Renewals, grace, billing retry, recovery, upgrade and expiry from notifications", arguments: LedgerKind.allCases)
    func lifecycle(_ kind: LedgerKind) async throws {
        try await walk(kind, faults: NotificationFaults())
    }

    @Test("The same, with every notification delivered twice and out of order")
    func duplicatedAndReordered() async throws {
        try await walk(.sqlite, faults: NotificationFaults(duplicate: true, outOfOrder: true))
    }
}
