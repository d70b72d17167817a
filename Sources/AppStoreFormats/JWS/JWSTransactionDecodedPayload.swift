import Foundation

/// The payload of a signed transaction (`signedTransactionInfo`, StoreKit 2 `Transaction.jwsRepresentation`).
/// Every field is optional, as in Apple's libraries; absent fields are omitted when encoding.
public struct JWSTransactionDecodedPayload: Codable, Hashable, Sendable {
    public var transactionId: String?
    public var originalTransactionId: String?
    /// One subscription billing period, stable across devices and restores.
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    /// End of the period (auto-renewable subscriptions only).
    public var expiresDate: Date?
    public var quantity: Int?
    public var type: ProductType?
    /// The UUID the app set on the purchase: IAPKit's order binding.
    public var appAccountToken: UUID?
    public var inAppOwnershipType: InAppOwnershipType?
    /// When the App Store signed this payload; the time the signing chain is checked at.
    public var signedDate: Date?
    public var revocationReason: RevocationReason?
    public var revocationDate: Date?
    public var isUpgraded: Bool?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    public var environment: AppStoreEnvironment?
    /// ISO 3166-1 alpha-3 storefront, e.g. `USA`.
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: TransactionReason?
    /// ISO 4217 currency of ``price``.
    public var currency: String?
    /// Price in milliunits of ``currency`` (10.99 → 10990).
    public var price: Int64?
    public var offerDiscountType: OfferDiscountType?
    /// ISO 8601 duration of the offer, e.g. `P1M`.
    public var offerPeriod: String?
    public var appTransactionId: String?
    public var revocationType: RevocationType?
    /// Milliunits: 50000 is 50 %.
    public var revocationPercentage: Int?
    public var billingPlanType: BillingPlanType?
    /// Advanced Commerce API purchases (`AdvancedCommerceTransactionInfo`) and API 1.21's commitment plans
    /// (`TransactionCommitmentInfo`), kept as Apple sent them.
    public var advancedCommerceInfo: AppStoreJSONValue?
    public var commitmentInfo: AppStoreJSONValue?
    /// A subscription migrated to the Advanced Commerce API: the original transaction id it had before (its series
    /// goes on under a new one).
    public var previousOriginalTransactionId: String?
    /// Xcode and StoreKit 2 device-verification fields.
    public var deviceVerification: String?
    public var deviceVerificationNonce: UUID?

    public init() {}
}

/// The payload of signed renewal info (`signedRenewalInfo`): what happens at the subscription's next renewal.
public struct JWSRenewalInfoDecodedPayload: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public var productId: String?
    /// The product that renews next (differs after a downgrade or crossgrade).
    public var autoRenewProductId: String?
    public var autoRenewStatus: AutoRenewStatus?
    public var expirationIntent: ExpirationIntent?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Date?
    public var priceIncreaseStatus: PriceIncreaseStatus?
    public var offerType: OfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var offerPeriod: String?
    public var signedDate: Date?
    public var environment: AppStoreEnvironment?
    /// Earliest start of the subscription, ignoring lapses shorter than 60 days.
    public var recentSubscriptionStartDate: Date?
    /// When the most recent purchase expires or renews.
    public var renewalDate: Date?
    public var currency: String?
    /// Milliunits of ``currency``.
    public var renewalPrice: Int64?
    public var eligibleWinBackOfferIds: [String]?
    public var appAccountToken: UUID?
    public var appTransactionId: String?
    public var renewalBillingPlanType: BillingPlanType?
    /// `AdvancedCommerceRenewalInfo` and `RenewalCommitmentInfo`, kept as Apple sent them.
    public var advancedCommerceInfo: AppStoreJSONValue?
    public var commitmentInfo: AppStoreJSONValue?

    public init() {}
}

/// The payload of a signed app transaction (`signedAppTransactionInfo`, StoreKit `AppTransaction`).
public struct AppTransactionDecodedPayload: Codable, Hashable, Sendable {
    /// `Production`, `Sandbox` or `Xcode`: the app transaction's environment.
    public var receiptType: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var applicationVersion: String?
    public var versionExternalIdentifier: Int64?
    /// Used as the signing date when checking the chain.
    public var receiptCreationDate: Date?
    public var originalPurchaseDate: Date?
    public var originalApplicationVersion: String?
    public var deviceVerification: String?
    public var deviceVerificationNonce: UUID?
    public var preorderDate: Date?
    public var appTransactionId: String?
    public var originalPlatform: PurchasePlatform?
    public var requestDate: Date?

    public init() {}
}
