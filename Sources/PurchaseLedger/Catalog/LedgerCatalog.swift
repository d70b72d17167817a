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

    public init(type: ProductType, entitlement: String? = nil, periodSeconds: Int64? = nil, currency: String? = nil, amount: Int64? = nil,
                retired: Bool? = nil) {
        self.type = type
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
    public static func autoRenewable(_ entitlement: String) -> Self { .init(type: .autoRenewableSubscription, entitlement: entitlement) }
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
            return unused(["entitlement": entitlement != nil, "periodSeconds": periodSeconds != nil], "a consumable credits its currency only")
        case .nonRenewingSubscription:
            guard entitlement?.isEmpty == false, let periodSeconds, periodSeconds > 0 else { return "a non-renewing subscription needs an entitlement and a positive periodSeconds" }
            return unused(["currency": currency != nil, "amount": amount != nil], "a non-renewing subscription grants its entitlement only")
        case .nonConsumable, .autoRenewableSubscription:
            guard entitlement?.isEmpty == false else { return "needs an entitlement" }
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
        "com.example.iapkit.pro.monthly": .autoRenewable("pro"),
        "com.example.iapkit.pro.yearly": .autoRenewable("pro"),
        // The Advanced Commerce API's generic products: a subscription of the app's own SKUs is `pro` too (a plan
        // migrated from In-App Purchase keeps its access); a one-time charge credits one `credits` per purchase.
        "com.example.iapkit.ac.subscription": .autoRenewable("pro"),
        "com.example.iapkit.ac.onetime": .consumable(currency: "credits", amount: 1),
    ])
}
