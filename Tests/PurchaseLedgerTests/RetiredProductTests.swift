import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("Retired products: no longer sold, still honoured")
struct RetiredProductTests {
    /// The demo catalog with premium and the monthly plan retired (the yearly plan still sold, granting `pro` too).
    static let retiredCatalog: LedgerCatalog = {
        var products = LedgerCatalog.demo.products
        products[Demo.premium] = products[Demo.premium]?.asRetired
        products[Demo.monthly] = products[Demo.monthly]?.asRetired
        products[Demo.season] = products[Demo.season]?.asRetired
        return LedgerCatalog(products: products)
    }()

    @Test("The catalog flag: JSON \"retired\": true is optional (absent or false: sold), kept on encoding, and a retired product is not sold but keeps its rule")
    func flag() throws {
        let json = #"""
            {"products": {"old": {"type": "Non-Consumable", "entitlement": "premium", "retired": true},
                          "new": {"type": "Non-Consumable", "entitlement": "premium"},
                          "kept": {"type": "Consumable", "currency": "coins", "amount": 5, "retired": false}}}
            """#
        let catalog = try JSONDecoder().decode(LedgerCatalog.self, from: Data(json.utf8))
        #expect(catalog.rule(for: "old") == ProductRule.nonConsumable("premium").asRetired)
        #expect(catalog.rule(for: "old")?.isRetired == true && catalog.rule(for: "new")?.isRetired == false && catalog.rule(for: "kept")?.isRetired == false)
        #expect(catalog.rule(for: "old")?.problem == nil, "a retired rule is a complete rule")
        let encoded = String(decoding: try JSONEncoder().encode(catalog.products["old"]), as: UTF8.self)
        #expect(encoded.contains(#""retired":true"#))
        #expect(!String(decoding: try JSONEncoder().encode(catalog.products["new"]), as: UTF8.self).contains("retired"), "absent stays absent")
        #expect(try JSONDecoder().decode(LedgerCatalog.self, from: JSONEncoder().encode(catalog)) == catalog)
    }

    @Test("Entitlements and offers: a retired product's purchases grant exactly as before; no offer is signed for it")
    func rules() throws {
        let now = Date()
        func record(_ product: String, _ type: ProductType, expires: TimeInterval? = nil) throws -> PurchaseRecord {
            try PurchaseRecord(transaction(product, type: type, purchased: now.addingTimeInterval(-10), expires: expires.map { now.addingTimeInterval($0) }))
        }
        let purchases = [try record(Demo.premium, .nonConsumable), try record(Demo.monthly, .autoRenewableSubscription, expires: 3600),
                         try record(Demo.season, .nonRenewingSubscription)]
        let sold = EntitlementRules.entitlements(purchases: purchases, subscriptions: [:], catalog: .demo, now: now)
        let retired = EntitlementRules.entitlements(purchases: purchases, subscriptions: [:], catalog: Self.retiredCatalog, now: now)
        #expect(retired.map(\.name) == ["premium", "pro", "season"])
        #expect(retired == sold)
        let owned = AccountEntitlements(accountId: "a", entitlements: retired, balances: [:])
        let offers = ["winback": PromotionalOfferRule(productIds: [Demo.monthly, Demo.yearly], eligibility: .anyone)]
        func offer(_ productId: String) -> OfferRules.Refusal? {
            guard case .failure(let refusal) = OfferRules.promotionalOffer("winback", productId: productId, rules: offers, catalog: Self.retiredCatalog,
                                                                          purchases: purchases, owned: owned) else { return nil }
            return refusal
        }
        #expect(offer(Demo.monthly) == .productRetired)
        #expect(offer(Demo.yearly) == nil, "the plan still sold")
        #expect(OfferRules.introductoryOfferAllowed(productId: Demo.monthly, catalog: Self.retiredCatalog, purchases: []) == .failure(.productRetired))
        #expect(OfferRules.introductoryOfferAllowed(productId: Demo.yearly, catalog: Self.retiredCatalog, purchases: []) == .success(true))
    }

    @Test("From a .storekit file: a retired grant keeps its product, in the file or gone from it (then its whole rule is needed)")
    func storeKit() throws {
        let grants: [String: ProductRule] = [
            "com.revenuecat.consumable": .consumable(currency: "gems", amount: 5),
            "com.revenuecat.non_renewable": .nonRenewing("season", seconds: 86_400),
            "lifetime": ProductRule(type: .nonConsumable, retired: true),
            "com.example.gone.forever": ProductRule.nonConsumable("forever").asRetired,
        ]
        let catalog = try LedgerCatalog(storeKit: try CatalogRulesTests.storeKit(), grants: grants)
        #expect(catalog.rule(for: "lifetime") == ProductRule.nonConsumable("lifetime").asRetired, "the file's default grant, retired")
        #expect(catalog.rule(for: "com.example.gone.forever") == ProductRule.nonConsumable("forever").asRetired)
        #expect(catalog.rule(for: "lifetime")?.isRetired == true && catalog.rule(for: "com.revenuecat.consumable")?.isRetired == false)
        var incomplete = grants
        incomplete["com.example.gone.forever"] = ProductRule(type: .nonConsumable, retired: true)
        #expect(throws: LedgerError(.invalidInput, "")) { try LedgerCatalog(storeKit: try CatalogRulesTests.storeKit(), grants: incomplete) }
        do { _ = try LedgerCatalog(storeKit: try CatalogRulesTests.storeKit(), grants: incomplete) } catch let error as LedgerError {
            #expect(error.message.contains("com.example.gone.forever: retired and not in the .storekit file: needs an entitlement"), "\(error.message)")
        }
    }

    @Test("An order for a retired product is refused (product_retired) and none is made; paid transactions of it still grant: its order from before, none (another device, a promoted purchase), a renewal, a restore",
          arguments: StoreKind.allCases)
    func ordersAndPayments(_ kind: StoreKind) async throws {
        let sold = try await makeLedger(kind)
        let retired = Ledger(store: sold.store, catalog: Self.retiredCatalog)
        let now = Date()
        let account = uniqueId("retired-")
        let earlier = try await sold.createOrder(accountId: account, productId: Demo.premium, now: now.addingTimeInterval(-600))

        await #expect(throws: LedgerError(.productRetired, "")) { _ = try await retired.createOrder(accountId: account, productId: Demo.premium, now: now) }
        await #expect(throws: LedgerError(.productRetired, "")) { _ = try await retired.createOrder(accountId: account, productId: Demo.monthly, now: now) }
        do { _ = try await retired.createOrder(accountId: account, productId: Demo.premium, now: now) } catch let error as LedgerError {
            #expect(error.code == .productRetired && error.message.contains(Demo.premium), "\(error)")
        }
        _ = try await retired.createOrder(accountId: account, productId: Demo.yearly, now: now)
        let orders = try await retired.timeline(accountId: account).filter { $0.kind == .order }
        #expect(orders.count == 2, "the order from before and the yearly plan's; none for a retired product: \(orders)")
        #expect(!orders.contains { $0.detail.contains(Demo.monthly) })

        // Ask to Buy approved after the product was retired: its order, from before, is fulfilled.
        let approved = transaction(Demo.premium, type: .nonConsumable, purchased: now.addingTimeInterval(-60), token: earlier.appAccountToken)
        let paid = try await retired.submit(.init(accountId: account, orderId: earlier.orderId, transaction: approved), now: now)
        #expect(paid.outcome == .granted && paid.orderId == earlier.orderId)
        #expect(paid.entitlements.entitlements.map(\.name) == ["premium"])
        // A subscription bought on another device (no order), then renewed.
        let original = uniqueId()
        let first = transaction(Demo.monthly, id: original, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-120),
                                expires: now.addingTimeInterval(-60))
        #expect(try await retired.submit(.init(accountId: account, transaction: first), now: now).outcome == .granted)
        let renewal = transaction(Demo.monthly, original: original, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-60),
                                  expires: now.addingTimeInterval(3600))
        #expect(try await retired.submit(.init(accountId: account, transaction: renewal), now: now).outcome == .granted)
        // A season pass restored from a receipt on a new phone.
        let season = transaction(Demo.season, type: .nonRenewingSubscription, purchased: now.addingTimeInterval(-30))
        let restored = try await retired.submitAll([.init(accountId: account, transaction: season, source: .restore)], now: now)
        #expect(try restored[0].get().outcome == .granted)
        let owned = try await retired.entitlements(accountId: account, now: now)
        #expect(owned.entitlements.map(\.name) == ["premium", "pro", "season"])
        #expect(owned.entitlements.first { $0.name == "pro" }?.transactionId == renewal.transactionId, "the renewal is the series' latest period")
        #expect(try await sold.entitlements(accountId: account, now: now) == owned, "exactly what the catalog that sells them answers")
    }

    @Test("ownedProductIds: the products of every stored purchase (refunded and unbound ones too) and of open orders not said to be unpaid; the catalog's missing ones are named, retired ones are not missing",
          arguments: StoreKind.allCases)
    func ownedProducts(_ kind: StoreKind) async throws {
        func check(_ ledger: Ledger) async throws {
            let now = Date()
            let account = uniqueId("owner-")
            for (product, type) in [(Demo.premium, ProductType.nonConsumable), (Demo.coins, .consumable), (Demo.season, .nonRenewingSubscription)] {
                _ = try await ledger.submit(.init(accountId: account, transaction: transaction(product, type: type, purchased: now.addingTimeInterval(-60))), now: now)
            }
            // An expired subscription is still owned (a restore, a resubscription, a refund need its rule)…
            _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.monthly, type: .autoRenewableSubscription,
                                                                                          purchased: now.addingTimeInterval(-7200),
                                                                                          expires: now.addingTimeInterval(-3600))), now: now)
            // …and so are a refunded purchase (Apple may reverse the refund) and a transaction only a notification told of,
            // bound to nobody yet (a restore claims it later).
            _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.yearly, type: .autoRenewableSubscription,
                                                                                          purchased: now.addingTimeInterval(-60), expires: now.addingTimeInterval(3600),
                                                                                          revoked: now.addingTimeInterval(-30))), now: now)
            let unbound = transaction("com.example.iapkit.ac.onetime", type: .consumable, purchased: now.addingTimeInterval(-60))
            _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .oneTimeCharge, subtype: nil, signedDate: now,
                                                         signedPayload: "x", transaction: unbound), now: now)
            // An open order the app said ended unpaid will not be paid (an open one may: Issue32AdversarialLedgerTests).
            let unpaid = try await ledger.createOrder(accountId: account, productId: "com.example.iapkit.ac.subscription", now: now)
            _ = try await ledger.abandonOrder(orderId: unpaid.orderId, accountId: account, reason: "cancelled", now: now)
            #expect(try await ledger.ownedProductIds() == [Demo.premium, Demo.coins, Demo.season, Demo.monthly, Demo.yearly,
                                                            "com.example.iapkit.ac.onetime"])

            #expect(try await ledger.ownedProductsMissingFromCatalog() == [])
            var products = LedgerCatalog.demo.products
            products[Demo.premium] = nil
            products[Demo.coins] = nil
            products[Demo.yearly] = nil
            products["com.example.iapkit.ac.onetime"] = nil
            products["com.example.iapkit.ac.subscription"] = nil
            let dropped = Ledger(store: ledger.store, catalog: LedgerCatalog(products: products))
            #expect(try await dropped.ownedProductsMissingFromCatalog() == ["com.example.iapkit.ac.onetime", Demo.coins, Demo.premium, Demo.yearly],
                    "sorted; the order said to be unpaid names nothing")
            products[Demo.premium] = ProductRule.nonConsumable("premium").asRetired
            products[Demo.coins] = ProductRule.consumable(currency: "coins", amount: 100).asRetired
            products[Demo.yearly] = ProductRule.autoRenewable("pro").asRetired
            products["com.example.iapkit.ac.onetime"] = ProductRule.consumable(currency: "credits", amount: 1).asRetired
            #expect(try await Ledger(store: ledger.store, catalog: LedgerCatalog(products: products)).ownedProductsMissingFromCatalog() == [])
        }
        switch kind {
        case .sqlite:
            try await check(try await makeLedger(.sqlite))
        case .postgres:
            // A database of its own: the shared one holds every other test's purchases.
            try await withOwnPostgresDatabase("owned_") { url in
                let ledger = Ledger(store: try await PostgresLedgerStore(url: url), catalog: .demo)
                try await ledger.migrate()
                try await check(ledger)
            }
        }
    }
}
