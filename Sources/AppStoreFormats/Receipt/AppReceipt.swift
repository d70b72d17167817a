import Foundation

/// The decoded payload of an app receipt (`Bundle.main.appStoreReceiptURL`): what the App Store says about the app
/// and its in-app purchases. Decoding proves nothing; `AppStoreTrust` decides whether Apple signed it.
public struct AppReceipt: Sendable, Hashable {
    /// Attribute 0: `Production`, `ProductionSandbox`, `ProductionVPP`, `ProductionVPPSandbox` or `Xcode`.
    public var receiptType: ReceiptType?
    /// Attribute 1: the app's Apple id (`app_item_id`, `adam_id`); 0 in sandbox and Xcode.
    public var appItemId: Int64?
    /// Attribute 2: the bundle identifier.
    public var bundleId: String
    /// Attribute 2's raw value bytes (the DER UTF8String, tag and length included): one input of the device hash.
    public var bundleIdData: [UInt8]
    /// Attribute 3: `CFBundleVersion` (iOS) or `CFBundleShortVersionString` (macOS).
    public var applicationVersion: String
    /// Attribute 4: an opaque value, one input of the device hash.
    public var opaqueValue: [UInt8]
    /// Attribute 5: SHA-1 of device identifier ‖ opaque value ‖ bundle id bytes.
    public var sha1Hash: [UInt8]
    /// Attribute 10: the age rating, e.g. `4+`.
    public var ageRating: String?
    /// Attribute 12: when the receipt was created; the time its signing chain is checked at.
    public var receiptCreationDate: Date?
    /// Attribute 15: download id (0 in sandbox).
    public var downloadId: Int64?
    /// Attribute 16: version external identifier (0 in sandbox).
    public var versionExternalIdentifier: Int64?
    /// Attribute 18: when the app was first bought (a constant `2013-08-01T07:00:00Z` in sandbox).
    public var originalPurchaseDate: Date?
    /// Attribute 19: the app version first bought (`"1.0"` in sandbox).
    public var originalApplicationVersion: String?
    /// Attribute 21: expiry of a volume-purchase receipt; Xcode writes the sentinel 4001-01-01.
    public var expirationDate: Date?
    /// Attribute 17, one per purchase, in file order (which Apple does not sort).
    public var inAppPurchases: [InAppPurchaseReceipt]
    /// Every attribute IAPKit does not interpret, kept as it came so nothing Apple adds is lost.
    public var otherAttributes: [ReceiptAttribute]

    public init(
        receiptType: ReceiptType? = nil, appItemId: Int64? = nil, bundleId: String, bundleIdData: [UInt8]? = nil,
        applicationVersion: String, opaqueValue: [UInt8] = [], sha1Hash: [UInt8] = [], ageRating: String? = nil,
        receiptCreationDate: Date? = nil, downloadId: Int64? = nil, versionExternalIdentifier: Int64? = nil,
        originalPurchaseDate: Date? = nil, originalApplicationVersion: String? = nil, expirationDate: Date? = nil,
        inAppPurchases: [InAppPurchaseReceipt] = [], otherAttributes: [ReceiptAttribute] = []
    ) {
        self.receiptType = receiptType
        self.appItemId = appItemId
        self.bundleId = bundleId
        self.bundleIdData = bundleIdData ?? ASN1Writer.utf8String(bundleId)
        self.applicationVersion = applicationVersion
        self.opaqueValue = opaqueValue
        self.sha1Hash = sha1Hash
        self.ageRating = ageRating
        self.receiptCreationDate = receiptCreationDate
        self.downloadId = downloadId
        self.versionExternalIdentifier = versionExternalIdentifier
        self.originalPurchaseDate = originalPurchaseDate
        self.originalApplicationVersion = originalApplicationVersion
        self.expirationDate = expirationDate
        self.inAppPurchases = inAppPurchases
        self.otherAttributes = otherAttributes
    }
}

/// One in-app purchase record of an app receipt (attribute 17's SET).
public struct InAppPurchaseReceipt: Sendable, Hashable {
    /// 1701: number of items bought.
    public var quantity: Int?
    /// 1702
    public var productId: String
    /// 1703
    public var transactionId: String
    /// 1704: the charge time; for a renewal, the start of its period.
    public var purchaseDate: Date?
    /// 1705: the first transaction of a subscription series (absent in Xcode receipts).
    public var originalTransactionId: String?
    /// 1706
    public var originalPurchaseDate: Date?
    /// 1707: observed product type code (see ``InAppPurchaseReceipt/productType``).
    public var productTypeCode: Int64?
    /// 1708: end of the subscription period (auto-renewables).
    public var expiresDate: Date?
    /// 1711: one subscription billing period, stable across devices.
    public var webOrderLineItemId: Int64?
    /// 1712: refund time, or upgrade time for an upgraded-away subscription. Empty in the receipt means `nil`.
    public var cancellationDate: Date?
    /// 1713: the period was a free trial.
    public var isTrialPeriod: Bool?
    /// 1719: the period was a discounted introductory period.
    public var isInIntroOfferPeriod: Bool?
    /// 1721: the promotional offer redeemed, if any.
    public var promotionalOfferId: String?
    /// Every attribute IAPKit does not interpret (1709, 1710, 1714–1718, 1722, future ones), kept as it came.
    public var otherAttributes: [ReceiptAttribute]

    public init(
        quantity: Int? = 1, productId: String, transactionId: String, purchaseDate: Date? = nil,
        originalTransactionId: String? = nil, originalPurchaseDate: Date? = nil, productTypeCode: Int64? = nil,
        expiresDate: Date? = nil, webOrderLineItemId: Int64? = nil, cancellationDate: Date? = nil,
        isTrialPeriod: Bool? = nil, isInIntroOfferPeriod: Bool? = nil, promotionalOfferId: String? = nil,
        otherAttributes: [ReceiptAttribute] = []
    ) {
        self.quantity = quantity
        self.productId = productId
        self.transactionId = transactionId
        self.purchaseDate = purchaseDate
        self.originalTransactionId = originalTransactionId
        self.originalPurchaseDate = originalPurchaseDate
        self.productTypeCode = productTypeCode
        self.expiresDate = expiresDate
        self.webOrderLineItemId = webOrderLineItemId
        self.cancellationDate = cancellationDate
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.promotionalOfferId = promotionalOfferId
        self.otherAttributes = otherAttributes
    }

    /// The product type from attribute 1707 (−1/0/1/2/3 as observed), or `nil` when absent or unknown.
    public var productType: ProductType? {
        switch productTypeCode {
        case 0: .nonConsumable
        case 1: .consumable
        case 2: .nonRenewingSubscription
        case 3: .autoRenewableSubscription
        default: nil
        }
    }
}

/// A receipt attribute kept verbatim: its type, version and the raw bytes of its value OCTET STRING.
public struct ReceiptAttribute: Sendable, Hashable {
    public var type: Int64
    public var version: Int64
    public var value: [UInt8]

    public init(type: Int64, version: Int64, value: [UInt8]) {
        self.type = type
        self.version = version
        self.value = value
    }
}

/// The kind of receipt (attribute 0); unknown values are kept.
public struct ReceiptType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let production = Self(rawValue: "Production")
    public static let productionSandbox = Self(rawValue: "ProductionSandbox")
    public static let productionVPP = Self(rawValue: "ProductionVPP")
    public static let productionVPPSandbox = Self(rawValue: "ProductionVPPSandbox")
    public static let xcode = Self(rawValue: "Xcode")

    /// The environment this receipt type belongs to: `Sandbox`, `Production` or `Xcode`.
    public var environment: AppStoreEnvironment {
        switch self {
        case .production, .productionVPP: .production
        case .productionSandbox, .productionVPPSandbox: .sandbox
        case .xcode: .xcode
        default: AppStoreEnvironment(rawValue: rawValue)
        }
    }
}
