import AppStoreFormats
import Foundation
import Hummingbird

/// The Retention Messaging API under `/inApps/v1/messaging` (Apple's paths, bodies, codes and JWT), and the customer's
/// side under `/sim`: looking at a subscription they may cancel (`POST /sim/subscriptions/{originalTransactionId}/retention-message`),
/// which asks the developer's Get Retention Message endpoint and shows its answer or the default message; Apple's review
/// of content (`POST /sim/messaging/{id}/review`); the sandbox URL of a production simulator (`PUT /sim/messaging/realtime-url`).
struct RetentionMessagingRoutes {
    let services: SimulatorServer.Services
    var engine: StoreEngine { services.engine }
    var requester: RetentionRequester { RetentionRequester(budget: services.retentionBudget) }

    /// Apple publishes no size limit for an image; a photographic 3840 × 2160 PNG can be 20 MB. Larger is refused as
    /// an invalid image.
    static let maxImageBytes = 32 << 20

    func add(to router: Router<BasicRequestContext>) {
        let api = router.group("inApps/v1/messaging").add(middleware: ServerAPIRoutes.AuthMiddleware(authenticator: services.authenticator))
        api.put("image/:id", use: uploadImage)
        api.delete("image/:id", use: deleteImage)
        api.get("image/list") { _, _ in try Reply.json(await engine.retentionImages()) }
        api.put("message/:id", use: uploadMessage)
        api.delete("message/:id", use: deleteMessage)
        api.get("message/list") { _, _ in try Reply.json(await engine.retentionMessages()) }
        api.put("default/:productId/:locale", use: configureDefault)
        api.delete("default/:productId/:locale", use: deleteDefault)
        api.get("default/:productId/:locale", use: getDefault)
        api.put("realtime/url", use: configureRealtimeURL)
        api.delete("realtime/url", use: deleteRealtimeURL)
        api.get("realtime/url", use: getRealtimeURL)
        api.post("performanceTest", use: initiatePerformanceTest)
        api.get("performanceTest/result/:requestId", use: performanceTestResult)

        router.post("sim/subscriptions/:id/retention-message", use: viewSubscription)
        router.post("sim/messaging/:id/review", use: review)
        router.put("sim/messaging/realtime-url", use: configureSandboxURL)
    }

    /// Runs `body`, answering a refusal with Apple's error.
    private func answer(_ body: () async throws -> Response) async throws -> Response {
        do { return try await body() } catch let refusal as StoreEngine.RetentionRefusal {
            return try Reply.apiError(refusal.code, refusal.message)
        }
    }

    private func uuid(_ context: BasicRequestContext, _ name: String = "id") throws -> UUID {
        guard let id = UUID(uuidString: try context.parameters.require(name)) else { throw HTTPError(.badRequest, message: "\(name) is not a UUID") }
        return id
    }

    @Sendable func uploadImage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let id = try uuid(context)
            let size = ImageSize(rawValue: request.uri.queryParameters["imageSize"].map(String.init) ?? ImageSize.fullSize.rawValue)
            // Apple lists only InvalidImageError on Upload Image.
            guard ImageSize.known.contains(size) else { return try Reply.apiError(.invalidImage, "Invalid request. The image is invalid.") }
            guard let png = try? await request.bytes(limit: Self.maxImageBytes) else { return try Reply.apiError(.invalidImage, "Invalid request. The image is invalid.") }
            try await engine.uploadRetentionImage(id, png: png, size: size)
            return Reply.empty()
        }
    }

    @Sendable func deleteImage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            try await engine.deleteRetentionImage(try uuid(context))
            return Reply.empty()
        }
    }

    @Sendable func uploadMessage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let id = try uuid(context)
            try await engine.uploadRetentionMessage(id, try await request.decode(UploadMessageRequestBody.self))
            return Reply.empty()
        }
    }

    @Sendable func deleteMessage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            try await engine.deleteRetentionMessage(try uuid(context))
            return Reply.empty()
        }
    }

    @Sendable func configureDefault(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let body = try await request.decode(DefaultConfigurationRequest.self)
            try await engine.configureDefaultRetentionMessage(productId: try context.parameters.require("productId"), locale: try context.parameters.require("locale"),
                                                              messageIdentifier: body.messageIdentifier)
            return Reply.empty()
        }
    }

    @Sendable func deleteDefault(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            try await engine.deleteDefaultRetentionMessage(productId: try context.parameters.require("productId"), locale: try context.parameters.require("locale"))
            return Reply.empty()
        }
    }

    @Sendable func getDefault(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let id = try await engine.defaultRetentionMessage(productId: try context.parameters.require("productId"), locale: try context.parameters.require("locale"))
            return try Reply.json(DefaultConfigurationResponse(messageIdentifier: id))
        }
    }

    /// Apple takes `https://` only; the simulator also takes plain HTTP to a loopback host, where tests cannot present a
    /// certificate Apple's side would trust.
    static func isLoopback(_ text: String?) -> Bool {
        guard let host = text.flatMap(URL.init(string:))?.host else { return false }
        return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
    }

    @Sendable func configureRealtimeURL(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let body = try await request.decode(RealtimeUrlRequest.self)
            try await engine.configureRealtimeURL(body.realtimeURL, allowInsecure: Self.isLoopback(body.realtimeURL))
            return Reply.empty()
        }
    }

    @Sendable func deleteRealtimeURL(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await engine.deleteRealtimeURL()
        return Reply.empty()
    }

    @Sendable func getRealtimeURL(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard let url = await engine.realtimeURL() else { return try Reply.apiError(.realtimeURLNotFound, "Realtime URL not found.") }
        return try Reply.json(RealtimeUrlResponse(realtimeURL: url))
    }

    /// Starts the test and answers at once; the requests go out in the background, as Apple's do.
    @Sendable func initiatePerformanceTest(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let body = try await request.decode(PerformanceTestRequest.self)
            let run = try await engine.startPerformanceTest(originalTransactionId: body.originalTransactionId)
            let (requester, engine) = (requester, engine)
            // The test measures the endpoint as a server: an answer counts when it comes in time, as HTTP 200 and a JSON
            // answer (`{}` included: "no message from us"); what it would show is judged when a customer looks.
            Task { await requester.runPerformanceTest(run, engine: engine) }
            return try Reply.json(PerformanceTestResponse(config: StoreEngine.performanceTestConfig, requestId: run.requestId))
        }
    }

    @Sendable func performanceTestResult(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer { try Reply.json(try await engine.performanceTestResult(try context.parameters.require("requestId"))) }
    }

    // MARK: The customer's side

    struct View: Decodable {
        /// The customer's locale; `en-US` unless given.
        var userLocale: String?
    }

    /// What the customer is shown.
    struct Shown: Encodable {
        enum Source: String, Encodable {
            /// The developer's real-time answer.
            case realtime = "REALTIME"
            /// The default message of the product and locale.
            case defaultMessage = "DEFAULT"
            /// Nothing: no usable answer and no default.
            case none = "NONE"
        }
        var source: Source
        /// Lower case, as Apple writes UUIDs.
        var messageIdentifier: String?
        var alternateProduct: AlternateProduct?
        /// The offer shown, as the App Store read it from the signature.
        var promotionalOfferIdentifier: String?
        var promotionalOfferProductId: String?
        /// The offer's signature, which the App Store's sheet redeems when the customer accepts (`/sim/purchases` with it).
        var promotionalOfferSignatureV2: String?
        /// The real-time request, when one was made.
        var requestIdentifier: String?
        var sendAttemptResult: SendAttemptResult?
        var milliseconds: Int?
        var problem: StoreEngine.RetentionAnswerProblem?
    }

    /// A customer looks at an active subscription's details, where they could cancel it.
    @Sendable func viewSubscription(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let original = try context.parameters.require("id")
        let view = try await request.decodeIfPresent(View.self) ?? View()
        let locale = view.userLocale ?? "en-US"
        guard StoreEngine.isAppStoreLocale(locale) else { throw HTTPError(.badRequest, message: "userLocale is not an App Store locale") }
        guard let ask = try await engine.retentionAsk(originalTransactionId: original, userLocale: locale) else {
            throw HTTPError(.notFound, message: "no active auto-renewable subscription the customer pays for has this original transaction id")
        }
        var shown = Shown(source: .none)
        // Apple shows retention messages only where a default is configured, and asks the developer only there.
        guard await engine.hasDefaultMessage(productId: ask.request.productId ?? "", locale: locale) else { return try Reply.json(shown) }
        if let url = ask.url {
            let attempt = await requester.ask(url, signedPayload: ask.signedPayload)
            shown.requestIdentifier = ask.request.requestIdentifier?.lowercasedString
            shown.sendAttemptResult = attempt.result
            shown.milliseconds = attempt.milliseconds
            if let answer = attempt.answer {
                let verifier = OfferSignatureVerifier(services.authenticator)
                let offer = answer.promotionalOffer.flatMap { try? verifier.retentionOffer($0, originalTransactionId: original).get() }
                shown.problem = await engine.judgeRetentionAnswer(answer, ask: ask, offer: offer)
                if shown.problem == nil {
                    shown.source = .realtime
                    shown.messageIdentifier = answer.messageIdentifier?.lowercasedString
                    shown.alternateProduct = answer.alternateProduct
                    shown.promotionalOfferIdentifier = offer?.offerIdentifier
                    shown.promotionalOfferProductId = offer?.productId
                    shown.promotionalOfferSignatureV2 = answer.promotionalOffer?.promotionalOfferSignatureV2
                }
            }
        }
        if shown.source == .none, let fallback = await engine.configuredDefaultMessage(productId: ask.request.productId ?? "", locale: locale) {
            shown.source = .defaultMessage
            shown.messageIdentifier = fallback.lowercasedString
        }
        return try Reply.json(shown)
    }

    struct Review: Decodable { var state: RetentionContentState }

    @Sendable func review(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(Review.self)
        guard body.state == .approved || body.state == .rejected else { throw HTTPError(.badRequest, message: "state is APPROVED or REJECTED") }
        guard try await engine.reviewRetentionContent(try uuid(context), state: body.state) else { throw HTTPError(.notFound, message: "no such image or message") }
        return Reply.empty()
    }

    /// The sandbox URL, for a simulator that plays production (where the Server API's calls set the production URL).
    @Sendable func configureSandboxURL(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try await answer {
            let body = try await request.decode(RealtimeUrlRequest.self)
            try await engine.configureRealtimeURL(body.realtimeURL, environment: .sandbox, allowInsecure: Self.isLoopback(body.realtimeURL))
            return Reply.empty()
        }
    }
}
