import Foundation

/// The body POSTed to `/verifyReceipt`.
public struct VerifyReceiptRequest: Codable, Hashable, Sendable {
    /// The base64 app receipt.
    public var receiptData: String
    /// The app's shared secret; required for auto-renewable subscriptions (21004 when wrong).
    public var password: String?
    /// Only the latest renewal of each subscription in `latest_receipt_info`.
    public var excludeOldTransactions: Bool?

    public init(receiptData: String, password: String? = nil, excludeOldTransactions: Bool? = nil) {
        self.receiptData = receiptData
        self.password = password
        self.excludeOldTransactions = excludeOldTransactions
    }

    enum CodingKeys: String, CodingKey {
        case receiptData = "receipt-data", password, excludeOldTransactions = "exclude-old-transactions"
    }

    public init(from decoder: any Decoder) throws {
        let fields = try LegacyReader(decoder)
        guard let receiptData = try fields.string("receipt-data") else {
            throw DecodingError.keyNotFound(AnyKey("receipt-data"), .init(codingPath: [], debugDescription: "receipt-data is required"))
        }
        self.receiptData = receiptData
        password = try fields.string("password")
        excludeOldTransactions = try fields.bool("exclude-old-transactions")
    }
}

/// verifyReceipt's `status`; unknown values are kept.
public struct VerifyReceiptStatus: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let valid = Self(rawValue: 0)
    public static let notPost = Self(rawValue: 21000)
    public static let malformedReceiptData = Self(rawValue: 21002)
    public static let notAuthenticated = Self(rawValue: 21003)
    public static let sharedSecretMismatch = Self(rawValue: 21004)
    public static let serviceUnavailable = Self(rawValue: 21005)
    public static let subscriptionExpired = Self(rawValue: 21006)
    public static let sandboxReceiptSentToProduction = Self(rawValue: 21007)
    public static let productionReceiptSentToSandbox = Self(rawValue: 21008)
    public static let internalDataAccessError = Self(rawValue: 21009)
    public static let accountNotFound = Self(rawValue: 21010)

    /// Whether asking again later may succeed (21002, 21005, 21009, and 21100–21199 per `is-retryable`).
    public var isTemporary: Bool {
        self == .malformedReceiptData || self == .serviceUnavailable || self == .internalDataAccessError
            || (21100...21199).contains(rawValue)
    }
}

/// The response of `/verifyReceipt`.
public struct VerifyReceiptResponse: Codable, Hashable, Sendable {
    public var status: VerifyReceiptStatus
    public var environment: AppStoreEnvironment?
    public var receipt: LegacyReceipt?
    /// The base64 latest receipt (only when the receipt holds auto-renewables).
    public var latestReceipt: String?
    public var latestReceiptInfo: [LegacyInAppPurchase]?
    public var pendingRenewalInfo: [LegacyPendingRenewalInfo]?
    /// `is-retryable` (hyphenated, as Apple spells it); for 21100–21199.
    public var isRetryable: Bool?

    public init(status: VerifyReceiptStatus, environment: AppStoreEnvironment? = nil, receipt: LegacyReceipt? = nil,
                latestReceipt: String? = nil, latestReceiptInfo: [LegacyInAppPurchase]? = nil,
                pendingRenewalInfo: [LegacyPendingRenewalInfo]? = nil, isRetryable: Bool? = nil) {
        self.status = status
        self.environment = environment
        self.receipt = receipt
        self.latestReceipt = latestReceipt
        self.latestReceiptInfo = latestReceiptInfo
        self.pendingRenewalInfo = pendingRenewalInfo
        self.isRetryable = isRetryable
    }

    public init(from decoder: any Decoder) throws {
        let fields = try LegacyReader(decoder)
        guard let status = try fields.int("status") else {
            throw DecodingError.keyNotFound(AnyKey("status"), .init(codingPath: [], debugDescription: "status is required"))
        }
        self.status = VerifyReceiptStatus(rawValue: Int(status))
        environment = try fields.string("environment").map(AppStoreEnvironment.init(rawValue:))
        receipt = try fields.decode(LegacyReceipt.self, "receipt")
        latestReceipt = try fields.string("latest_receipt")
        latestReceiptInfo = try fields.decode([LegacyInAppPurchase].self, "latest_receipt_info")
        pendingRenewalInfo = try fields.decode([LegacyPendingRenewalInfo].self, "pending_renewal_info")
        isRetryable = try fields.bool("is-retryable")
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = LegacyWriter(encoder)
        try fields.number("status", Int64(status.rawValue))
        try fields.string("environment", environment?.rawValue)
        try fields.encode("receipt", receipt)
        try fields.string("latest_receipt", latestReceipt)
        try fields.encode("latest_receipt_info", latestReceiptInfo)
        try fields.encode("pending_renewal_info", pendingRenewalInfo)
        try fields.encode("is-retryable", isRetryable)
    }
}

/// verifyReceipt's `receipt` object.
public struct LegacyReceipt: Codable, Hashable, Sendable {
    public var receiptType: String?
    public var adamId: Int64?
    public var appItemId: Int64?
    public var bundleId: String?
    public var applicationVersion: String?
    public var downloadId: Int64?
    public var versionExternalIdentifier: Int64?
    public var receiptCreationDate: Date?
    public var requestDate: Date?
    public var originalPurchaseDate: Date?
    public var originalApplicationVersion: String?
    public var preorderDate: Date?
    public var expirationDate: Date?
    public var inApp: [LegacyInAppPurchase]

    public init() { inApp = [] }

    public init(from decoder: any Decoder) throws {
        let f = try LegacyReader(decoder)
        receiptType = try f.string("receipt_type")
        adamId = try f.int("adam_id")
        appItemId = try f.int("app_item_id")
        bundleId = try f.string("bundle_id")
        applicationVersion = try f.string("application_version")
        downloadId = try f.int("download_id")
        versionExternalIdentifier = try f.int("version_external_identifier")
        receiptCreationDate = try f.date("receipt_creation_date")
        requestDate = try f.date("request_date")
        originalPurchaseDate = try f.date("original_purchase_date")
        originalApplicationVersion = try f.string("original_application_version")
        preorderDate = try f.date("preorder_date")
        expirationDate = try f.date("expiration_date")
        inApp = try f.decode([LegacyInAppPurchase].self, "in_app") ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var f = LegacyWriter(encoder)
        try f.string("receipt_type", receiptType)
        try f.number("adam_id", adamId)
        try f.number("app_item_id", appItemId)
        try f.string("bundle_id", bundleId)
        try f.string("application_version", applicationVersion)
        try f.number("download_id", downloadId)
        try f.number("version_external_identifier", versionExternalIdentifier)
        try f.date("receipt_creation_date", receiptCreationDate)
        try f.date("request_date", requestDate)
        try f.date("original_purchase_date", originalPurchaseDate)
        try f.string("original_application_version", originalApplicationVersion)
        try f.date("preorder_date", preorderDate)
        try f.date("expiration_date", expirationDate)
        try f.encode("in_app", inApp)
    }
}

/// An element of verifyReceipt's `in_app` or `latest_receipt_info`.
public struct LegacyInAppPurchase: Codable, Hashable, Sendable {
    public var quantity: Int64?
    public var productId: String?
    public var transactionId: String?
    public var originalTransactionId: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var webOrderLineItemId: String?
    public var isTrialPeriod: Bool?
    public var isInIntroOfferPeriod: Bool?
    public var cancellationDate: Date?
    /// "1" issue in the app, "0" other.
    public var cancellationReason: String?
    public var promotionalOfferId: String?
    public var inAppOwnershipType: String?
    public var isUpgraded: Bool?
    public var offerCodeRefName: String?
    public var subscriptionGroupIdentifier: String?
    public var appAccountToken: String?

    public init() {}

    public init(from decoder: any Decoder) throws {
        let f = try LegacyReader(decoder)
        quantity = try f.int("quantity")
        productId = try f.string("product_id")
        transactionId = try f.string("transaction_id")
        originalTransactionId = try f.string("original_transaction_id")
        purchaseDate = try f.date("purchase_date")
        originalPurchaseDate = try f.date("original_purchase_date")
        expiresDate = try f.date("expires_date")
        webOrderLineItemId = try f.string("web_order_line_item_id")
        isTrialPeriod = try f.bool("is_trial_period")
        isInIntroOfferPeriod = try f.bool("is_in_intro_offer_period")
        cancellationDate = try f.date("cancellation_date")
        cancellationReason = try f.string("cancellation_reason")
        promotionalOfferId = try f.string("promotional_offer_id")
        inAppOwnershipType = try f.string("in_app_ownership_type")
        isUpgraded = try f.bool("is_upgraded")
        offerCodeRefName = try f.string("offer_code_ref_name")
        subscriptionGroupIdentifier = try f.string("subscription_group_identifier")
        appAccountToken = try f.string("app_account_token")
    }

    public func encode(to encoder: any Encoder) throws {
        var f = LegacyWriter(encoder)
        try f.stringInt("quantity", quantity)
        try f.string("product_id", productId)
        try f.string("transaction_id", transactionId)
        try f.string("original_transaction_id", originalTransactionId)
        try f.date("purchase_date", purchaseDate)
        try f.date("original_purchase_date", originalPurchaseDate)
        try f.date("expires_date", expiresDate)
        try f.string("web_order_line_item_id", webOrderLineItemId)
        try f.stringBool("is_trial_period", isTrialPeriod)
        try f.stringBool("is_in_intro_offer_period", isInIntroOfferPeriod)
        try f.date("cancellation_date", cancellationDate)
        try f.string("cancellation_reason", cancellationReason)
        try f.string("promotional_offer_id", promotionalOfferId)
        try f.string("in_app_ownership_type", inAppOwnershipType)
        try f.stringBool("is_upgraded", isUpgraded)
        try f.string("offer_code_ref_name", offerCodeRefName)
        try f.string("subscription_group_identifier", subscriptionGroupIdentifier)
        try f.string("app_account_token", appAccountToken)
    }
}

/// An element of verifyReceipt's `pending_renewal_info`.
public struct LegacyPendingRenewalInfo: Codable, Hashable, Sendable {
    public var autoRenewProductId: String?
    public var autoRenewStatus: Bool?
    public var expirationIntent: String?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Date?
    public var priceConsentStatus: String?
    public var priceIncreaseStatus: String?
    public var originalTransactionId: String?
    public var productId: String?
    public var offerCodeRefName: String?
    public var promotionalOfferId: String?

    public init() {}

    public init(from decoder: any Decoder) throws {
        let f = try LegacyReader(decoder)
        autoRenewProductId = try f.string("auto_renew_product_id")
        autoRenewStatus = try f.bool("auto_renew_status")
        expirationIntent = try f.string("expiration_intent")
        isInBillingRetryPeriod = try f.bool("is_in_billing_retry_period")
        gracePeriodExpiresDate = try f.date("grace_period_expires_date")
        priceConsentStatus = try f.string("price_consent_status")
        priceIncreaseStatus = try f.string("price_increase_status")
        originalTransactionId = try f.string("original_transaction_id")
        productId = try f.string("product_id")
        offerCodeRefName = try f.string("offer_code_ref_name")
        promotionalOfferId = try f.string("promotional_offer_id")
    }

    public func encode(to encoder: any Encoder) throws {
        var f = LegacyWriter(encoder)
        try f.string("auto_renew_product_id", autoRenewProductId)
        // These two flags are "1"/"0" strings, unlike the "true"/"false" of in_app.
        try f.string("auto_renew_status", autoRenewStatus.map { $0 ? "1" : "0" })
        try f.string("expiration_intent", expirationIntent)
        try f.string("is_in_billing_retry_period", isInBillingRetryPeriod.map { $0 ? "1" : "0" })
        try f.date("grace_period_expires_date", gracePeriodExpiresDate)
        try f.string("price_consent_status", priceConsentStatus)
        try f.string("price_increase_status", priceIncreaseStatus)
        try f.string("original_transaction_id", originalTransactionId)
        try f.string("product_id", productId)
        try f.string("offer_code_ref_name", offerCodeRefName)
        try f.string("promotional_offer_id", promotionalOfferId)
    }
}

extension LegacyReceipt {
    /// The `receipt` object verifyReceipt would return for a decoded app receipt.
    public init(_ receipt: AppReceipt, requestDate: Date? = nil) {
        self.init()
        receiptType = receipt.receiptType?.rawValue
        adamId = receipt.appItemId
        appItemId = receipt.appItemId
        bundleId = receipt.bundleId
        applicationVersion = receipt.applicationVersion
        downloadId = receipt.downloadId
        versionExternalIdentifier = receipt.versionExternalIdentifier
        receiptCreationDate = receipt.receiptCreationDate
        self.requestDate = requestDate
        originalPurchaseDate = receipt.originalPurchaseDate
        originalApplicationVersion = receipt.originalApplicationVersion
        expirationDate = receipt.expirationDate
        inApp = receipt.inAppPurchases.map(LegacyInAppPurchase.init)
    }
}

extension LegacyInAppPurchase {
    /// The `in_app` element verifyReceipt would return for a decoded receipt record.
    public init(_ record: InAppPurchaseReceipt) {
        self.init()
        quantity = record.quantity.map(Int64.init)
        productId = record.productId
        transactionId = record.transactionId
        originalTransactionId = record.originalTransactionId
        purchaseDate = record.purchaseDate
        originalPurchaseDate = record.originalPurchaseDate
        expiresDate = record.expiresDate
        webOrderLineItemId = record.webOrderLineItemId.flatMap { $0 == 0 ? nil : String($0) }
        // Apple reports both flags for every record it reports a subscription period for.
        isTrialPeriod = record.isTrialPeriod ?? (record.expiresDate != nil ? false : nil)
        isInIntroOfferPeriod = record.isInIntroOfferPeriod ?? (record.expiresDate != nil ? false : nil)
        cancellationDate = record.cancellationDate
        promotionalOfferId = record.promotionalOfferId
    }
}

extension LegacyInAppPurchase {
    /// The `latest_receipt_info` element verifyReceipt reports for a transaction.
    public init(_ payload: JWSTransactionDecodedPayload) {
        self.init()
        quantity = payload.quantity.map(Int64.init)
        productId = payload.productId
        transactionId = payload.transactionId
        originalTransactionId = payload.originalTransactionId
        purchaseDate = payload.purchaseDate
        originalPurchaseDate = payload.originalPurchaseDate
        expiresDate = payload.expiresDate
        webOrderLineItemId = payload.webOrderLineItemId
        isTrialPeriod = payload.expiresDate == nil ? nil : payload.offerDiscountType == .freeTrial
        isInIntroOfferPeriod = payload.expiresDate == nil ? nil : (payload.offerType == .introductoryOffer && payload.offerDiscountType != .freeTrial)
        cancellationDate = payload.revocationDate
        cancellationReason = payload.revocationReason.map { String($0.rawValue) }
        inAppOwnershipType = payload.inAppOwnershipType?.rawValue
        isUpgraded = payload.isUpgraded
        subscriptionGroupIdentifier = payload.subscriptionGroupIdentifier
        appAccountToken = payload.appAccountToken?.lowercasedString
    }
}

extension JWSTransactionDecodedPayload {
    /// A verifyReceipt `in_app` / `latest_receipt_info` element as a transaction payload. verifyReceipt reports no
    /// product type and no signing date: `type` comes from the caller's catalog, `signedDate` is when Apple answered.
    public init(_ legacy: LegacyInAppPurchase, bundleId: String?, environment: AppStoreEnvironment?, type: ProductType?, answeredAt: Date) {
        self.init()
        transactionId = legacy.transactionId
        originalTransactionId = legacy.originalTransactionId ?? legacy.transactionId
        productId = legacy.productId
        self.bundleId = bundleId
        purchaseDate = legacy.purchaseDate
        originalPurchaseDate = legacy.originalPurchaseDate
        expiresDate = legacy.expiresDate
        quantity = legacy.quantity.map { Int(clamping: $0) }
        self.type = type ?? (legacy.expiresDate != nil ? .autoRenewableSubscription : nil)
        webOrderLineItemId = legacy.webOrderLineItemId
        revocationDate = legacy.cancellationDate
        revocationReason = legacy.cancellationReason.flatMap { Int($0) }.map(RevocationReason.init(rawValue:))
        isUpgraded = legacy.isUpgraded
        subscriptionGroupIdentifier = legacy.subscriptionGroupIdentifier
        appAccountToken = legacy.appAccountToken.flatMap(UUID.init(uuidString:))
        inAppOwnershipType = legacy.inAppOwnershipType.map(InAppOwnershipType.init(rawValue:))
        self.environment = environment
        signedDate = answeredAt
    }
}
