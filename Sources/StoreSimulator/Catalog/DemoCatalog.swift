import AppStoreFormats

extension CatalogSettings {
    /// The catalog the simulator sells when given none: one product of each of the four types, and a subscription
    /// group with two levels, an introductory free trial, a promotional offer, an offer code (and one for the coins) and a
    /// win-back offer;
    /// Premium and the subscriptions are family-shareable. And the Advanced Commerce API's two generic products.
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
        monthly.familyShareable = true
        monthly.adHocOffers = [StoreKitConfiguration.Offer(paymentMode: "payAsYouGo", subscriptionPeriod: "P1M", numberOfPeriods: 2,
                                                           displayPrice: "1.99", offerID: "pro.monthly.comeback")]
        var code = StoreKitConfiguration.Offer(paymentMode: "free", subscriptionPeriod: "P1M", numberOfPeriods: 1)
        code.referenceName = "PRO-FRIENDS"
        code.eligibility = ["new", "expired"]
        monthly.codeOffers = [code]
        // For lapsed subscribers: three months for 5.99, paid up front.
        monthly.winbackOffers = [StoreKitConfiguration.Offer(paymentMode: "payUpFront", subscriptionPeriod: "P3M", numberOfPeriods: 1,
                                                             displayPrice: "5.99", offerID: "pro.monthly.winback")]
        var yearly = product("pro.yearly", "RecurringSubscription", "39.99", name: "Pro Yearly")
        yearly.subscriptionGroupID = "21000001"
        yearly.groupNumber = 1
        yearly.recurringSubscriptionPeriod = "P1Y"
        yearly.familyShareable = true
        yearly.adHocOffers = [StoreKitConfiguration.Offer(paymentMode: "payUpFront", subscriptionPeriod: "P1Y", numberOfPeriods: 1,
                                                          displayPrice: "29.99", offerID: "pro.yearly.upgrade")]
        var settings = CatalogSettings(bundleId: "com.example.iapkit", appAppleId: 1_234_567_890)
        var premium = product("premium", "NonConsumable", "9.99", name: "Premium")
        premium.familyShareable = true
        // An offer code for a one-time purchase (2025): 100 coins for 0.49.
        var coins = product("coins.100", "Consumable", "0.99", name: "100 Coins")
        var welcome = StoreKitConfiguration.Offer(paymentMode: nil, subscriptionPeriod: nil, displayPrice: "0.49")
        welcome.referenceName = "COINS-WELCOME"
        coins.codeOffers = [welcome]
        // The Advanced Commerce API's generic products: whatever the app's server sells through them, priced and named
        // per purchase (their own prices and periods are placeholders, as in App Store Connect).
        var generic = product("ac.subscription", "RecurringSubscription", "0.99", name: "Enabled for Advanced Commerce")
        generic.subscriptionGroupID = "21000002"
        generic.groupNumber = 1
        generic.recurringSubscriptionPeriod = "P1M"
        settings.products = [
            coins,
            premium,
            product("season.pass", "NonRenewingSubscription", "2.99", name: "Season Pass"),
            monthly, yearly,
            product("ac.onetime", "Consumable", "0.99", name: "Enabled for Advanced Commerce"),
            generic,
        ]
        settings.advancedCommerceProductIds = ["com.example.iapkit.ac.onetime", "com.example.iapkit.ac.subscription"]
        return settings
    }()
}
