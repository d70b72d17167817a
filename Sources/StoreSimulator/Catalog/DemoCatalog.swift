import AppStoreFormats

extension CatalogSettings {
    /// The catalog the simulator sells when given none: one product of each of the four types, and a subscription
    /// group with two levels and an introductory free trial.
    public static let demo: CatalogSettings = {
        func product(_ id: String, _ type: String, _ price: String, name: String) -> StoreKitConfiguration.Product {
            var product = StoreKitConfiguration.Product(productID: "com.example.iapkit.\(id)", type: type)
            product.displayPrice = price
            product.referenceName = name
            return product
        }
        var monthly = product("pro.monthly", "RecurringSubscription", "4.99", name: "Pro Monthly")
        monthly.subscriptionGroupID = "21000001"
        monthly.groupNumber = 2
        monthly.recurringSubscriptionPeriod = "P1M"
        monthly.introductoryOffer = StoreKitConfiguration.Offer(paymentMode: "free", subscriptionPeriod: "P1W", numberOfPeriods: 1)
        var yearly = product("pro.yearly", "RecurringSubscription", "39.99", name: "Pro Yearly")
        yearly.subscriptionGroupID = "21000001"
        yearly.groupNumber = 1
        yearly.recurringSubscriptionPeriod = "P1Y"
        var settings = CatalogSettings(bundleId: "com.example.iapkit", appAppleId: 1_234_567_890)
        settings.products = [
            product("coins.100", "Consumable", "0.99", name: "100 Coins"),
            product("premium", "NonConsumable", "9.99", name: "Premium"),
            product("season.pass", "NonRenewingSubscription", "2.99", name: "Season Pass"),
            monthly, yearly,
        ]
        return settings
    }()
}
