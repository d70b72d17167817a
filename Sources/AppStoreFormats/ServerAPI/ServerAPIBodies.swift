import Foundation

/// `GET /inApps/v1/transactions/{transactionId}`
public struct TransactionInfoResponse: Codable, Hashable, Sendable {
    public var signedTransactionInfo: String?
    public init(signedTransactionInfo: String? = nil) { self.signedTransactionInfo = signedTransactionInfo }
}

/// `GET /inApps/v1/transactions/appTransactions/{id}`
public struct AppTransactionInfoResponse: Codable, Hashable, Sendable {
    public var signedAppTransactionInfo: String?
    public init(signedAppTransactionInfo: String? = nil) { self.signedAppTransactionInfo = signedAppTransactionInfo }
}

/// `GET /inApps/v2/history/{id}`: at most 20 signed transactions a page, continued with `revision`.
public struct HistoryResponse: Codable, Hashable, Sendable {
    public var revision: String?
    public var hasMore: Bool?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?
    public var signedTransactions: [String]?
    public init() {}
}

/// `GET /inApps/v1/subscriptions/{id}`
public struct StatusResponse: Codable, Hashable, Sendable {
    public var environment: AppStoreEnvironment?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var data: [SubscriptionGroupIdentifierItem]?
    public init() {}
}

/// One subscription group in a ``StatusResponse``.
public struct SubscriptionGroupIdentifierItem: Codable, Hashable, Sendable {
    public var subscriptionGroupIdentifier: String?
    public var lastTransactions: [LastTransactionsItem]?
    public init() {}
}

/// The latest state of one subscription in a group.
public struct LastTransactionsItem: Codable, Hashable, Sendable {
    public var status: SubscriptionStatus?
    public var originalTransactionId: String?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?
    public init() {}
}

/// `GET /inApps/v1/lookup/{orderId}`: `status` 0 valid, 1 invalid.
public struct OrderLookupResponse: Codable, Hashable, Sendable {
    public var status: Int?
    public var signedTransactions: [String]?
    public init() {}
}

/// `GET /inApps/v2/refund/lookup/{id}`
public struct RefundHistoryResponse: Codable, Hashable, Sendable {
    public var signedTransactions: [String]?
    public var revision: String?
    public var hasMore: Bool?
    public init() {}
}

/// `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`
public struct ExtendRenewalDateRequest: Codable, Hashable, Sendable {
    /// 1–90 days.
    public var extendByDays: Int?
    /// 0 undeclared, 1 customer satisfaction, 2 other, 3 service issue or outage.
    public var extendReasonCode: Int?
    /// At most 128 characters; makes the request idempotent.
    public var requestIdentifier: String?
    public init() {}
}

/// The answer to ``ExtendRenewalDateRequest``.
public struct ExtendRenewalDateResponse: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var success: Bool?
    public var effectiveDate: Date?
    public init() {}
}

/// `POST /inApps/v1/subscriptions/extend/mass`
public struct MassExtendRenewalDateRequest: Codable, Hashable, Sendable {
    public var extendByDays: Int?
    public var extendReasonCode: Int?
    public var requestIdentifier: String?
    public var storefrontCountryCodes: [String]?
    public var productId: String?
    public init() {}
}

/// The answer to ``MassExtendRenewalDateRequest``.
public struct MassExtendRenewalDateResponse: Codable, Hashable, Sendable {
    public var requestIdentifier: String?
    public init() {}
}

/// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`
public struct MassExtendRenewalDateStatusResponse: Codable, Hashable, Sendable {
    public var requestIdentifier: String?
    public var complete: Bool?
    public var completeDate: Date?
    public var succeededCount: Int64?
    public var failedCount: Int64?
    public init() {}
}

/// `PUT /inApps/v2/transactions/consumption/{transactionId}` (API 1.19), the answer to a `CONSUMPTION_REQUEST`.
public struct ConsumptionRequest: Codable, Hashable, Sendable {
    /// Must be true (4000035 otherwise): send nothing for a customer who did not consent.
    public var customerConsented: Bool?
    /// Required (4000041 when missing).
    public var sampleContentProvided: Bool?
    /// Required (4000036 when missing or unknown).
    public var deliveryStatus: DeliveryStatus?
    /// Milliunits, 0–100000; not for auto-renewable subscriptions (4000209: Apple computes theirs), 0 when undelivered.
    public var consumptionPercentage: Int?
    /// Optional (4000044 when unknown).
    public var refundPreference: RefundPreference?
    public init(customerConsented: Bool? = nil, sampleContentProvided: Bool? = nil, deliveryStatus: DeliveryStatus? = nil,
                consumptionPercentage: Int? = nil, refundPreference: RefundPreference? = nil) {
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.deliveryStatus = deliveryStatus
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

/// `deliveryStatus` of a ``ConsumptionRequest``.
public struct DeliveryStatus: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let delivered = Self(rawValue: "DELIVERED")
    public static let undeliveredQualityIssue = Self(rawValue: "UNDELIVERED_QUALITY_ISSUE")
    public static let undeliveredWrongItem = Self(rawValue: "UNDELIVERED_WRONG_ITEM")
    public static let undeliveredServerOutage = Self(rawValue: "UNDELIVERED_SERVER_OUTAGE")
    public static let undeliveredOther = Self(rawValue: "UNDELIVERED_OTHER")
    public static let known: Set<Self> = [.delivered, .undeliveredQualityIssue, .undeliveredWrongItem, .undeliveredServerOutage, .undeliveredOther]
}

/// `refundPreference` of a ``ConsumptionRequest``: what the developer would have Apple decide.
public struct RefundPreference: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let decline = Self(rawValue: "DECLINE")
    public static let grantFull = Self(rawValue: "GRANT_FULL")
    public static let grantProrated = Self(rawValue: "GRANT_PRORATED")
    public static let known: Set<Self> = [.decline, .grantFull, .grantProrated]
}

/// `PUT /inApps/v1/transactions/consumption/{transactionId}` (the older integer-coded form).
public struct ConsumptionRequestV1: Codable, Hashable, Sendable {
    public var customerConsented: Bool?
    public var consumptionStatus: Int?
    public var platform: Int?
    public var sampleContentProvided: Bool?
    public var deliveryStatus: Int?
    public var appAccountToken: String?
    public var accountTenure: Int?
    public var playTime: Int?
    public var lifetimeDollarsRefunded: Int?
    public var lifetimeDollarsPurchased: Int?
    public var userStatus: Int?
    public var refundPreference: Int?
    public init() {}
}

/// `POST /inApps/v1/notifications/test`
public struct SendTestNotificationResponse: Codable, Hashable, Sendable {
    public var testNotificationToken: String?
    public init(testNotificationToken: String? = nil) { self.testNotificationToken = testNotificationToken }
}

/// `GET /inApps/v1/notifications/test/{testNotificationToken}`
public struct CheckTestNotificationResponse: Codable, Hashable, Sendable {
    public var signedPayload: String?
    public var sendAttempts: [SendAttemptItem]?
    public init() {}
}

/// One delivery attempt of a notification.
public struct SendAttemptItem: Codable, Hashable, Sendable {
    public var attemptDate: Date?
    public var sendAttemptResult: SendAttemptResult?
    public init(attemptDate: Date? = nil, sendAttemptResult: SendAttemptResult? = nil) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}

/// `sendAttemptResult`.
public struct SendAttemptResult: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let success = Self(rawValue: "SUCCESS")
    public static let timedOut = Self(rawValue: "TIMED_OUT")
    public static let tlsIssue = Self(rawValue: "TLS_ISSUE")
    public static let circularRedirect = Self(rawValue: "CIRCULAR_REDIRECT")
    public static let noResponse = Self(rawValue: "NO_RESPONSE")
    public static let socketIssue = Self(rawValue: "SOCKET_ISSUE")
    public static let unsupportedCharset = Self(rawValue: "UNSUPPORTED_CHARSET")
    public static let invalidResponse = Self(rawValue: "INVALID_RESPONSE")
    public static let prematureClose = Self(rawValue: "PREMATURE_CLOSE")
    public static let unsuccessfulHTTPResponseCode = Self(rawValue: "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
    public static let other = Self(rawValue: "OTHER")
}

/// `POST /inApps/v1/notifications/history` body.
public struct NotificationHistoryRequest: Codable, Hashable, Sendable {
    public var startDate: Date?
    public var endDate: Date?
    public var notificationType: NotificationTypeV2?
    public var notificationSubtype: NotificationSubtype?
    public var transactionId: String?
    public var onlyFailures: Bool?
    public init() {}
}

/// `POST /inApps/v1/notifications/history` answer: at most 20 a page.
public struct NotificationHistoryResponse: Codable, Hashable, Sendable {
    public var paginationToken: String?
    public var hasMore: Bool?
    public var notificationHistory: [NotificationHistoryResponseItem]?
    public init() {}
}

/// One notification and its delivery attempts.
public struct NotificationHistoryResponseItem: Codable, Hashable, Sendable {
    public var signedPayload: String?
    public var sendAttempts: [SendAttemptItem]?
    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}

/// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`
public struct UpdateAppAccountTokenRequest: Codable, Hashable, Sendable {
    public var appAccountToken: UUID?
    public init(appAccountToken: UUID? = nil) { self.appAccountToken = appAccountToken }
}

/// The JSON body of a Server API error: `{"errorCode": 4040010, "errorMessage": "Transaction id not found."}`.
/// The HTTP status is the code's first three digits.
public struct APIErrorBody: Codable, Hashable, Sendable {
    public var errorCode: APIErrorCode
    public var errorMessage: String

    public init(_ errorCode: APIErrorCode, _ errorMessage: String) {
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }

    /// The HTTP status Apple pairs with this error.
    public var httpStatus: Int { errorCode.rawValue / 10_000 }
}

/// Server API `errorCode`; unknown values are kept.
public struct APIErrorCode: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let generalBadRequest = Self(rawValue: 4_000_000)
    public static let invalidAppIdentifier = Self(rawValue: 4_000_002)
    public static let invalidRequestRevision = Self(rawValue: 4_000_005)
    public static let invalidTransactionId = Self(rawValue: 4_000_006)
    public static let invalidOriginalTransactionId = Self(rawValue: 4_000_008)
    public static let invalidExtendByDays = Self(rawValue: 4_000_009)
    public static let invalidExtendReasonCode = Self(rawValue: 4_000_010)
    public static let invalidRequestIdentifier = Self(rawValue: 4_000_011)
    public static let startDateTooFarInPast = Self(rawValue: 4_000_012)
    public static let startDateAfterEndDate = Self(rawValue: 4_000_013)
    public static let invalidPaginationToken = Self(rawValue: 4_000_014)
    public static let invalidStartDate = Self(rawValue: 4_000_015)
    public static let invalidEndDate = Self(rawValue: 4_000_016)
    public static let paginationTokenExpired = Self(rawValue: 4_000_017)
    public static let invalidNotificationType = Self(rawValue: 4_000_018)
    public static let multipleFiltersSupplied = Self(rawValue: 4_000_019)
    public static let invalidTestNotificationToken = Self(rawValue: 4_000_020)
    public static let invalidSort = Self(rawValue: 4_000_021)
    public static let invalidProductType = Self(rawValue: 4_000_022)
    public static let invalidProductId = Self(rawValue: 4_000_023)
    public static let invalidSubscriptionGroupIdentifier = Self(rawValue: 4_000_024)
    public static let invalidInAppOwnershipType = Self(rawValue: 4_000_026)
    public static let invalidRevoked = Self(rawValue: 4_000_030)
    public static let invalidStatus = Self(rawValue: 4_000_031)
    public static let invalidAppAccountToken = Self(rawValue: 4_000_033)
    public static let invalidCustomerConsented = Self(rawValue: 4_000_035)
    public static let invalidDeliveryStatus = Self(rawValue: 4_000_036)
    public static let invalidSampleContentProvided = Self(rawValue: 4_000_041)
    public static let invalidRefundPreference = Self(rawValue: 4_000_044)
    public static let invalidTransactionTypeNotSupported = Self(rawValue: 4_000_047)
    public static let consumptionPercentageAutoRenewableSubscription = Self(rawValue: 4_000_209)
    public static let invalidTransactionNotConsumable = Self(rawValue: 4_000_043)
    public static let invalidEmptyStorefrontCountryCodeList = Self(rawValue: 4_000_027)
    public static let invalidStorefrontCountryCode = Self(rawValue: 4_000_028)
    public static let invalidAppAccountTokenUUID = Self(rawValue: 4_000_183)
    public static let familyTransactionNotSupported = Self(rawValue: 4_000_185)
    public static let transactionIdIsNotOriginalTransactionId = Self(rawValue: 4_000_187)
    public static let subscriptionExtensionIneligible = Self(rawValue: 4_030_004)
    public static let subscriptionMaxExtension = Self(rawValue: 4_030_005)
    public static let familySharedSubscriptionExtensionIneligible = Self(rawValue: 4_030_007)
    public static let accountNotFound = Self(rawValue: 4_040_001)
    public static let accountNotFoundRetryable = Self(rawValue: 4_040_002)
    public static let appNotFound = Self(rawValue: 4_040_003)
    public static let appNotFoundRetryable = Self(rawValue: 4_040_004)
    public static let originalTransactionIdNotFound = Self(rawValue: 4_040_005)
    public static let originalTransactionIdNotFoundRetryable = Self(rawValue: 4_040_006)
    public static let serverNotificationUrlNotFound = Self(rawValue: 4_040_007)
    public static let testNotificationNotFound = Self(rawValue: 4_040_008)
    public static let statusRequestNotFound = Self(rawValue: 4_040_009)
    public static let transactionIdNotFound = Self(rawValue: 4_040_010)
    public static let appTransactionDoesNotExist = Self(rawValue: 4_040_019)
    /// Send Consumption Information takes a transaction id, not the customer's app transaction id.
    public static let appTransactionIdNotSupported = Self(rawValue: 4_000_048)
    // Retention Messaging.
    public static let invalidImage = Self(rawValue: 4_000_161)
    public static let headerTooLong = Self(rawValue: 4_000_162)
    public static let bodyTooLong = Self(rawValue: 4_000_163)
    public static let invalidLocale = Self(rawValue: 4_000_164)
    public static let altTextTooLong = Self(rawValue: 4_000_175)
    public static let invalidPerformanceTestRequest = Self(rawValue: 4_000_211)
    public static let invalidRequestId = Self(rawValue: 4_000_212)
    public static let existingPerformanceTestRun = Self(rawValue: 4_000_213)
    public static let badRequestRealtimeURL = Self(rawValue: 4_000_215)
    public static let badRequestImageSize = Self(rawValue: 4_000_216)
    public static let badRequestTooManyBulletPoints = Self(rawValue: 4_000_218)
    public static let badRequestBulletPointTextTooLong = Self(rawValue: 4_000_219)
    public static let badRequestAboveImageRequiresAnImage = Self(rawValue: 4_000_224)
    public static let maximumNumberOfImagesReached = Self(rawValue: 4_030_014)
    public static let maximumNumberOfMessagesReached = Self(rawValue: 4_030_016)
    public static let messageNotApproved = Self(rawValue: 4_030_017)
    public static let imageNotApproved = Self(rawValue: 4_030_018)
    public static let imageInUse = Self(rawValue: 4_030_019)
    public static let forbiddenNoPassingTest = Self(rawValue: 4_030_026)
    public static let imageNotFound = Self(rawValue: 4_040_014)
    public static let messageNotFound = Self(rawValue: 4_040_015)
    public static let performanceTestRunNotFound = Self(rawValue: 4_040_018)
    public static let defaultMessageNotFound = Self(rawValue: 4_040_020)
    public static let realtimeURLNotFound = Self(rawValue: 4_040_021)
    public static let imageAlreadyExists = Self(rawValue: 4_090_000)
    public static let messageAlreadyExists = Self(rawValue: 4_090_001)
    public static let rateLimitExceeded = Self(rawValue: 4_290_000)
    public static let generalInternal = Self(rawValue: 5_000_000)
    public static let generalInternalRetryable = Self(rawValue: 5_000_001)
}
