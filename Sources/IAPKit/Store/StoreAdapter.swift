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

    /// Apple's product types (`Consumable`, `Non-Consumable`, `Non-Renewing Subscription`, `Auto-Renewable
    /// Subscription`); open: a type a later store adds is kept as it came.
    public typealias ProductType = AppStoreFormats.ProductType

    public var productId: String
    public var type: ProductType
    public var displayName: String
    /// Milliunits of ``currency``.
    public var price: Int64
    public var currency: String
    /// The price as the store formats it for the customer's storefront (StoreKit's `displayPrice`), e.g. "$4.99".
    public var displayPrice: String
    /// Auto-renewable subscriptions: ISO 8601 billing period.
    public var subscriptionPeriod: String?
    public var introductoryOffer: Offer?
    public var familyShareable: Bool?

    /// `displayPrice` nil: formatted here from `price` and `currency` (the store's own text is better where it has one).
    public init(productId: String, type: ProductType, displayName: String, price: Int64, currency: String, displayPrice: String? = nil,
                subscriptionPeriod: String? = nil, introductoryOffer: Offer? = nil, familyShareable: Bool? = nil) {
        self.productId = productId
        self.type = type
        self.displayName = displayName
        self.price = price
        self.currency = currency
        self.displayPrice = displayPrice ?? Self.format(price: price, currency: currency)
        self.subscriptionPeriod = subscriptionPeriod
        self.introductoryOffer = introductoryOffer
        self.familyShareable = familyShareable
    }

    enum CodingKeys: String, CodingKey {
        case productId, type, displayName, price, currency, displayPrice, subscriptionPeriod, introductoryOffer, familyShareable
    }

    /// A copy kept before `displayPrice` existed decodes with one formatted from its price.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(productId: try container.decode(String.self, forKey: .productId), type: try container.decode(ProductType.self, forKey: .type),
                  displayName: try container.decode(String.self, forKey: .displayName), price: try container.decode(Int64.self, forKey: .price),
                  currency: try container.decode(String.self, forKey: .currency),
                  displayPrice: try container.decodeIfPresent(String.self, forKey: .displayPrice),
                  subscriptionPeriod: try container.decodeIfPresent(String.self, forKey: .subscriptionPeriod),
                  introductoryOffer: try container.decodeIfPresent(Offer.self, forKey: .introductoryOffer),
                  familyShareable: try container.decodeIfPresent(Bool.self, forKey: .familyShareable))
    }

    /// `price` milliunits of `currency` as a customer reads them ("$4.99", "4,99 €" in the device's locale).
    public static func format(price: Int64, currency: String, locale: Locale = .current) -> String {
        (Decimal(price) / 1000).formatted(.currency(code: currency).locale(locale))
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
    /// Auto-renewable subscriptions: the store's signed renewal info of the series (StoreKit's
    /// `Product.SubscriptionInfo.Status.renewalInfo`, its `jwsRepresentation`), uploaded with the transaction so that
    /// the server learns the series' renewal state (auto-renew off, the next product) without Apple's notifications.
    public var signedRenewalInfo: String?

    /// A transaction whose ids a store adapter already read (StoreKit's decoded payload).
    public init(transactionId: String, originalTransactionId: String?, productId: String, appAccountToken: UUID?, expiresDate: Date? = nil,
                revocationDate: Date? = nil, signedTransaction: String, signedRenewalInfo: String? = nil) {
        self.signedRenewalInfo = signedRenewalInfo
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.signedTransaction = signedTransaction
    }

    /// Reads the ids from a signed transaction without verifying it (the app cannot; the server does).
    public init(signedTransaction: String, signedRenewalInfo: String? = nil) throws {
        self.signedRenewalInfo = signedRenewalInfo
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
    /// `requestId` names the waiting request where the store says which it is (the simulator does, so that a test
    /// approves that one); StoreKit's `.pending` names none, so it is nil there.
    case pending(requestId: String?)
    case cancelled
    case failed(String)
}

/// What the store threw, in StoreKit's own terms — `StoreKitError` and `Product.PurchaseError`, case for case — so that
/// ``PurchaseClient`` decides the same way for every adapter (`StoreKitStore` maps StoreKit's errors to these; the
/// simulator's adapter throws them too).
public enum StoreError: Error, Sendable, Hashable {
    // StoreKitError
    /// The customer cancelled (StoreKit may throw this instead of answering `.userCancelled`). Nothing was charged.
    case userCancelled
    /// The store could not be reached. Whether a payment went through is unknown: a transaction, if any, arrives later.
    case networkError(String)
    case systemError(String)
    /// The product is not sold in the customer's storefront. Nothing was charged.
    case notAvailableInStorefront
    /// The app is not entitled to the feature (e.g. a missing capability).
    case notEntitled
    /// The store does not support this on this device or OS version. Nothing was charged.
    case unsupported
    case unknown
    // Product.PurchaseError: StoreKit refused before charging.
    case invalidQuantity
    case productUnavailable
    case purchaseNotAllowed
    case ineligibleForOffer
    case invalidOfferIdentifier
    case invalidOfferPrice
    case invalidOfferSignature
    case missingOfferParameters
    // Transaction.RefundRequestError
    /// A refund was already requested for this transaction.
    case duplicateRequest
    /// The refund request could not be made.
    case refundRequestFailed

    /// Whether the store said it charged nothing: the order's journal entry may go.
    public var chargedNothing: Bool {
        switch self {
        case .networkError, .systemError, .unknown, .notEntitled: false
        default: true
        }
    }
}

/// Where the App Store shows a sheet (the payment sheet, manage subscriptions, refund, offer codes) on Apple platforms:
/// a UIKit scene or view controller, SwiftUI's `PurchaseAction`, on macOS a window or view controller (for the refund
/// and offer-code sheets: Apple confirms macOS purchases in its own window). Made with the factory methods in
/// StoreKitStore.swift (`.scene(_:)`, `.viewController(_:)`, `.purchaseAction(_:)`, and `.window(_:)` on macOS); the
/// simulator needs none.
public struct PurchaseConfirmation: @unchecked Sendable {
    /// The UI object. Main-actor bound: only the StoreKit adapter reads it, on the main actor.
    package let anchor: Any

    package init(anchor: Any) { self.anchor = anchor }
}

/// One payment as the client asks the store for it.
public struct StorePurchaseRequest: Sendable {
    public var productId: String
    /// The order's token, set on the payment (StoreKit's `.appAccountToken(_:)`).
    public var appAccountToken: UUID
    public var quantity: Int
    /// What the app's server signed for the purchase.
    public var offers: SignedOffers
    /// The win-back offer the customer chose on the App Store with a promoted purchase (its offer id).
    public var winBackOfferId: String?
    /// Where StoreKit confirms the purchase (`purchase(confirmIn:options:)`); nil: StoreKit's own choice.
    public var confirmation: PurchaseConfirmation?

    public init(productId: String, appAccountToken: UUID, quantity: Int = 1, offers: SignedOffers = SignedOffers(),
                winBackOfferId: String? = nil, confirmation: PurchaseConfirmation? = nil) {
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.quantity = quantity
        self.offers = offers
        self.winBackOfferId = winBackOfferId
        self.confirmation = confirmation
    }
}

/// A purchase the customer started on the App Store (StoreKit's `PurchaseIntent`), with the win-back offer the App
/// Store showed with it, if any.
public struct PromotedPurchase: Codable, Sendable, Hashable {
    public var productId: String
    /// `PurchaseIntent.offer`'s id when it is a win-back offer (iOS 18): bought without it, the customer pays full price.
    public var winBackOfferId: String?

    public init(productId: String, winBackOfferId: String? = nil) {
        self.productId = productId
        self.winBackOfferId = winBackOfferId
    }
}

/// How a refund request the customer made in the App Store's sheet ended (StoreKit's `Transaction.RefundRequestStatus`).
public enum RefundRequestStatus: String, Sendable, Hashable, Codable {
    /// Submitted to Apple, which decides later (the server hears `REFUND` or `REFUND_DECLINED`).
    case success
    case userCancelled
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

/// The store, behind one protocol: the simulator over HTTP (any platform) or StoreKit 2 (Apple platforms). Methods may
/// throw ``StoreError`` for what the store itself said; anything else thrown is a failure to reach it.
public protocol StoreAdapter: Sendable {
    func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String])
    /// Whether this device may pay (parental controls, device management). Throws when the store cannot be asked.
    func canMakePayments() async throws -> Bool
    /// Pays for `request.productId` with the order's `appAccountToken` set on the payment, redeeming what it carries.
    /// An adapter that cannot redeem what the request asks for answers `.failed` before charging anything.
    func purchase(_ request: StorePurchaseRequest) async throws -> StorePurchaseResult
    /// Transactions paid but not finished on this device (StoreKit's `Transaction.unfinished`).
    func unfinished() async throws -> [StoreTransaction]
    /// Finishes a transaction. One the store no longer lists as unfinished (finished already, by this process before a
    /// relaunch or by another) is done: this returns normally. Throws only when the store could not be asked.
    func finish(_ transaction: StoreTransaction) async throws
    /// The store's restore (`AppStore.sync()` + current entitlements): non-consumables and auto-renewables.
    func restore() async throws -> [StoreTransaction]
    /// Transactions arriving outside a purchase call: Ask to Buy approvals, interrupted purchases completed,
    /// renewals, purchases on other devices, offer codes redeemed (StoreKit's `Transaction.updates`).
    func updates() -> AsyncStream<StoreTransaction>
    /// The app receipt (base64); nil when there is none. Never asks the store to refresh it (that prompts for a
    /// sign-in: only behind the user's button).
    func receipt() async throws -> String?
    /// Every transaction the store signs for this Apple ID and app (StoreKit's `Transaction.all`: finished consumables
    /// aside), where the store offers it in place of the receipt (iOS 18 / macOS 15 deprecated the receipt); nil where
    /// it does not, and the receipt is used.
    func transactionHistory() async throws -> [StoreTransaction]?
    /// The signed app transaction (StoreKit's `AppTransaction.shared.jwsRepresentation`): proof of the app's purchase
    /// that needs no sign-in prompt; nil when the store has none.
    func appTransaction() async throws -> String?
    /// Purchases the customer started on the App Store's product page (StoreKit's `PurchaseIntent.intents`).
    func promotedPurchases() -> AsyncStream<PromotedPurchase>
    /// What the store itself says the customer owns now, read on the device without any server (StoreKit's
    /// `Transaction.currentEntitlements`): backs the offline entitlements.
    func currentEntitlements() async throws -> [StoreTransaction]
    /// The App Store's manage-subscriptions sheet (`AppStore.showManageSubscriptions(in:)`); returns when it closes.
    func showManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws
    /// The App Store's refund sheet for one transaction (`Transaction.beginRefundRequest(for:in:)`).
    func beginRefundRequest(for transactionId: String, in confirmation: PurchaseConfirmation?) async throws -> RefundRequestStatus
    /// The App Store's offer-code sheet (`AppStore.presentOfferCodeRedeemSheet(in:)`); what is redeemed arrives
    /// through ``updates()``.
    func presentOfferCodeRedeemSheet(in confirmation: PurchaseConfirmation?) async throws
}

extension StoreAdapter {
    /// No promoted purchases unless the store has them.
    public func promotedPurchases() -> AsyncStream<PromotedPurchase> { AsyncStream { $0.finish() } }
    /// Nothing, unless the store can say it offline.
    public func currentEntitlements() async throws -> [StoreTransaction] { [] }
    /// None, unless the store signs one.
    public func appTransaction() async throws -> String? { nil }
    /// The receipt, unless the store offers its history.
    public func transactionHistory() async throws -> [StoreTransaction]? { nil }
    public func showManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws { throw StoreError.unsupported }
    public func beginRefundRequest(for transactionId: String, in confirmation: PurchaseConfirmation?) async throws -> RefundRequestStatus {
        throw StoreError.unsupported
    }
    public func presentOfferCodeRedeemSheet(in confirmation: PurchaseConfirmation?) async throws { throw StoreError.unsupported }
}
