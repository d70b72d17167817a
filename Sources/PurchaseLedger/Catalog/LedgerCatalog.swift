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

    /// The rule for `productId`, if the server sells it.
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

    public init(type: ProductType, entitlement: String? = nil, periodSeconds: Int64? = nil, currency: String? = nil, amount: Int64? = nil) {
        self.type = type
        self.entitlement = entitlement
        self.periodSeconds = periodSeconds
        self.currency = currency
        self.amount = amount
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
