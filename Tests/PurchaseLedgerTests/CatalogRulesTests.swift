import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("The server's catalog from a .storekit file, and entitlement rules")
struct CatalogRulesTests {
    static func storeKit() throws -> StoreKitConfiguration {
        let path = (ProcessInfo.processInfo.environment["IAPKIT_SHARED"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("shared").path) + "/catalogs/revenuecat-unittests.storekit"
        return try StoreKitConfiguration(data: Array(try #require(FileManager.default.contents(atPath: path), "missing \(path)")))
    }

    @Test("Defaults: a non-consumable grants its id, every plan of a group grants the group's name; consumables and non-renewing need grants")
    func fromStoreKit() throws {
        #expect(throws: LedgerError(.invalidInput, "")) { try LedgerCatalog(storeKit: try Self.storeKit()) }
        do { _ = try LedgerCatalog(storeKit: try Self.storeKit()) } catch let error as LedgerError {
            #expect(error.message.contains("com.revenuecat.consumable"))
            #expect(error.message.contains("com.revenuecat.non_renewable"))
        }
        let catalog = try LedgerCatalog(storeKit: try Self.storeKit(), grants: [
            "com.revenuecat.consumable": .consumable(currency: "gems", amount: 5),
            "com.revenuecat.non_renewable": .nonRenewing("season", seconds: 86_400),
        ])
        #expect(catalog.rule(for: "lifetime") == .nonConsumable("lifetime"))
        #expect(catalog.rule(for: "com.revenuecat.monthly_4.99.1_week_intro")?.entitlement == "subscription_group_1")
        #expect(catalog.rule(for: "com.revenuecat.annual_39.99.2_week_intro")?.entitlement == "subscription_group_1")
        #expect(catalog.rule(for: "com.revenuecat.annual_39.99_no_trial")?.entitlement == "subscription_group_2")
        #expect(catalog.rule(for: "com.revenuecat.consumable")?.amount == 5)
        #expect(catalog.products.count == 7)
    }

    @Test("A grant whose type contradicts the file, or for a product the file lacks, is refused")
    func contradictions() throws {
        #expect(throws: LedgerError(.invalidInput, "")) {
            try LedgerCatalog(storeKit: try Self.storeKit(), grants: [
                "com.revenuecat.consumable": .consumable(currency: "gems", amount: 5),
                "com.revenuecat.non_renewable": .nonRenewing("season", seconds: 86_400),
                "lifetime": .consumable(currency: "gems", amount: 1),
            ])
        }
        #expect(throws: LedgerError(.invalidInput, "")) {
            try LedgerCatalog(storeKit: try Self.storeKit(), grants: [
                "com.revenuecat.consumable": .consumable(currency: "gems", amount: 5),
                "com.revenuecat.non_renewable": .nonRenewing("season", seconds: 86_400),
                "not.in.the.file": .nonConsumable("x"),
            ])
        }
    }

    @Test("Entitlement rules: lifetime beats an expiry, the latest expiry wins, upgraded and revoked periods grant nothing")
    func rules() throws {
        let now = Date()
        func record(_ product: String, _ type: ProductType, expires: TimeInterval? = nil, upgraded: Bool = false, revoked: Bool = false) throws -> PurchaseRecord {
            var payload = JWSTransactionDecodedPayload()
            payload.transactionId = UUID().uuidString
            payload.productId = product
            payload.type = type
            payload.purchaseDate = now.addingTimeInterval(-10)
            payload.expiresDate = expires.map { now.addingTimeInterval($0) }
            payload.isUpgraded = upgraded
            payload.revocationDate = revoked ? now : nil
            return try PurchaseRecord(payload)
        }
        let catalog = LedgerCatalog(products: ["life": .nonConsumable("pro"), "month": .autoRenewable("pro"), "year": .autoRenewable("plus")])
        let owned = EntitlementRules.entitlements(purchases: [
            try record("month", .autoRenewableSubscription, expires: 100), try record("life", .nonConsumable),
            try record("year", .autoRenewableSubscription, expires: 5000, upgraded: true), try record("year", .autoRenewableSubscription, expires: 200),
            try record("year", .autoRenewableSubscription, expires: 9000, revoked: true),
        ], subscriptions: [:], catalog: catalog, now: now)
        #expect(owned.map(\.name) == ["plus", "pro"])
        #expect(owned[1].expiresAt == nil, "lifetime wins")
        #expect(abs(owned[0].expiresAt!.timeIntervalSince(now) - 200) < 0.01, "upgraded and revoked periods are ignored")
    }

    @Test("A subscription's first period is INITIAL_PURCHASE for the app's backend; the first period of a plan migrated to the Advanced Commerce API is PRODUCT_CHANGE; later periods RENEWAL")
    func migrationEvent() throws {
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = "20"
        payload.originalTransactionId = "20"
        payload.productId = "generic"
        payload.type = .autoRenewableSubscription
        payload.purchaseDate = Date()
        #expect(WebhookRules.grantEvent(try PurchaseRecord(payload), account: "a", now: Date())?.type == .initialPurchase)
        payload.previousOriginalTransactionId = "10"
        #expect(WebhookRules.grantEvent(try PurchaseRecord(payload), account: "a", now: Date())?.type == .productChange)
        payload.transactionId = "21"
        #expect(WebhookRules.grantEvent(try PurchaseRecord(payload), account: "a", now: Date())?.type == .renewal)
    }
}
