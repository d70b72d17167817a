import AppStoreFormats
import Foundation
import StoreSimulator
import Testing

@Suite("The simulator's catalog, from a real Xcode .storekit file")
struct CatalogTests {
    static func storeKit() throws -> StoreKitConfiguration {
        try StoreKitConfiguration(data: shared("catalogs/revenuecat-unittests.storekit"))
    }

    /// A file of `../shared` (or `IAPKIT_SHARED`), read in place.
    static func shared(_ name: String) throws -> [UInt8] {
        let path = (ProcessInfo.processInfo.environment["IAPKIT_SHARED"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("shared").path) + "/" + name
        return Array(try #require(FileManager.default.contents(atPath: path), "missing \(path): the tests need ../shared beside the repository"))
    }

    @Test("All four product types, groups with levels, intro and promotional offers, prices in milliunits")
    func loadsRealFile() throws {
        let catalog = try SimulatorCatalog(storeKit: Self.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat", appAppleId: 42))
        let types = Set(catalog.products.map(\.type))
        #expect(types == [.consumable, .nonConsumable, .nonRenewingSubscription, .autoRenewableSubscription])
        let lifetime = try #require(catalog.product("lifetime"))
        #expect(lifetime.type == .nonConsumable)
        #expect(lifetime.price == 199_990)
        let monthly = try #require(catalog.product("com.revenuecat.monthly_4.99.1_week_intro"))
        #expect(monthly.price == 4_990)
        #expect(monthly.period == SubscriptionPeriod(value: 1, unit: .month))
        #expect(monthly.introductoryOffer?.discountType == .freeTrial)
        #expect(monthly.promotionalOffers.map(\.offerId).contains("com.revenuecat.monthly_4.99.1_week_intro.year_discount"))
        #expect(monthly.promotionalOffers.first?.price == 40_990)
        let annual = try #require(catalog.product("com.revenuecat.annual_39.99.2_week_intro"))
        #expect(annual.introductoryOffer?.period == SubscriptionPeriod(value: 2, unit: .week))
        let group = catalog.group(try #require(monthly.subscriptionGroupIdentifier))
        #expect(group.count == 3)
        #expect(group.allSatisfy { $0.groupLevel != nil })
        // "lifetime" lacks the bundle-id prefix: loaded, with a warning.
        #expect(catalog.warnings.contains { $0.contains("lifetime") })
    }

    @Test("Duplicate product ids are refused")
    func duplicates() throws {
        var settings = CatalogSettings(bundleId: "com.revenuecat")
        settings.products = [try #require(Self.storeKit().products.first)]
        #expect(throws: SimulatorError.self) { _ = try SimulatorCatalog(storeKit: Self.storeKit(), settings: settings) }
    }

    @Test("A deleted product id can never be used again")
    func deletedIds() throws {
        var settings = CatalogSettings(bundleId: "com.revenuecat")
        settings.deletedProductIds = ["lifetime"]
        #expect(throws: SimulatorError.catalog("product id lifetime was deleted and can never be used again")) {
            _ = try SimulatorCatalog(storeKit: Self.storeKit(), settings: settings)
        }
        var catalog = try SimulatorCatalog(storeKit: Self.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat"))
        catalog.delete("lifetime")
        #expect(catalog.product("lifetime") == nil)
        #expect(throws: SimulatorError.self) {
            _ = try SimulatorCatalog(storeKit: Self.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat"), retired: catalog.retiredProductIds)
        }
    }

    @Test("Settings JSON adds bundle id, app Apple id and storefront prices; bad files are typed errors")
    func settingsJSON() throws {
        let json = #"{"bundleId":"com.revenuecat","appAppleId":99,"storefrontPrices":{"lifetime":{"JPN":{"currency":"JPY","price":30000000}}}}"#
        let settings = try CatalogSettings(data: Array(json.utf8))
        let catalog = try SimulatorCatalog(storeKit: Self.storeKit(), settings: settings)
        #expect(catalog.appAppleId == 99)
        #expect(catalog.product("lifetime")?.storefrontPrices["JPN"]?.price == 30_000_000)
        #expect(throws: SimulatorError.self) { _ = try CatalogSettings(data: Array("{".utf8)) }
        #expect(throws: AppStoreError(.malformed, "")) { _ = try StoreKitConfiguration(data: Array("[1,2]".utf8)) }
    }

    @Test("Prices and periods parse strictly", arguments: [("4.99", 4990), ("0", 0), ("199.99", 199_990), ("0.5", 500), ("1.234", 1234)])
    func prices(text: String, milliunits: Int) {
        #expect(Milliunits.parse(text) == Int64(milliunits))
    }

    @Test("Unreadable prices and periods are nil", arguments: ["", "-1", "1.2345", "1,99", "abc", "1.", ".5", "0.-1", "0.+5", "+4.99", "-0", "4.9 ", " 4", "1000000000"])
    func badPrices(text: String) {
        #expect(Milliunits.parse(text) == nil)
        #expect(SubscriptionPeriod(iso8601: text) == nil)
    }
}
