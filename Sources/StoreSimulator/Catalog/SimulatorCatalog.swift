import AppStoreFormats
import Foundation

/// The products the simulator sells: read from an Xcode `.storekit` file, completed by the simulator's own JSON
/// (``CatalogSettings``) with what `.storekit` lacks — bundle id, app Apple id, storefront prices.
public struct SimulatorCatalog: Sendable, Hashable {
    /// A product for sale.
    public struct Product: Sendable, Hashable {
        public var productId: String
        public var type: ProductType
        public var referenceName: String
        public var displayName: String
        /// Price in milliunits of ``SimulatorCatalog/currency`` in the default storefront.
        public var price: Int64
        public var familyShareable: Bool
        /// Auto-renewable subscriptions: the group and the level in it (1 is the highest service).
        public var subscriptionGroupIdentifier: String?
        public var groupLevel: Int?
        /// Auto-renewable subscriptions: the billing period.
        public var period: SubscriptionPeriod?
        public var introductoryOffer: Offer?
        public var promotionalOffers: [Offer]
        public var offerCodes: [Offer]
        /// Win-back offers (`winbackOffers`), for customers whose subscription in the group lapsed.
        public var winBackOffers: [Offer] = []
        /// Consumables, non-consumables and non-renewing subscriptions: offer codes (2025) by reference name, each a
        /// price in milliunits (0: free).
        public var oneTimeOfferCodes: [String: Int64] = [:]
        /// One-year subscriptions with a `MONTHLY` billing plan (2026): 12 monthly payments.
        public var monthlyCommitment: MonthlyCommitment?
        /// Prices per storefront (alpha-3) in that storefront's currency, from the settings.
        public var storefrontPrices: [String: StorefrontPrice]
        /// A generic product of the Advanced Commerce API: sold only with a request the app's server signed, which
        /// names the SKUs, prices and period (the product's own price and period are placeholders).
        public var advancedCommerce = false
    }

    /// A subscription offer.
    public struct Offer: Sendable, Hashable {
        /// The promotional or win-back offer id, or the offer-code reference name; nil for introductory offers.
        public var offerId: String?
        public var discountType: OfferDiscountType
        public var period: SubscriptionPeriod
        public var numberOfPeriods: Int
        /// Milliunits; 0 for a free trial.
        public var price: Int64
        /// Offer codes: who may redeem it — `new`, `existing` and/or `expired` subscribers of the group; empty means anyone.
        public var eligibility: Set<String> = []
    }

    /// A one-year subscription paid monthly over a 12-month commitment.
    public struct MonthlyCommitment: Sendable, Hashable {
        /// Milliunits a month, and for the whole commitment.
        public var monthlyPrice: Int64
        public var commitmentPrice: Int64
    }

    /// A price in one storefront.
    public struct StorefrontPrice: Sendable, Hashable, Codable {
        public var currency: String
        /// Milliunits.
        public var price: Int64
    }

    public var bundleId: String
    public var appAppleId: Int64
    /// Default storefront (ISO 3166-1 alpha-3) and its currency.
    public var storefront: String
    public var currency: String
    /// Products in file order.
    public private(set) var products: [Product]
    /// Product ids that may never be sold again (App Store Connect never frees a deleted id).
    public private(set) var retiredProductIds: Set<String>
    /// Things worth telling the operator that do not stop the catalog loading.
    public private(set) var warnings: [String]

    /// The product with `productId`, if it is for sale.
    public func product(_ productId: String) -> Product? { products.first { $0.productId == productId } }

    /// The subscriptions of a group, highest level first.
    public func group(_ identifier: String) -> [Product] {
        products.filter { $0.subscriptionGroupIdentifier == identifier }.sorted { ($0.groupLevel ?? .max) < ($1.groupLevel ?? .max) }
    }

    /// Builds and validates a catalog.
    /// - Parameters:
    ///   - storeKit: a decoded `.storekit` file, if any.
    ///   - settings: the simulator's own catalog JSON.
    ///   - retired: product ids deleted earlier (kept by the simulator's state), refused if they reappear.
    public init(storeKit: StoreKitConfiguration?, settings: CatalogSettings, retired: Set<String> = []) throws {
        bundleId = settings.bundleId
        appAppleId = settings.appAppleId ?? 0
        storefront = settings.storefront ?? storeKit?.settings?.storefront ?? "USA"
        currency = settings.currency ?? "USD"
        retiredProductIds = retired.union(settings.deletedProductIds ?? [])
        products = []
        warnings = []
        var definitions = storeKit?.allProducts ?? []
        definitions += settings.products ?? []
        for definition in definitions {
            let product = try Self.product(definition, settings: settings)
            guard !products.contains(where: { $0.productId == product.productId }) else {
                throw SimulatorError.catalog("product id \(product.productId) is defined twice")
            }
            guard !retiredProductIds.contains(product.productId) else {
                throw SimulatorError.catalog("product id \(product.productId) was deleted and can never be used again")
            }
            if !product.productId.hasPrefix(bundleId + ".") {
                warnings.append("product id \(product.productId) does not start with the bundle id \(bundleId).")
            }
            products.append(product)
        }
        for productId in settings.advancedCommerceProductIds ?? [] {
            guard let index = products.firstIndex(where: { $0.productId == productId }) else {
                throw SimulatorError.catalog("advancedCommerceProductIds names \(productId), which is not in the catalog")
            }
            // Apple's generic products: a consumable for one-time charges, an auto-renewable subscription in a group
            // of its own for subscriptions.
            let generic = products[index]
            guard generic.type == .consumable || generic.type == .autoRenewableSubscription else {
                throw SimulatorError.catalog("the Advanced Commerce product \(productId) must be a consumable or an auto-renewable subscription")
            }
            if let group = generic.subscriptionGroupIdentifier, products.contains(where: { $0.subscriptionGroupIdentifier == group && $0.productId != productId }) {
                throw SimulatorError.catalog("the Advanced Commerce subscription \(productId) must be alone in its subscription group")
            }
            products[index].advancedCommerce = true
        }
        for (productId, _) in settings.storefrontPrices ?? [:] where product(productId) == nil {
            warnings.append("storefront prices name \(productId), which is not in the catalog")
        }
    }

    /// Retires a product: it leaves the catalog and its id can never be used again.
    public mutating func delete(_ productId: String) {
        products.removeAll { $0.productId == productId }
        retiredProductIds.insert(productId)
    }

    private static func product(_ definition: StoreKitConfiguration.Product, settings: CatalogSettings) throws -> Product {
        let id = definition.productID
        guard !id.isEmpty, id.utf8.count <= 100 else { throw SimulatorError.catalog("a product id is empty or longer than 100 bytes") }
        guard let type = definition.productType else {
            throw SimulatorError.catalog("product \(id) has unknown type \(definition.type)")
        }
        guard let price = Milliunits.parse(definition.displayPrice ?? "0") else {
            throw SimulatorError.catalog("product \(id) has an unreadable price \(definition.displayPrice ?? "")")
        }
        var period: SubscriptionPeriod?
        if type == .autoRenewableSubscription {
            guard definition.subscriptionGroupID != nil else { throw SimulatorError.catalog("subscription \(id) has no subscription group") }
            guard let parsed = definition.recurringSubscriptionPeriod.flatMap(SubscriptionPeriod.init(iso8601:)) else {
                throw SimulatorError.catalog("subscription \(id) has no readable period")
            }
            period = parsed
        }
        func offer(_ offer: StoreKitConfiguration.Offer) throws -> Offer {
            guard let discountType = offer.discountType, let offerPeriod = offer.subscriptionPeriod.flatMap(SubscriptionPeriod.init(iso8601:)) else {
                throw SimulatorError.catalog("an offer of \(id) has no readable payment mode or period")
            }
            guard let offerPrice = Milliunits.parse(offer.displayPrice ?? "0") else {
                throw SimulatorError.catalog("an offer of \(id) has an unreadable price")
            }
            return Offer(offerId: offer.offerID ?? offer.referenceName, discountType: discountType, period: offerPeriod,
                         numberOfPeriods: max(1, offer.numberOfPeriods ?? 1), price: offerPrice, eligibility: Set(offer.eligibility ?? []))
        }
        return Product(
            productId: id, type: type, referenceName: definition.referenceName ?? id,
            displayName: definition.localizations?.first?.displayName ?? definition.referenceName ?? id,
            price: price, familyShareable: definition.familyShareable ?? false,
            subscriptionGroupIdentifier: definition.subscriptionGroupID, groupLevel: definition.groupNumber, period: period,
            introductoryOffer: try definition.introOffer.map(offer),
            promotionalOffers: try (definition.adHocOffers ?? []).map(offer),
            offerCodes: type == .autoRenewableSubscription ? try (definition.codeOffers ?? []).map(offer) : [],
            winBackOffers: type == .autoRenewableSubscription ? try (definition.winbackOffers ?? []).map(offer) : [],
            oneTimeOfferCodes: type == .autoRenewableSubscription ? [:] : try oneTimeCodes(definition.codeOffers ?? [], productId: id),
            monthlyCommitment: period == SubscriptionPeriod(value: 1, unit: .year) ? try monthlyPlan(definition.billingPlans ?? [], productId: id) : nil,
            storefrontPrices: settings.storefrontPrices?[id] ?? [:])
    }

    /// The enabled `MONTHLY` billing plan of a one-year subscription, if it has one.
    private static func monthlyPlan(_ plans: [StoreKitConfiguration.BillingPlan], productId: String) throws -> MonthlyCommitment? {
        guard let plan = plans.first(where: { $0.billingPlanType == BillingPlanType.monthly.rawValue && $0.isEnabled != false }) else { return nil }
        guard let monthly = Milliunits.parse(plan.displayPrice ?? ""), monthly > 0 else { throw SimulatorError.catalog("the monthly plan of \(productId) has no readable price") }
        let total = plan.commitmentDisplayPrice.flatMap(Milliunits.parse) ?? monthly * 12
        return MonthlyCommitment(monthlyPrice: monthly, commitmentPrice: total)
    }

    /// Offer codes of a one-time product. Xcode's format for them is not public yet: the simulator reads `codeOffers` on
    /// any product, a code's `referenceName` and its `displayPrice` (what the customer pays; absent: free).
    private static func oneTimeCodes(_ offers: [StoreKitConfiguration.Offer], productId: String) throws -> [String: Int64] {
        var codes: [String: Int64] = [:]
        for offer in offers {
            guard let name = offer.referenceName ?? offer.offerID, !name.isEmpty else { throw SimulatorError.catalog("an offer code of \(productId) has no reference name") }
            guard let price = Milliunits.parse(offer.displayPrice ?? "0") else { throw SimulatorError.catalog("an offer code of \(productId) has an unreadable price") }
            codes[name] = price
        }
        return codes
    }
}

/// The simulator's own catalog JSON: what a `.storekit` file does not say.
public struct CatalogSettings: Codable, Sendable, Hashable {
    public var bundleId: String
    public var appAppleId: Int64?
    public var storefront: String?
    public var currency: String?
    /// Product id → storefront → price there.
    public var storefrontPrices: [String: [String: SimulatorCatalog.StorefrontPrice]]?
    /// Product ids deleted in "App Store Connect"; they can never be used again.
    public var deletedProductIds: [String]?
    /// Extra products in `.storekit` product shape, for catalogs without a `.storekit` file.
    public var products: [StoreKitConfiguration.Product]?
    /// The Advanced Commerce API's generic products (`.storekit` has no key for them).
    public var advancedCommerceProductIds: [String]?

    public init(bundleId: String, appAppleId: Int64? = nil) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
    }

    /// Largest settings file accepted.
    public static let maxBytes = 1 << 20

    /// Decodes settings JSON.
    public init(data: some Collection<UInt8>) throws {
        guard data.count <= Self.maxBytes else { throw SimulatorError.catalog("catalog settings are larger than \(Self.maxBytes) bytes") }
        do { self = try JSONDecoder().decode(Self.self, from: Data(data)) } catch {
            throw SimulatorError.catalog("catalog settings are not valid JSON: \(error)")
        }
    }
}
