import AppStoreFormats
import Foundation

/// Retention Messaging as Apple keeps it: images and messages under review, a default message per product and locale,
/// the developer's Get Retention Message URL per environment, and performance tests of that URL. Apple's sandbox approves
/// content at once; elsewhere it waits for ``reviewRetentionContent(_:state:)`` (Apple's reviewers).
extension StoreEngine {
    /// Limits Apple documents: 2000 images and 2000 messages an app.
    public static let maxRetentionImages = 2000
    public static let maxRetentionMessages = 2000

    /// A Retention Messaging call refused with Apple's error.
    public struct RetentionRefusal: Error, Sendable, Hashable {
        public var code: APIErrorCode
        public var message: String
        init(_ code: APIErrorCode, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    private var retention: StoreState.Retention {
        get { state.retention ?? StoreState.Retention() }
        set { state.retention = newValue }
    }

    private var initialContentState: RetentionContentState { environment == .sandbox ? .approved : .pending }

    // MARK: Images

    public func uploadRetentionImage(_ id: UUID, png: [UInt8], size: ImageSize) throws {
        let key = id.lowercasedString
        guard retention.images[key] == nil else { throw RetentionRefusal(.imageAlreadyExists, "Image already exists.") }
        guard retention.images.count < Self.maxRetentionImages else {
            throw RetentionRefusal(.maximumNumberOfImagesReached, "The maximum number of images is reached.")
        }
        guard let header = PNGImageHeader.parse(png), !header.hasTransparency else {
            throw RetentionRefusal(.invalidImage, "Invalid request. The image is invalid.")
        }
        let fits = size == .bulletPoint ? header.width == 1024 && header.height == 1024 : header.width == 3840 && (160...2160).contains(header.height)
        guard fits else { throw RetentionRefusal(.invalidImage, "Invalid request. The image is invalid.") }
        retention.images[key] = .init(size: size, state: initialContentState, width: header.width, height: header.height)
        try persist()
    }

    public func deleteRetentionImage(_ id: UUID) throws {
        let key = id.lowercasedString
        guard retention.images[key] != nil else { throw RetentionRefusal(.imageNotFound, "Image not found.") }
        guard !retention.messages.values.contains(where: { $0.imageIds.contains(key) }) else {
            throw RetentionRefusal(.imageInUse, "The image is in use by a message.")
        }
        retention.images[key] = nil
        try persist()
    }

    public func retentionImages() -> GetImageListResponse {
        GetImageListResponse(imageIdentifiers: retention.images.sorted { $0.key < $1.key }.map {
            GetImageListResponseItem(imageIdentifier: UUID(uuidString: $0.key), imageState: $0.value.state, imageSize: $0.value.size)
        })
    }

    // MARK: Messages

    /// Lengths count Unicode code points, as Apple's libraries do (`max_len`), not grapheme clusters.
    public func uploadRetentionMessage(_ id: UUID, _ body: UploadMessageRequestBody) throws {
        let key = id.lowercasedString
        typealias Limits = UploadMessageRequestBody
        guard let header = body.header, header.unicodeScalars.count <= Limits.maxHeaderLength else { throw RetentionRefusal(.headerTooLong, "Invalid request. The header is too long.") }
        guard let text = body.body, text.unicodeScalars.count <= Limits.maxBodyLength else { throw RetentionRefusal(.bodyTooLong, "Invalid request. The body is too long.") }
        guard !header.isEmpty, !text.isEmpty else { throw RetentionRefusal(.generalBadRequest, "Invalid request. A message needs a header and a body.") }
        if let image = body.image {
            guard (image.altText ?? "").unicodeScalars.count <= Limits.maxAltTextLength else { throw RetentionRefusal(.altTextTooLong, "Invalid request. The alt text is too long.") }
            // The message's image is a full-size one (bullet-point images are for bullet points).
            if let imageId = image.imageIdentifier, let stored = retention.images[imageId.lowercasedString], stored.size != .fullSize {
                throw RetentionRefusal(.badRequestImageSize, "Invalid request. The image's size is invalid.")
            }
            guard image.imageIdentifier != nil else { throw RetentionRefusal(.generalBadRequest, "Invalid request. The image needs an imageIdentifier.") }
        }
        if let position = body.headerPosition {
            guard HeaderPosition.known.contains(position) else { throw RetentionRefusal(.generalBadRequest, "Invalid request. The header position is invalid.") }
            if position == .aboveImage, body.image == nil {
                throw RetentionRefusal(.badRequestAboveImageRequiresAnImage, "Invalid request. A header above the image requires an image.")
            }
        }
        if let points = body.bulletPoints {
            guard points.count <= Limits.maxBulletPoints else { throw RetentionRefusal(.badRequestTooManyBulletPoints, "Invalid request. Too many bullet points.") }
            for point in points {
                guard let text = point.text, text.unicodeScalars.count <= Limits.maxBulletPointLength else {
                    throw RetentionRefusal(.badRequestBulletPointTextTooLong, "Invalid request. The bullet point text is too long.")
                }
                guard (point.altText ?? "").unicodeScalars.count <= Limits.maxAltTextLength else { throw RetentionRefusal(.altTextTooLong, "Invalid request. The alt text is too long.") }
                guard let imageId = point.imageIdentifier else { throw RetentionRefusal(.generalBadRequest, "Invalid request. A bullet point needs an imageIdentifier.") }
                if let stored = retention.images[imageId.lowercasedString], stored.size != .bulletPoint {
                    throw RetentionRefusal(.badRequestImageSize, "Invalid request. The image's size is invalid.")
                }
            }
        }
        guard retention.messages[key] == nil else { throw RetentionRefusal(.messageAlreadyExists, "Message already exists.") }
        guard retention.messages.count < Self.maxRetentionMessages else {
            throw RetentionRefusal(.maximumNumberOfMessagesReached, "The maximum number of messages is reached.")
        }
        retention.messages[key] = .init(body: body, state: initialContentState)
        try persist()
    }

    public func deleteRetentionMessage(_ id: UUID) throws {
        let key = id.lowercasedString
        guard retention.messages[key] != nil else { throw RetentionRefusal(.messageNotFound, "Message not found.") }
        retention.messages[key] = nil
        try persist()
    }

    public func retentionMessages() -> GetMessageListResponse {
        GetMessageListResponse(messageIdentifiers: retention.messages.sorted { $0.key < $1.key }.map {
            GetMessageListResponseItem(messageIdentifier: UUID(uuidString: $0.key), messageState: $0.value.state)
        })
    }

    /// Apple's review of an image or a message (the simulator's `/sim` control): `APPROVED` or `REJECTED`.
    /// Returns false when no image or message has the id.
    public func reviewRetentionContent(_ id: UUID, state newState: RetentionContentState) throws -> Bool {
        let key = id.lowercasedString
        if retention.images[key] != nil {
            retention.images[key]?.state = newState
        } else if retention.messages[key] != nil {
            retention.messages[key]?.state = newState
        } else {
            return false
        }
        try persist()
        return true
    }

    // MARK: Default messages

    /// App Store locale codes are case-sensitive: a language (`de`), with a region (`en-US`) or a script (`zh-Hans`).
    static func isAppStoreLocale(_ locale: String) -> Bool {
        let parts = locale.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), (2...3).contains(parts[0].count), parts[0].allSatisfy({ $0.isASCII && $0.isLowercase }) else { return false }
        guard parts.count == 2 else { return true }
        let rest = parts[1]
        let region = rest.count == 2 && rest.allSatisfy { $0.isASCII && $0.isUppercase }
        let script = rest.count == 4 && rest.first!.isASCII && rest.first!.isUppercase && rest.dropFirst().allSatisfy { $0.isASCII && $0.isLowercase }
        return region || script
    }

    private func checkDefaultKey(productId: String, locale: String) throws {
        // Apple documents InvalidProductIdError here without its code; the Server API's invalid product id (4000023) is used.
        guard catalog.product(productId)?.type == .autoRenewableSubscription else { throw RetentionRefusal(.invalidProductId, "Invalid request. The product id is invalid.") }
        guard Self.isAppStoreLocale(locale) else { throw RetentionRefusal(.invalidLocale, "Invalid request. Locale is invalid.") }
    }

    public func configureDefaultRetentionMessage(productId: String, locale: String, messageIdentifier: UUID?) throws {
        try checkDefaultKey(productId: productId, locale: locale)
        guard let messageId = messageIdentifier?.lowercasedString, let message = retention.messages[messageId] else {
            throw RetentionRefusal(.messageNotFound, "Message not found.")
        }
        guard message.state == .approved else { throw RetentionRefusal(.messageNotApproved, "The message is not approved.") }
        guard message.imageIds.allSatisfy({ retention.images[$0]?.state == .approved }) else {
            throw RetentionRefusal(.imageNotApproved, "The message's image is not approved.")
        }
        retention.defaults[StoreState.Retention.defaultKey(productId, locale)] = messageId
        try persist()
    }

    public func deleteDefaultRetentionMessage(productId: String, locale: String) throws {
        try checkDefaultKey(productId: productId, locale: locale)
        retention.defaults[StoreState.Retention.defaultKey(productId, locale)] = nil
        try persist()
    }

    public func defaultRetentionMessage(productId: String, locale: String) throws -> UUID {
        try checkDefaultKey(productId: productId, locale: locale)
        guard let id = retention.defaults[StoreState.Retention.defaultKey(productId, locale)].flatMap(UUID.init(uuidString:)) else {
            throw RetentionRefusal(.defaultMessageNotFound, "Default message not found.")
        }
        return id
    }

    // MARK: Realtime URL

    /// Sets the Get Retention Message URL of `environment` (the simulator's own unless said): `https://`, at most 256
    /// characters. Production takes one only after a performance test passed. `allowInsecure` lets tests use plain
    /// HTTP on loopback.
    public func configureRealtimeURL(_ text: String?, environment: AppStoreEnvironment? = nil, allowInsecure: Bool = false) throws {
        let environment = environment ?? self.environment
        guard let text, text.count <= RealtimeUrlRequest.maxLength, let url = URL(string: text), url.host != nil,
              url.scheme == "https" || (allowInsecure && url.scheme == "http") else {
            throw RetentionRefusal(.badRequestRealtimeURL, "Invalid request. The url is invalid.")
        }
        // The pass must be of the sandbox URL as it is now: a slower endpoint put there since has not passed.
        let sandboxURL = retention.realtimeURLs[AppStoreEnvironment.sandbox.rawValue]
        if environment == .production, !retention.performanceTests.values.contains(where: { $0.result == .pass && $0.target == sandboxURL }) {
            throw RetentionRefusal(.forbiddenNoPassingTest, "A passing performance test is required before configuring the production URL.")
        }
        retention.realtimeURLs[environment.rawValue] = text
        try persist()
    }

    public func deleteRealtimeURL(environment: AppStoreEnvironment? = nil) throws {
        retention.realtimeURLs[(environment ?? self.environment).rawValue] = nil
        try persist()
    }

    public func realtimeURL(environment: AppStoreEnvironment? = nil) -> String? {
        retention.realtimeURLs[(environment ?? self.environment).rawValue]
    }

    // MARK: What the customer sees

    /// What the App Store needs to ask the developer for a retention message: the series' current product and locale,
    /// for an active subscription the customer is paying for.
    public struct RetentionAsk: Sendable {
        public var request: DecodedRealtimeRequestBody
        public var signedPayload: String
        public var url: URL?
        public var group: String
    }

    /// The signed request for series `originalTransactionId` viewed in `userLocale`; nil unless it is an active, owned
    /// (not family-shared) auto-renewable subscription. `url` is the URL of `environment` (the simulator's own unless said).
    public func retentionAsk(originalTransactionId: String, userLocale: String, environment: AppStoreEnvironment? = nil) throws -> RetentionAsk? {
        try processSubscriptions()
        guard let series = state.subscriptions[originalTransactionId], series.sharedFrom == nil, series.phase == .active else { return nil }
        let request = DecodedRealtimeRequestBody(originalTransactionId: originalTransactionId, appAppleId: catalog.appAppleId, productId: series.productId,
                                                 userLocale: userLocale, requestIdentifier: UUID(), signedDate: clock.now,
                                                 environment: environment ?? self.environment)
        return RetentionAsk(request: request, signedPayload: try minter.sign(request),
                            url: realtimeURL(environment: environment).flatMap(URL.init(string:)), group: series.group)
    }

    /// Why the developer's answer is not shown (the default message is, if there is one).
    public enum RetentionAnswerProblem: String, Sendable, Codable {
        case notOneChoice = "NOT_ONE_CHOICE"
        case messageNotFound = "MESSAGE_NOT_FOUND"
        case messageNotApproved = "MESSAGE_NOT_APPROVED"
        case imageNotApproved = "IMAGE_NOT_APPROVED"
        case messageHasImage = "MESSAGE_HAS_IMAGE"
        case productNotInGroup = "PRODUCT_NOT_IN_GROUP"
        case offerInvalid = "OFFER_INVALID"
        case notAdvancedCommerce = "NOT_ADVANCED_COMMERCE"
    }

    /// Judges a developer's answer as the App Store does before showing it. `offer` is what a promotional offer's
    /// signature names when it is valid (the app's key, fresh, for this customer), nil otherwise.
    public func judgeRetentionAnswer(_ answer: RealtimeResponseBody, ask: RetentionAsk,
                                     offer: (productId: String, offerIdentifier: String)?) -> RetentionAnswerProblem? {
        guard answer.choices == 1 else { return .notOneChoice }
        if answer.advancedCommerceInfo != nil { return .notAdvancedCommerce }
        guard let id = answer.messageIdentifier?.lowercasedString, let message = retention.messages[id] else { return .messageNotFound }
        guard message.state == .approved else { return .messageNotApproved }
        guard message.imageIds.allSatisfy({ retention.images[$0]?.state == .approved }) else { return .imageNotApproved }
        if let alternate = answer.alternateProduct {
            guard message.imageIds.isEmpty else { return .messageHasImage }
            guard let product = catalog.product(alternate.productId ?? ""), product.subscriptionGroupIdentifier == ask.group else { return .productNotInGroup }
        }
        if answer.promotionalOffer != nil {
            guard message.imageIds.isEmpty else { return .messageHasImage }
            guard let (productId, offerIdentifier) = offer, let product = catalog.product(productId),
                  product.subscriptionGroupIdentifier == ask.group, product.promotionalOffers.contains(where: { $0.offerId == offerIdentifier }) else {
                return .offerInvalid
            }
        }
        return nil
    }

    /// The default message for a product and locale, if one is set and can be shown: Apple shows only approved content,
    /// and a deleted message is gone (Get Default Message still names it, as the configuration was not changed).
    public func configuredDefaultMessage(productId: String, locale: String) -> UUID? {
        guard let id = retention.defaults[StoreState.Retention.defaultKey(productId, locale)], let message = retention.messages[id],
              message.state == .approved, message.imageIds.allSatisfy({ retention.images[$0]?.state == .approved }) else { return nil }
        return UUID(uuidString: id)
    }

    /// Whether a default is configured for the product and locale, shown or not: without one, Apple shows no retention
    /// message there at all and does not ask the developer.
    public func hasDefaultMessage(productId: String, locale: String) -> Bool {
        retention.defaults[StoreState.Retention.defaultKey(productId, locale)] != nil
    }

    // MARK: Performance tests

    /// How the simulator's performance test runs. Apple publishes only the ~700 ms budget; the rest are the simulator's.
    public static let performanceTestConfig = PerformanceTestConfig(maxConcurrentRequests: 5, totalRequests: 50, totalDuration: 30_000,
                                                                     responseTimeThreshold: 700, successRateThreshold: 90)

    /// A performance test under way: what its runner sends.
    public struct PerformanceTestRun: Sendable {
        public var requestId: String
        public var target: URL
        public var originalTransactionId: String
        public var requests: Int
    }

    /// Tests kept for Get Performance Test Results (the newest; older ones are forgotten).
    static let keptPerformanceTests = 20

    /// A test whose runner is gone (the simulator restarted mid-test) ends failed once it is well past its duration.
    private func expireStalePerformanceTests() {
        let limit = TimeInterval(2 * (Self.performanceTestConfig.totalDuration ?? 30_000)) / 1000
        for (key, test) in retention.performanceTests where test.result == .pending && Date().timeIntervalSince(test.startedAt ?? .distantPast) > limit {
            retention.performanceTests[key]?.result = .fail
        }
    }

    /// Starts a test of the sandbox URL with requests for `originalTransactionId`, an active subscription the customer
    /// pays for. Requests are signed as they are sent, as `Sandbox` (the test runs in sandbox, whichever environment the
    /// simulator plays). One test at a time.
    public func startPerformanceTest(originalTransactionId: String?) throws -> PerformanceTestRun {
        guard let id = originalTransactionId, ServerAPIRoutes.isTransactionId(id) else { throw RetentionRefusal(.invalidTransactionId, "Invalid transaction id.") }
        expireStalePerformanceTests()
        guard !retention.performanceTests.values.contains(where: { $0.result == .pending }) else {
            throw RetentionRefusal(.existingPerformanceTestRun, "Invalid request. Existing performance test run.")
        }
        if let stored = state.transactions[id] {
            if stored.sharedFrom != nil { throw RetentionRefusal(.familyTransactionNotSupported, "Family Sharing transactions are not supported.") }
            if stored.payload.originalTransactionId != id {
                throw RetentionRefusal(.transactionIdIsNotOriginalTransactionId, "The transaction id is not an original transaction id.")
            }
        }
        // Apple documents no code for a test without a sandbox URL; the invalid-request one is answered.
        guard let target = realtimeURL(environment: .sandbox).flatMap(URL.init(string:)) else {
            throw RetentionRefusal(.invalidPerformanceTestRequest, "Invalid request. No realtime URL is configured in sandbox.")
        }
        guard try retentionAsk(originalTransactionId: id, userLocale: "en-US", environment: .sandbox) != nil else {
            throw RetentionRefusal(.invalidPerformanceTestRequest, "Invalid request. The subscription is not an active auto-renewable subscription.")
        }
        let requests = Self.performanceTestConfig.totalRequests ?? 1
        let requestId = UUID().lowercasedString
        retention.performanceTests[requestId] = .init(target: target.absoluteString, result: .pending, pending: requests, startedAt: Date())
        let oldest = retention.performanceTests.filter { $0.value.result != .pending }.sorted { ($0.value.startedAt ?? .distantPast) > ($1.value.startedAt ?? .distantPast) }
            .dropFirst(Self.keptPerformanceTests)
        for (key, _) in oldest { retention.performanceTests[key] = nil }
        try persist()
        return PerformanceTestRun(requestId: requestId, target: target, originalTransactionId: id, requests: requests)
    }

    public func isPerformanceTestRunning(_ requestId: String) -> Bool {
        expireStalePerformanceTests()
        return retention.performanceTests[requestId]?.result == .pending
    }

    /// Records one request of a running test: its time in milliseconds and how it ended. Saved when the test ends (a
    /// restart mid-test ends it failed).
    public func recordPerformanceTestAttempt(_ requestId: String, milliseconds: Int, result: SendAttemptResult) throws {
        guard var test = retention.performanceTests[requestId], test.result == .pending else { return }
        test.attempts.append(.init(milliseconds: milliseconds, result: result))
        test.pending -= 1
        if test.pending <= 0 {
            test.result = test.successRate >= (Self.performanceTestConfig.successRateThreshold ?? 100) ? .pass : .fail
        }
        retention.performanceTests[requestId] = test
        if test.result != .pending { try persist() }
    }

    /// A test's result. Response times are over every request, a failed one at the time it took to fail (Apple does not
    /// say which it counts).
    public func performanceTestResult(_ requestId: String) throws -> PerformanceTestResultResponse {
        guard UUID(uuidString: requestId) != nil else { throw RetentionRefusal(.invalidRequestId, "Invalid request id.") }
        expireStalePerformanceTests()
        guard let test = retention.performanceTests[requestId.lowercased()] else {
            throw RetentionRefusal(.performanceTestRunNotFound, "Performance test run not found.")
        }
        var response = PerformanceTestResultResponse()
        response.config = Self.performanceTestConfig
        response.target = test.target
        response.result = test.result
        response.successRate = test.successRate
        response.numPending = test.pending
        let times = test.attempts.map(\.milliseconds).sorted()
        func percentile(_ p: Int) -> Int? { times.isEmpty ? nil : times[min(times.count - 1, (times.count * p + 99) / 100 - 1)] }
        response.responseTimes = PerformanceTestResponseTimes(average: times.isEmpty ? nil : times.reduce(0, +) / times.count,
                                                              p50: percentile(50), p90: percentile(90), p95: percentile(95), p99: percentile(99))
        var failures: [String: Int] = [:]
        for attempt in test.attempts where attempt.result != .success { failures[attempt.result.rawValue, default: 0] += 1 }
        response.failures = failures
        return response
    }
}

extension StoreState {
    /// Retention Messaging content and settings (optional in ``StoreState``: state files written before it still load).
    struct Retention: Codable, Sendable {
        struct Image: Codable, Sendable {
            var size: ImageSize
            var state: RetentionContentState
            var width: UInt32
            var height: UInt32
        }
        struct Message: Codable, Sendable {
            var body: UploadMessageRequestBody
            var state: RetentionContentState
            /// The images it shows, lower-case ids.
            var imageIds: [String] {
                ([body.image?.imageIdentifier] + (body.bulletPoints ?? []).map(\.imageIdentifier)).compactMap { $0?.lowercasedString }
            }
        }
        struct PerformanceTest: Codable, Sendable {
            struct Attempt: Codable, Sendable {
                var milliseconds: Int
                var result: SendAttemptResult
            }
            var target: String
            var result: PerformanceTestStatus
            var pending: Int
            /// Real time (optional for older state files).
            var startedAt: Date?
            var attempts: [Attempt] = []
            /// Percent of requests answered correctly within the threshold.
            var successRate: Int {
                attempts.isEmpty ? 0 : attempts.filter { $0.result == .success }.count * 100 / attempts.count
            }
        }
        var images: [String: Image] = [:]
        var messages: [String: Message] = [:]
        /// `productId` + "\n" + `locale` → message id.
        var defaults: [String: String] = [:]
        /// Environment → URL.
        var realtimeURLs: [String: String] = [:]
        var performanceTests: [String: PerformanceTest] = [:]

        static func defaultKey(_ productId: String, _ locale: String) -> String { productId + "\n" + locale }
    }
}
