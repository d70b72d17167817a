import Foundation

// Retention Messaging API (2025–26): messages and images a developer uploads for Apple's review, a default message per
// product and locale, and the developer's "Get Retention Message" endpoint that the App Store calls in real time when a
// customer looks at a subscription they may cancel. Paths under `/inApps/v1/messaging`, on the Server API's hosts and
// with its JWT.

/// `PUT /inApps/v1/messaging/message/{messageIdentifier}`.
public struct UploadMessageRequestBody: Codable, Hashable, Sendable {
    /// At most 66 characters (4000162 otherwise).
    public var header: String?
    /// At most 144 characters (4000163 otherwise).
    public var body: String?
    public var image: UploadMessageImage?
    /// Where the header goes; `ABOVE_IMAGE` needs an image (4000224).
    public var headerPosition: HeaderPosition?
    /// At most 5 (4000218), each of at most 66 characters (4000219).
    public var bulletPoints: [BulletPoint]?

    public init(header: String? = nil, body: String? = nil, image: UploadMessageImage? = nil, headerPosition: HeaderPosition? = nil,
                bulletPoints: [BulletPoint]? = nil) {
        self.header = header
        self.body = body
        self.image = image
        self.headerPosition = headerPosition
        self.bulletPoints = bulletPoints
    }

    public static let maxHeaderLength = 66
    public static let maxBodyLength = 144
    public static let maxBulletPoints = 5
    public static let maxBulletPointLength = 66
    public static let maxAltTextLength = 150
}

/// The image of an uploaded message.
public struct UploadMessageImage: Codable, Hashable, Sendable {
    public var imageIdentifier: UUID?
    /// At most 150 characters (4000175).
    public var altText: String?
    public init(imageIdentifier: UUID? = nil, altText: String? = nil) {
        self.imageIdentifier = imageIdentifier
        self.altText = altText
    }
}

/// One bullet point of an uploaded message, with its image.
public struct BulletPoint: Codable, Hashable, Sendable {
    public var text: String?
    public var imageIdentifier: UUID?
    public var altText: String?
    public init(text: String? = nil, imageIdentifier: UUID? = nil, altText: String? = nil) {
        self.text = text
        self.imageIdentifier = imageIdentifier
        self.altText = altText
    }
}

/// `headerPosition`.
public struct HeaderPosition: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let aboveBody = Self(rawValue: "ABOVE_BODY")
    public static let aboveImage = Self(rawValue: "ABOVE_IMAGE")
    public static let known: Set<Self> = [.aboveBody, .aboveImage]
}

/// `imageSize`: the query parameter of Upload Image, and what Get Image List reports.
public struct ImageSize: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let fullSize = Self(rawValue: "FULL_SIZE")
    public static let bulletPoint = Self(rawValue: "BULLET_POINT")
    public static let known: Set<Self> = [.fullSize, .bulletPoint]
}

/// `imageState` and `messageState`: Apple reviews every image and message before customers may see it.
public struct RetentionContentState: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let pending = Self(rawValue: "PENDING")
    public static let approved = Self(rawValue: "APPROVED")
    public static let rejected = Self(rawValue: "REJECTED")
    public static let known: Set<Self> = [.pending, .approved, .rejected]
}

/// `GET /inApps/v1/messaging/image/list`.
public struct GetImageListResponse: Codable, Hashable, Sendable {
    public var imageIdentifiers: [GetImageListResponseItem]?
    public init(imageIdentifiers: [GetImageListResponseItem]? = nil) { self.imageIdentifiers = imageIdentifiers }
}

public struct GetImageListResponseItem: Codable, Hashable, Sendable {
    public var imageIdentifier: UUID?
    public var imageState: RetentionContentState?
    public var imageSize: ImageSize?
    public init(imageIdentifier: UUID? = nil, imageState: RetentionContentState? = nil, imageSize: ImageSize? = nil) {
        self.imageIdentifier = imageIdentifier
        self.imageState = imageState
        self.imageSize = imageSize
    }
}

/// `GET /inApps/v1/messaging/message/list`.
public struct GetMessageListResponse: Codable, Hashable, Sendable {
    public var messageIdentifiers: [GetMessageListResponseItem]?
    public init(messageIdentifiers: [GetMessageListResponseItem]? = nil) { self.messageIdentifiers = messageIdentifiers }
}

public struct GetMessageListResponseItem: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public var messageState: RetentionContentState?
    public init(messageIdentifier: UUID? = nil, messageState: RetentionContentState? = nil) {
        self.messageIdentifier = messageIdentifier
        self.messageState = messageState
    }
}

/// `PUT /inApps/v1/messaging/default/{productId}/{locale}`.
public struct DefaultConfigurationRequest: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public init(messageIdentifier: UUID? = nil) { self.messageIdentifier = messageIdentifier }
}

/// `GET /inApps/v1/messaging/default/{productId}/{locale}`.
public struct DefaultConfigurationResponse: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public init(messageIdentifier: UUID? = nil) { self.messageIdentifier = messageIdentifier }
}

/// `PUT` and `GET /inApps/v1/messaging/realtime/url`.
public struct RealtimeUrlRequest: Codable, Hashable, Sendable {
    /// At most 256 characters.
    public var realtimeURL: String?
    public init(realtimeURL: String? = nil) { self.realtimeURL = realtimeURL }
    public static let maxLength = 256
}

public typealias RealtimeUrlResponse = RealtimeUrlRequest

/// `POST /inApps/v1/messaging/performanceTest`: the subscription whose details the test's requests name.
public struct PerformanceTestRequest: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public init(originalTransactionId: String? = nil) { self.originalTransactionId = originalTransactionId }
}

/// How a performance test runs and what it takes to pass.
public struct PerformanceTestConfig: Codable, Hashable, Sendable {
    public var maxConcurrentRequests: Int?
    public var totalRequests: Int?
    /// Milliseconds.
    public var totalDuration: Int?
    /// Milliseconds a response may take and still count.
    public var responseTimeThreshold: Int?
    /// Percent of requests that must succeed within the threshold.
    public var successRateThreshold: Int?
    public init(maxConcurrentRequests: Int? = nil, totalRequests: Int? = nil, totalDuration: Int? = nil, responseTimeThreshold: Int? = nil,
                successRateThreshold: Int? = nil) {
        self.maxConcurrentRequests = maxConcurrentRequests
        self.totalRequests = totalRequests
        self.totalDuration = totalDuration
        self.responseTimeThreshold = responseTimeThreshold
        self.successRateThreshold = successRateThreshold
    }
}

public struct PerformanceTestResponse: Codable, Hashable, Sendable {
    public var config: PerformanceTestConfig?
    public var requestId: String?
    public init(config: PerformanceTestConfig? = nil, requestId: String? = nil) {
        self.config = config
        self.requestId = requestId
    }
}

/// `GET /inApps/v1/messaging/performanceTest/result/{requestId}`.
public struct PerformanceTestResultResponse: Codable, Hashable, Sendable {
    public var config: PerformanceTestConfig?
    /// The URL tested.
    public var target: String?
    public var result: PerformanceTestStatus?
    /// Percent.
    public var successRate: Int?
    public var numPending: Int?
    public var responseTimes: PerformanceTestResponseTimes?
    /// How many requests ended each way other than success.
    public var failures: [String: Int]?
    public init() {}
}

/// Milliseconds.
public struct PerformanceTestResponseTimes: Codable, Hashable, Sendable {
    public var average: Int?
    public var p50: Int?
    public var p90: Int?
    public var p95: Int?
    public var p99: Int?
    public init(average: Int? = nil, p50: Int? = nil, p90: Int? = nil, p95: Int? = nil, p99: Int? = nil) {
        self.average = average
        self.p50 = p50
        self.p90 = p90
        self.p95 = p95
        self.p99 = p99
    }
}

public struct PerformanceTestStatus: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let pending = Self(rawValue: "PENDING")
    public static let pass = Self(rawValue: "PASS")
    public static let fail = Self(rawValue: "FAIL")
}

/// What the App Store posts to the developer's Get Retention Message endpoint.
public struct RealtimeRequestBody: Codable, Hashable, Sendable {
    /// JWS signed by the App Store (the chain of notifications) over a ``DecodedRealtimeRequestBody``.
    public var signedPayload: String
    public init(signedPayload: String) { self.signedPayload = signedPayload }
}

public struct DecodedRealtimeRequestBody: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    /// Check it is the app's own: Apple asks developers not to answer requests naming another app.
    public var appAppleId: Int64?
    public var productId: String?
    /// The customer's locale, as `en-US`.
    public var userLocale: String?
    public var requestIdentifier: UUID?
    public var signedDate: Date?
    public var environment: AppStoreEnvironment?
    public init(originalTransactionId: String? = nil, appAppleId: Int64? = nil, productId: String? = nil, userLocale: String? = nil,
                requestIdentifier: UUID? = nil, signedDate: Date? = nil, environment: AppStoreEnvironment? = nil) {
        self.originalTransactionId = originalTransactionId
        self.appAppleId = appAppleId
        self.productId = productId
        self.userLocale = userLocale
        self.requestIdentifier = requestIdentifier
        self.signedDate = signedDate
        self.environment = environment
    }
}

/// The developer's answer: exactly one of a message, an alternate product or a promotional offer (each shown with a
/// message), or Advanced Commerce information.
public struct RealtimeResponseBody: Codable, Hashable, Sendable {
    public var message: RetentionMessage?
    public var alternateProduct: AlternateProduct?
    public var promotionalOffer: RetentionPromotionalOffer?
    public var advancedCommerceInfo: AppStoreJSONValue?
    public init(message: RetentionMessage? = nil, alternateProduct: AlternateProduct? = nil, promotionalOffer: RetentionPromotionalOffer? = nil,
                advancedCommerceInfo: AppStoreJSONValue? = nil) {
        self.message = message
        self.alternateProduct = alternateProduct
        self.promotionalOffer = promotionalOffer
        self.advancedCommerceInfo = advancedCommerceInfo
    }

    /// How many of the mutually exclusive choices the answer makes (Apple takes exactly one).
    public var choices: Int {
        [message != nil, alternateProduct != nil, promotionalOffer != nil, advancedCommerceInfo != nil].filter { $0 }.count
    }

    /// The message the answer shows, whichever choice it is.
    public var messageIdentifier: UUID? {
        message?.messageIdentifier ?? alternateProduct?.messageIdentifier ?? promotionalOffer?.messageIdentifier
    }
}

/// `message` of a real-time answer.
public struct RetentionMessage: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public init(messageIdentifier: UUID? = nil) { self.messageIdentifier = messageIdentifier }
}

/// `alternateProduct`: a message offering another subscription of the group.
public struct AlternateProduct: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public var productId: String?
    public var billingPlanType: BillingPlanType?
    public init(messageIdentifier: UUID? = nil, productId: String? = nil, billingPlanType: BillingPlanType? = nil) {
        self.messageIdentifier = messageIdentifier
        self.productId = productId
        self.billingPlanType = billingPlanType
    }
}

/// `promotionalOffer`: a message with a promotional offer the developer signed, in the JWS form (V2) or the legacy one.
public struct RetentionPromotionalOffer: Codable, Hashable, Sendable {
    public var messageIdentifier: UUID?
    public var promotionalOfferSignatureV2: String?
    public var promotionalOfferSignatureV1: PromotionalOfferSignatureV1?
    public init(messageIdentifier: UUID? = nil, promotionalOfferSignatureV2: String? = nil, promotionalOfferSignatureV1: PromotionalOfferSignatureV1? = nil) {
        self.messageIdentifier = messageIdentifier
        self.promotionalOfferSignatureV2 = promotionalOfferSignatureV2
        self.promotionalOfferSignatureV1 = promotionalOfferSignatureV1
    }
}

/// The legacy promotional-offer signature with what it signs.
public struct PromotionalOfferSignatureV1: Codable, Hashable, Sendable {
    public var encodedSignature: String?
    public var productId: String?
    public var nonce: UUID?
    /// Milliseconds since 1970.
    public var timestamp: Int64?
    public var keyId: String?
    public var offerIdentifier: String?
    public var appAccountToken: UUID?
    public init(encodedSignature: String? = nil, productId: String? = nil, nonce: UUID? = nil, timestamp: Int64? = nil, keyId: String? = nil,
                offerIdentifier: String? = nil, appAccountToken: UUID? = nil) {
        self.encodedSignature = encodedSignature
        self.productId = productId
        self.nonce = nonce
        self.timestamp = timestamp
        self.keyId = keyId
        self.offerIdentifier = offerIdentifier
        self.appAccountToken = appAccountToken
    }
}
