import Foundation

/// An Xcode StoreKit configuration file (`.storekit`, JSON). Apple publishes no schema; the keys are what Xcode writes
/// (format versions 3 and 5 seen). Unknown keys are ignored, so newer files still load.
public struct StoreKitConfiguration: Decodable, Hashable, Sendable {
    public var identifier: String?
    /// Consumables and non-consumables.
    public var products: [Product]
    public var nonRenewingSubscriptions: [Product]
    public var subscriptionGroups: [SubscriptionGroup]
    public var settings: Settings?

    /// Largest configuration file accepted.
    public static let maxBytes = 4 << 20

    /// Decodes a `.storekit` file's bytes.
    public init(data: some Collection<UInt8>) throws {
        guard data.count <= Self.maxBytes else {
            throw AppStoreError(.tooLarge, "StoreKit configuration is \(data.count) bytes; the limit is \(Self.maxBytes)")
        }
        self = try AppStoreJSON.decode(Self.self, from: data, what: "StoreKit configuration")
    }

    enum CodingKeys: String, CodingKey { case identifier, products, nonRenewingSubscriptions, subscriptionGroups, settings }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        identifier = try container.decodeIfPresent(String.self, forKey: .identifier)
        products = try container.decodeIfPresent([Product].self, forKey: .products) ?? []
        nonRenewingSubscriptions = try container.decodeIfPresent([Product].self, forKey: .nonRenewingSubscriptions) ?? []
        subscriptionGroups = try container.decodeIfPresent([SubscriptionGroup].self, forKey: .subscriptionGroups) ?? []
        settings = try container.decodeIfPresent(Settings.self, forKey: .settings)
    }

    /// A product: `products[]`, `nonRenewingSubscriptions[]`, or a subscription inside a group.
    public struct Product: Codable, Hashable, Sendable {
        public var productID: String
        public var referenceName: String?
        /// `Consumable`, `NonConsumable`, `NonRenewingSubscription` or `RecurringSubscription`.
        public var type: String
        /// A decimal string, e.g. `"4.99"`.
        public var displayPrice: String?
        public var familyShareable: Bool?
        public var internalID: String?
        public var localizations: [Localization]?
        /// Subscriptions only.
        public var subscriptionGroupID: String?
        /// Level within the group: 1 is the highest service.
        public var groupNumber: Int?
        /// ISO 8601 period, e.g. `P1M`.
        public var recurringSubscriptionPeriod: String?
        public var introductoryOffer: Offer?
        public var introductoryOffers: [Offer]?
        /// Promotional offers.
        public var adHocOffers: [Offer]?
        /// Offer codes.
        public var codeOffers: [Offer]?
        public var winbackOffers: [Offer]?
        /// One-year subscriptions (2026): paid up front, or monthly with a 12-month commitment.
        public var billingPlans: [BillingPlan]?

        /// The product type as JWS payloads name it.
        public var productType: ProductType? {
            switch type {
            case "Consumable": .consumable
            case "NonConsumable": .nonConsumable
            case "NonRenewingSubscription": .nonRenewingSubscription
            case "RecurringSubscription": .autoRenewableSubscription
            default: nil
            }
        }

        /// The first introductory offer (version 5 lists them; version 3 has one).
        public var introOffer: Offer? { introductoryOffers?.first ?? introductoryOffer }

        /// A product with the given id and `.storekit` type; everything else absent.
        public init(productID: String, type: String) {
            self.productID = productID
            self.type = type
        }
    }

    /// A subscription offer (introductory, promotional, offer code, win-back).
    public struct Offer: Codable, Hashable, Sendable {
        public var internalID: String?
        /// Promotional offers' identifier.
        public var offerID: String?
        public var referenceName: String?
        /// `free`, `payAsYouGo` or `payUpFront`.
        public var paymentMode: String?
        /// ISO 8601, e.g. `P1W`.
        public var subscriptionPeriod: String?
        public var numberOfPeriods: Int?
        /// Absent for free offers.
        public var displayPrice: String?
        /// Offer codes: `new`, `existing`, `expired`.
        public var eligibility: [String]?

        public init(paymentMode: String?, subscriptionPeriod: String?, numberOfPeriods: Int? = nil, displayPrice: String? = nil, offerID: String? = nil) {
            self.paymentMode = paymentMode
            self.subscriptionPeriod = subscriptionPeriod
            self.numberOfPeriods = numberOfPeriods
            self.displayPrice = displayPrice
            self.offerID = offerID
        }

        /// The JWS `offerDiscountType` of this offer's payment mode.
        public var discountType: OfferDiscountType? {
            switch paymentMode {
            case "free": .freeTrial
            case "payAsYouGo": .payAsYouGo
            case "payUpFront": .payUpFront
            default: nil
            }
        }
    }

    /// A way to pay for a one-year subscription: `BILLED_UPFRONT` or `MONTHLY` (12 payments of `displayPrice`,
    /// `commitmentDisplayPrice` in all).
    public struct BillingPlan: Codable, Hashable, Sendable {
        public var billingPlanType: String?
        public var displayPrice: String?
        public var commitmentDisplayPrice: String?
        public var internalID: String?
        public var isEnabled: Bool?
        public init(billingPlanType: String?, displayPrice: String?, commitmentDisplayPrice: String?) {
            self.billingPlanType = billingPlanType
            self.displayPrice = displayPrice
            self.commitmentDisplayPrice = commitmentDisplayPrice
        }
    }

    /// A subscription group.
    public struct SubscriptionGroup: Decodable, Hashable, Sendable {
        /// Used as `subscriptionGroupIdentifier`.
        public var id: String
        public var name: String?
        public var subscriptions: [Product]

        enum CodingKeys: String, CodingKey { case id, name, subscriptions }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            name = try container.decodeIfPresent(String.self, forKey: .name)
            subscriptions = try container.decodeIfPresent([Product].self, forKey: .subscriptions) ?? []
        }
    }

    /// A localized name and description.
    public struct Localization: Codable, Hashable, Sendable {
        public var locale: String?
        public var displayName: String?
        public var description: String?
    }

    /// The underscore-prefixed test-session settings.
    public struct Settings: Decodable, Hashable, Sendable {
        public var storefront: String?
        public var locale: String?
        public var askToBuyEnabled: Bool?
        public var billingGracePeriodEnabled: Bool?
        public var failTransactionsEnabled: Bool?
        public var applicationInternalID: String?

        enum CodingKeys: String, CodingKey {
            case storefront = "_storefront", locale = "_locale", askToBuyEnabled = "_askToBuyEnabled"
            case billingGracePeriodEnabled = "_billingGracePeriodEnabled", failTransactionsEnabled = "_failTransactionsEnabled"
            case applicationInternalID = "_applicationInternalID"
        }
    }

    /// Every product of the file: products, non-renewing subscriptions, then each group's subscriptions.
    public var allProducts: [Product] {
        products + nonRenewingSubscriptions + subscriptionGroups.flatMap(\.subscriptions)
    }
}

/// Prices as the App Store's JWS carry them: milliunits of the currency.
public enum Milliunits {
    /// `"4.99"` → 4990. `nil` unless the text is a plain non-negative decimal with at most three fraction digits.
    public static func parse(_ text: String) -> Int64? {
        // Digits only: `Int64.init` alone would take a sign, so "0.-1" was once −10 and "+4.99" a price.
        let isDigits = { (part: Substring) in !part.isEmpty && part.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts[0].utf8.count <= 9, isDigits(parts[0]), let whole = Int64(parts[0]) else { return nil }
        var fraction: Int64 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...3).contains(digits.utf8.count), isDigits(digits), let value = Int64(digits) else { return nil }
            fraction = value * [100, 10, 1][digits.count - 1]
        }
        return whole * 1000 + fraction
    }
}
