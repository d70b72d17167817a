import AppStoreFormats
import Foundation

/// A product as the store describes it.
public struct StoreProduct: Codable, Sendable, Hashable {
    public struct Offer: Codable, Sendable, Hashable {
        /// `FREE_TRIAL`, `PAY_AS_YOU_GO` or `PAY_UP_FRONT`.
        public var discountType: String
        /// ISO 8601, e.g. `P1W`.
        public var period: String
        public var numberOfPeriods: Int
        /// Milliunits.
        public var price: Int64

        public init(discountType: String, period: String, numberOfPeriods: Int, price: Int64) {
            self.discountType = discountType
            self.period = period
            self.numberOfPeriods = numberOfPeriods
            self.price = price
        }
    }

    public var productId: String
    /// `Consumable`, `Non-Consumable`, `Non-Renewing Subscription`, `Auto-Renewable Subscription`.
    public var type: String
    public var displayName: String
    /// Milliunits of ``currency``.
    public var price: Int64
    public var currency: String
    /// Auto-renewable subscriptions: ISO 8601 billing period.
    public var subscriptionPeriod: String?
    public var introductoryOffer: Offer?
    public var familyShareable: Bool?

    public init(productId: String, type: String, displayName: String, price: Int64, currency: String, subscriptionPeriod: String? = nil,
                introductoryOffer: Offer? = nil, familyShareable: Bool? = nil) {
        self.productId = productId
        self.type = type
        self.displayName = displayName
        self.price = price
        self.currency = currency
        self.subscriptionPeriod = subscriptionPeriod
        self.introductoryOffer = introductoryOffer
        self.familyShareable = familyShareable
    }
}

/// A paid transaction as the store hands it to the app: the signed proof, and the ids read from it (unverified —
/// the server verifies).
public struct StoreTransaction: Sendable, Hashable {
    public var transactionId: String
    public var originalTransactionId: String?
    public var productId: String
    public var appAccountToken: UUID?
    /// Subscriptions: when the period paid for ends.
    public var expiresDate: Date?
    /// Set when the App Store refunded or revoked it.
    public var revocationDate: Date?
    public var signedTransaction: String

    /// A transaction whose ids a store adapter already read (StoreKit's decoded payload).
    public init(transactionId: String, originalTransactionId: String?, productId: String, appAccountToken: UUID?, expiresDate: Date? = nil,
                revocationDate: Date? = nil, signedTransaction: String) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.signedTransaction = signedTransaction
    }

    /// Reads the ids from a signed transaction without verifying it (the app cannot; the server does).
    public init(signedTransaction: String) throws {
        let payload = try CompactJWS(signedTransaction).unverifiedPayload(as: JWSTransactionDecodedPayload.self)
        guard let id = payload.transactionId, let product = payload.productId else {
            throw PurchaseFailure(.storeFailed, "the store returned a transaction without its id or product")
        }
        transactionId = id
        originalTransactionId = payload.originalTransactionId
        productId = product
        appAccountToken = payload.appAccountToken
        expiresDate = payload.expiresDate
        revocationDate = payload.revocationDate
        self.signedTransaction = signedTransaction
    }
}

/// What a payment attempt ended in.
public enum StorePurchaseResult: Sendable, Hashable {
    case purchased(StoreTransaction)
    /// Ask to Buy (or another deferral): the transaction, if approved, comes through ``StoreAdapter/updates()``.
    case pending
    case cancelled
    case failed(String)
}

/// What the app's server signed for a purchase, for StoreKit to redeem: a promotional offer (`.promotionalOffer(_:compactJWS:)`),
/// the server's introductory-offer eligibility (`.introductoryOfferEligibility(compactJWS:)`), and an Advanced Commerce
/// API request (`.custom(key: "advancedCommerceData", …)`: what a generic product sells, at what price).
public struct SignedOffers: Sendable, Hashable {
    public var promotionalOfferId: String?
    public var promotionalOfferJWS: String?
    public var introductoryOfferEligibilityJWS: String?
    public var advancedCommerceJWS: String?

    public init(promotionalOfferId: String? = nil, promotionalOfferJWS: String? = nil, introductoryOfferEligibilityJWS: String? = nil,
                advancedCommerceJWS: String? = nil) {
        self.promotionalOfferId = promotionalOfferId
        self.promotionalOfferJWS = promotionalOfferJWS
        self.introductoryOfferEligibilityJWS = introductoryOfferEligibilityJWS
        self.advancedCommerceJWS = advancedCommerceJWS
    }

    public var isEmpty: Bool { promotionalOfferJWS == nil && introductoryOfferEligibilityJWS == nil && advancedCommerceJWS == nil }

    /// The Advanced Commerce request as StoreKit takes it: `{"signatureInfo": {"token": "<JWS>"}}`.
    public var advancedCommerceData: Data? {
        advancedCommerceJWS.flatMap { try? JSONEncoder().encode(["signatureInfo": ["token": $0]]) }
    }
}

/// The store, behind one protocol: the simulator over HTTP (any platform) or StoreKit 2 (Apple platforms).
public protocol StoreAdapter: Sendable {
    func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String])
    func canMakePayments() async -> Bool
    /// Pays for `productId` with the order's `appAccountToken` set on the payment.
    func purchase(_ productId: String, appAccountToken: UUID, quantity: Int) async throws -> StorePurchaseResult
    /// Pays with the offers the app's server signed.
    func purchase(_ productId: String, appAccountToken: UUID, quantity: Int, offers: SignedOffers) async throws -> StorePurchaseResult
    /// Transactions paid but not finished on this device (StoreKit's `Transaction.unfinished`).
    func unfinished() async throws -> [StoreTransaction]
    func finish(_ transaction: StoreTransaction) async throws
    /// The store's restore (`AppStore.sync()` + current entitlements): non-consumables and auto-renewables.
    func restore() async throws -> [StoreTransaction]
    /// Transactions arriving outside a purchase call: Ask to Buy approvals, interrupted purchases completed,
    /// renewals, purchases on other devices (StoreKit's `Transaction.updates`).
    func updates() -> AsyncStream<StoreTransaction>
    /// The app receipt (base64); nil when there is none. Never asks the store to refresh it (that prompts for a
    /// sign-in: only behind the user's button).
    func receipt() async throws -> String?
    /// The signed app transaction (StoreKit's `AppTransaction.shared.jwsRepresentation`): proof of the app's purchase
    /// that needs no sign-in prompt; nil when the store has none.
    func appTransaction() async throws -> String?
    /// Product ids the customer started buying on the App Store's product page (StoreKit's `PurchaseIntent.intents`).
    func promotedPurchases() -> AsyncStream<String>
    /// What the store itself says the customer owns now, read on the device without any server (StoreKit's
    /// `Transaction.currentEntitlements`): backs the offline entitlements.
    func currentEntitlements() async throws -> [StoreTransaction]
}

extension StoreAdapter {
    /// An adapter that cannot redeem signed offers refuses them before anything is charged: buying at full price
    /// instead of the offer the customer chose would be a wrong charge.
    public func purchase(_ productId: String, appAccountToken: UUID, quantity: Int, offers: SignedOffers) async throws -> StorePurchaseResult {
        guard offers.isEmpty else { return .failed("this store adapter cannot redeem signed offers") }
        return try await purchase(productId, appAccountToken: appAccountToken, quantity: quantity)
    }
}

extension StoreAdapter {
    /// No promoted purchases unless the store has them.
    public func promotedPurchases() -> AsyncStream<String> { AsyncStream { $0.finish() } }
    /// Nothing, unless the store can say it offline.
    public func currentEntitlements() async throws -> [StoreTransaction] { [] }
    /// None, unless the store signs one.
    public func appTransaction() async throws -> String? { nil }
}
