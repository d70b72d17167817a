import AppStoreFormats
import Foundation

/// What each product sells, in the server's own terms: the App Store knows prices and periods, the server decides
/// what a purchase grants.
public struct LedgerCatalog: Codable, Sendable, Hashable {
    /// Product id → its rule.
    public var products: [String: ProductRule]

    public init(products: [String: ProductRule]) {
        self.products = products
    }

    /// The rule for `productId`, if the server sells it or once sold it (``ProductRule/retired``): what was bought of a
    /// product is judged by its rule whether or not the product is still sold.
    public func rule(for productId: String) -> ProductRule? { products[productId] }
}

/// One product: its App Store type and what buying it grants.
public struct ProductRule: Codable, Sendable, Hashable {
    public var type: ProductType
    /// Auto-renewable, non-consumable and non-renewing products: the entitlement granted (several products may grant
    /// the same one, e.g. monthly and yearly plans granting `pro`).
    public var entitlement: String?
    /// Non-renewing subscriptions: how long one purchase lasts, in seconds (Apple keeps no expiry for them).
    public var periodSeconds: Int64?
    /// Consumables: the currency credited and the amount per unit bought.
    public var currency: String?
    public var amount: Int64?
    /// `true`: no longer sold, still honoured (JSON `"retired": true`; absent or `false`: sold). Apple never reuses a
    /// product id, and what customers bought of a product stays theirs after it is removed from sale: a retired
    /// product's new orders and offer signatures are refused (`product_retired`), while its entitlements, restores,
    /// renewals, refunds and every paid transaction that still arrives for it (Ask to Buy approved late, a promoted
    /// purchase, another device) are judged by this rule exactly as before. A product someone owns cannot leave the
    /// catalog: the server refuses to start without it (retire it instead).
    public var retired: Bool?
    /// Auto-renewable subscriptions: the product's billing period, ISO 8601 as App Store Connect and `.storekit` files
    /// write it (`P1W`, `P1M`, `P3M`, `P6M`, `P1Y`). Used only to normalise a price to a month for MRR (the business
    /// view); access follows Apple's signed expiry, never this. Taken from the `.storekit` file when one is configured;
    /// when absent, MRR classifies each period by the length Apple signed (``MetricRules/monthlyAmount``).
    public var subscriptionPeriod: String?

    public init(type: ProductType, entitlement: String? = nil, periodSeconds: Int64? = nil, currency: String? = nil, amount: Int64? = nil,
                retired: Bool? = nil, subscriptionPeriod: String? = nil) {
        self.type = type
        self.subscriptionPeriod = subscriptionPeriod
        self.entitlement = entitlement
        self.periodSeconds = periodSeconds
        self.currency = currency
        self.amount = amount
        self.retired = retired
    }

    /// No longer sold, still honoured (``retired``).
    public var isRetired: Bool { retired == true }

    /// This rule, no longer sold but still honoured.
    public var asRetired: Self {
        var rule = self
        rule.retired = true
        return rule
    }

    /// A consumable crediting `amount` of `currency` per unit.
    public static func consumable(currency: String, amount: Int64) -> Self { .init(type: .consumable, currency: currency, amount: amount) }
    /// A non-consumable granting `entitlement` for life.
    public static func nonConsumable(_ entitlement: String) -> Self { .init(type: .nonConsumable, entitlement: entitlement) }
    /// An auto-renewable subscription granting `entitlement` until Apple's latest expiry.
    public static func autoRenewable(_ entitlement: String, period: String? = nil) -> Self {
        .init(type: .autoRenewableSubscription, entitlement: entitlement, subscriptionPeriod: period)
    }
    /// A non-renewing subscription granting `entitlement` for `seconds` from each purchase (purchases stack).
    public static func nonRenewing(_ entitlement: String, seconds: Int64) -> Self {
        .init(type: .nonRenewingSubscription, entitlement: entitlement, periodSeconds: seconds)
    }

    /// Why this rule cannot work, or nil. A key that the product's type never uses is refused too, not ignored: a
    /// consumable written with an `entitlement` would otherwise credit its coins and silently grant nothing else, which
    /// the operator who wrote it did not mean.
    public var problem: String? {
        switch type {
        case .consumable:
            guard let currency, !currency.isEmpty, let amount, amount > 0 else { return "a consumable needs a currency and a positive amount" }
            return unused(["entitlement": entitlement != nil, "periodSeconds": periodSeconds != nil, "subscriptionPeriod": subscriptionPeriod != nil],
                          "a consumable credits its currency only")
        case .nonRenewingSubscription:
            guard entitlement?.isEmpty == false, let periodSeconds, periodSeconds > 0 else { return "a non-renewing subscription needs an entitlement and a positive periodSeconds" }
            return unused(["currency": currency != nil, "amount": amount != nil, "subscriptionPeriod": subscriptionPeriod != nil],
                          "a non-renewing subscription grants its entitlement only")
        case .nonConsumable, .autoRenewableSubscription:
            guard entitlement?.isEmpty == false else { return "needs an entitlement" }
            if let subscriptionPeriod {
                guard type == .autoRenewableSubscription else { return "a non-consumable has no subscriptionPeriod: remove subscriptionPeriod" }
                guard SubscriptionPeriod(iso8601: subscriptionPeriod) != nil else {
                    return "subscriptionPeriod \(subscriptionPeriod) is not an ISO 8601 period such as P1W, P1M or P1Y"
                }
            }
            return unused(["currency": currency != nil, "amount": amount != nil, "periodSeconds": periodSeconds != nil],
                          type == .nonConsumable ? "a non-consumable grants its entitlement for life" : "a subscription lasts as Apple's expiry says")
        default:
            return "unknown product type \(type.rawValue)"
        }
    }

    private func unused(_ present: [String: Bool], _ why: String) -> String? {
        let keys = present.filter(\.value).map(\.key).sorted()
        return keys.isEmpty ? nil : "\(why): remove \(keys.joined(separator: " and "))"
    }
}

extension LedgerCatalog {
    /// The demo app's products (the simulator's demo catalog): coins, premium for life, a 30-day season pass, and
    /// monthly and yearly plans granting `pro`.
    public static let demo = LedgerCatalog(products: [
        "com.example.iapkit.coins.100": .consumable(currency: "coins", amount: 100),
        "com.example.iapkit.premium": .nonConsumable("premium"),
        "com.example.iapkit.season.pass": .nonRenewing("season", seconds: 30 * 86_400),
        "com.example.iapkit.pro.monthly": .autoRenewable("pro", period: "P1M"),
        "com.example.iapkit.pro.yearly": .autoRenewable("pro", period: "P1Y"),
        // The Advanced Commerce API's generic products: a subscription of the app's own SKUs is `pro` too (a plan
        // migrated from In-App Purchase keeps its access); a one-time charge credits one `credits` per purchase.
        "com.example.iapkit.ac.subscription": .autoRenewable("pro", period: "P1M"),
        "com.example.iapkit.ac.onetime": .consumable(currency: "credits", amount: 1),
    ])
}
