import AppStoreFormats
import Foundation

/// A verified App Store transaction as the ledger keeps it.
public struct PurchaseRecord: Sendable, Hashable {
    public var transactionId: String
    public var originalTransactionId: String
    /// The account it is bound to; nil while only a notification has told of it and no account claimed it yet.
    public var accountId: String?
    public var orderId: String?
    public var productId: String
    public var productType: ProductType
    public var environment: AppStoreEnvironment
    public var quantity: Int
    public var purchaseDate: Date
    /// Auto-renewable subscriptions: the end of this period, as Apple signed it.
    public var expiresDate: Date?
    public var revocationDate: Date?
    public var revocationReason: RevocationReason?
    /// Whether Apple refunded all of it, part of it (`REFUND_PRORATED`), or revoked a family member's copy.
    public var revocationType: RevocationType?
    /// How much Apple refunded, in milliunits of a percent (50000 is 50 %).
    public var revocationPercentage: Int?
    public var isUpgraded: Bool
    public var ownership: InAppOwnershipType?
    public var appAccountToken: UUID?
    /// The customer's app download (`appTransactionId`, App Store Server API 1.15): a key of the customer's install
    /// history that stays the same across reinstalls and devices.
    public var appTransactionId: String?
    /// When Apple signed what the ledger last learnt of it: later news wins, earlier news is history.
    public var signedDate: Date
    /// A subscription migrated to the Advanced Commerce API: its series' original transaction id before. Read when the
    /// transaction is bound (the migrated series goes to the old series' account), not stored.
    public var previousOriginalTransactionId: String?
    /// What the customer paid, as Apple signed it: milliunits of ``currency`` (10.99 → 10990). Nil when unknown (a
    /// purchase known only from a StoreKit 1 receipt carries no price); a free trial's 0 is a real 0.
    public var price: Int64?
    /// ISO 4217 currency of ``price``.
    public var currency: String?
    /// The offer the purchase was made under (1 introductory, 2 promotional, 3 offer code, 4 win-back), if any.
    public var offerType: OfferType?
    /// How the offer discounted it: `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`, `ONE_TIME`.
    public var offerDiscountType: OfferDiscountType?
    /// The offer's duration, ISO 8601 (`P1W`).
    public var offerPeriod: String?
    /// The customer's App Store storefront, ISO 3166-1 alpha-3 (`USA`).
    public var storefront: String?

    /// Takes the fields the ledger needs from a verified payload; a payload lacking one is refused. Its ids become the
    /// ledger's keys: an environment other than Apple's two is kept apart (``TransactionKey``).
    public init(_ payload: JWSTransactionDecodedPayload) throws {
        guard (payload.transactionId?.utf8.count ?? 0) <= 64 else {
            throw LedgerError(.invalidInput, "the transaction's id is longer than 64 bytes")
        }
        // The limits are on the ids as signed: a key is longer by its prefix, and is read back as it was written.
        var signed = payload
        if (signed.originalTransactionId?.utf8.count ?? 0) > 64 { signed.originalTransactionId = nil }
        if (signed.previousOriginalTransactionId?.utf8.count ?? 0) > 64 { signed.previousOriginalTransactionId = nil }
        try self.init(keyed: signed)
        let environment = environment
        transactionId = TransactionKey.key(transactionId, in: environment)
        originalTransactionId = TransactionKey.key(originalTransactionId, in: environment)
        previousOriginalTransactionId = previousOriginalTransactionId.map { TransactionKey.key($0, in: environment) }
    }

    /// A payload whose ids are the ledger's keys already (a stored row read back).
    init(keyed payload: JWSTransactionDecodedPayload) throws {
        let idLimit = 64 + (payload.environment.map { TransactionKey.keptApart($0) ? $0.rawValue.utf8.count + 1 : 0 } ?? 0)
        guard let transactionId = payload.transactionId, !transactionId.isEmpty, transactionId.utf8.count <= idLimit,
              let productId = payload.productId, !productId.isEmpty, productId.utf8.count <= 200,
              let purchaseDate = payload.purchaseDate, let type = payload.type else {
            throw LedgerError(.invalidInput, "the transaction lacks its id, product id, purchase date or type")
        }
        self.transactionId = transactionId
        originalTransactionId = payload.originalTransactionId.flatMap { $0.isEmpty || $0.utf8.count > idLimit ? nil : $0 } ?? transactionId
        self.productId = productId
        productType = type
        environment = payload.environment ?? .production
        quantity = max(1, min(payload.quantity ?? 1, 1_000))
        self.purchaseDate = purchaseDate
        expiresDate = payload.expiresDate
        revocationDate = payload.revocationDate
        revocationReason = payload.revocationReason
        revocationType = payload.revocationType
        revocationPercentage = payload.revocationPercentage
        isUpgraded = payload.isUpgraded ?? false
        ownership = payload.inAppOwnershipType
        // A family member's copy is the member's whatever token it carries: the purchaser's token names the purchaser's
        // order, and would send the member's copy there (Apple keeps tokens off copies; nothing here depends on it).
        appAccountToken = payload.inAppOwnershipType == .familyShared ? nil : payload.appAccountToken
        signedDate = payload.signedDate ?? purchaseDate
        appTransactionId = payload.appTransactionId.map { String($0.prefix(64)) }
        // A family member's copy would otherwise go to the purchaser's account, and end the purchaser's old series.
        previousOriginalTransactionId = payload.inAppOwnershipType == .familyShared ? nil
            : payload.previousOriginalTransactionId.flatMap { $0.isEmpty || $0.utf8.count > idLimit || $0 == originalTransactionId ? nil : $0 }
        // The money, as signed. A value longer than any Apple sends is dropped (unknown), not cut into another one.
        price = payload.price
        currency = Self.bounded(payload.currency, 16)
        offerType = payload.offerType
        offerDiscountType = Self.bounded(payload.offerDiscountType?.rawValue, 64).map(OfferDiscountType.init(rawValue:))
        offerPeriod = Self.bounded(payload.offerPeriod, 64)
        storefront = Self.bounded(payload.storefront, 16)
    }

    /// An auto-renewable period as the business view reads it back: the facts its rules read, the rest left unknown.
    /// Its ids are the ledger's keys already (as ``init(keyed:)``, without a payload of some fifty fields to fill and
    /// free for each of ~28,000 rows).
    init(period transactionId: String, originalTransactionId: String, productId: String, productType: ProductType,
         environment: AppStoreEnvironment, purchaseDate: Date, expiresDate: Date?, revocationDate: Date?, isUpgraded: Bool,
         ownership: InAppOwnershipType?, signedDate: Date, price: Int64?, currency: String?, offerDiscountType: OfferDiscountType?,
         offerPeriod: String?) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId.isEmpty ? transactionId : originalTransactionId
        self.productId = productId
        self.productType = productType
        self.environment = environment
        quantity = 1
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.isUpgraded = isUpgraded
        self.ownership = ownership
        self.signedDate = signedDate
        self.price = price
        self.currency = currency
        self.offerDiscountType = offerDiscountType
        self.offerPeriod = offerPeriod
    }

    private static func bounded(_ text: String?, _ limit: Int) -> String? {
        text.flatMap { $0.isEmpty || $0.utf8.count > limit ? nil : $0 }
    }

    /// The transaction's id as it was signed: what the app's StoreKit knows it by.
    public var signedTransactionId: String { TransactionKey.signedId(transactionId, in: environment) }
    /// The series' original transaction id as it was signed.
    public var signedOriginalTransactionId: String { TransactionKey.signedId(originalTransactionId, in: environment) }

    /// Whether Apple had revoked it (refund, family revocation) by `now`.
    public func isRevoked(at now: Date) -> Bool { revocationDate.map { Millis.of($0) <= Millis.of(now) } ?? false }

    /// This record with the news of `other` (the same transaction) when Apple signed that later: dates, revocation,
    /// upgrade. Which account and order it is bound to is the ledger's, not Apple's, and stays.
    func merged(with other: PurchaseRecord) -> PurchaseRecord {
        guard other.signedDate > signedDate else { return self }
        var newer = self
        newer.expiresDate = other.expiresDate
        newer.revocationDate = other.revocationDate
        newer.revocationReason = other.revocationReason
        newer.revocationType = other.revocationType
        newer.revocationPercentage = other.revocationPercentage
        newer.isUpgraded = other.isUpgraded
        newer.signedDate = other.signedDate
        // The price of a transaction does not change: later news fills what was unknown and never erases it.
        newer.price = price ?? other.price
        newer.currency = currency ?? other.currency
        newer.offerType = offerType ?? other.offerType
        newer.offerDiscountType = offerDiscountType ?? other.offerDiscountType
        newer.offerPeriod = offerPeriod ?? other.offerPeriod
        newer.storefront = storefront ?? other.storefront
        return newer
    }
}

/// What the ledger knows of an auto-renewable series from Apple's renewal info and notification status.
public struct SubscriptionRecord: Sendable, Hashable {
    public var originalTransactionId: String
    public var productId: String?
    public var status: SubscriptionStatus?
    public var expiresDate: Date?
    public var gracePeriodExpiresDate: Date?
    public var autoRenew: Bool?
    public var autoRenewProductId: String?
    public var signedDate: Date
    /// When the series' latest known period began, whoever holds it (another account of the app may, when it bought
    /// the upgrade or the resubscription on the same Apple ID).
    public var periodPurchaseDate: Date?
    /// The rest of Apple's renewal info: why the series expired (or will), whether Apple is retrying a failed renewal,
    /// the customer's answer to a price increase. Replaced together whenever renewal info comes (``autoRenew`` set):
    /// Apple leaves out what no longer applies.
    public var expirationIntent: ExpirationIntent?
    public var isInBillingRetryPeriod: Bool?
    public var priceIncreaseStatus: PriceIncreaseStatus?

    public init(originalTransactionId: String, productId: String? = nil, status: SubscriptionStatus? = nil, expiresDate: Date? = nil,
                gracePeriodExpiresDate: Date? = nil, autoRenew: Bool? = nil, autoRenewProductId: String? = nil, signedDate: Date,
                periodPurchaseDate: Date? = nil, expirationIntent: ExpirationIntent? = nil, isInBillingRetryPeriod: Bool? = nil,
                priceIncreaseStatus: PriceIncreaseStatus? = nil) {
        self.periodPurchaseDate = periodPurchaseDate
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.priceIncreaseStatus = priceIncreaseStatus
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.status = status
        self.expiresDate = expiresDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.autoRenew = autoRenew
        self.autoRenewProductId = autoRenewProductId
        self.signedDate = signedDate
    }
}

/// Milliseconds since 1970, the ledger's time unit in SQL.
enum Millis {
    static func of(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
    static var now: Int64 { of(Date()) }
}
