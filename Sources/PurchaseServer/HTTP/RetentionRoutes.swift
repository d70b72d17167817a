import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `POST /v1/retention/appstore`: Retention Messaging's Get Retention Message endpoint. The App Store calls it while a
/// customer looks at a subscription they may cancel and shows what it answers — within 700 ms, or the default message
/// configured at Apple instead. The request is signed by the App Store like a notification; the answer is the first
/// configured ``RetentionMessageRule`` that fits the subscription, the locale and the customer (``RetentionRules``).
/// A promotional offer is signed on the spot for the subscription's original transaction id, so only that customer can
/// redeem it. No rule fitting, or no answer within 550 ms: `{}`, and Apple shows the default message.
struct RetentionRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    /// A request signed longer ago than this is refused: Apple calls in real time, and an old one is a replay.
    static var maxRequestAge: TimeInterval { 300 }

    func add(to router: some RouterMethods<Context>) {
        router.post("v1/retention/appstore", use: retentionMessage)
    }

    @Sendable func retentionMessage(_ request: Request, _ context: Context) async throws -> Response {
        guard let settings = services.retention else {
            throw APIError(.notFound, code: .retentionNotConfigured, "no retention messages are configured (retentionMessaging)")
        }
        let body = try await request.decodeJSON(RealtimeRequestBody.self, limit: 16 * 1024)
        let ask = try await services.verifier.signedData.verifyRealtimeRequest(body.signedPayload).payload
        guard let original = ask.originalTransactionId, let productId = ask.productId, let locale = ask.userLocale, let signed = ask.signedDate,
              original.utf8.count <= 64, productId.utf8.count <= 200, locale.utf8.count <= 35 else {
            throw APIError(.unprocessableContent, code: .malformed, "the request lacks its originalTransactionId, productId, userLocale or signedDate")
        }
        // Apple signs these in sandbox and production only: an Xcode-signed one (a self-signed certificate, accepted for
        // other proofs when the operator allows it) proves nothing and could name any product or locale.
        guard ask.environment == .production || ask.environment == .sandbox else {
            throw APIError(.unprocessableContent, code: .wrongEnvironment, "retention requests come from the App Store's sandbox or production")
        }
        // Apple: answer only requests for this app. A realtime request names no bundle id; in production its app Apple id
        // must be the app's (the configuration requires one), as Apple's library checks.
        if ask.environment == .production, ask.appAppleId == nil || ask.appAppleId != services.verifier.signedData.configuration.appAppleId {
            throw APIError(.unprocessableContent, code: .wrongAppAppleId, "the request is for another app, or the server knows no appAppleId")
        }
        // The server's clock (a simulated one in demos and tests, where the simulator signs by the same clock).
        let now = services.now()
        guard abs(now.timeIntervalSince(signed)) <= Self.maxRequestAge else {
            throw APIError(.unprocessableContent, code: .staleRequest, "the request was signed more than \(Int(Self.maxRequestAge)) s from now")
        }
        // Apple waits 700 ms, then shows the default message: work that cannot finish well before is abandoned and the
        // default answered at once, instead of holding a connection Apple has let go.
        let answer = try await withThrowingTaskGroup(of: RealtimeResponseBody?.self) { group in
            group.addTask { try await choose(original: original, productId: productId, locale: locale, rules: settings.rules) }
            group.addTask {
                try await Task.sleep(for: Self.deadline)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if answer == nil { services.metrics.retentionMessage(.deadline) }
        let data = try AppStoreJSON.encoder(sortedKeys: true).encode(answer ?? RealtimeResponseBody())
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// How long the server works on an answer before it gives Apple `{}` (the default message) instead.
    static var deadline: Duration { .milliseconds(550) }

    /// The answer for the subscription's customer: ledger reads, the rules, an offer signed for the subscription.
    func choose(original: String, productId: String, locale: String, rules: [RetentionMessageRule]) async throws -> RealtimeResponseBody {
        let ledger = services.ledger
        let account = try await ledger.seriesAccount(originalTransactionId: original)
        var purchases: [PurchaseRecord] = []
        var owned = AccountEntitlements(accountId: "", entitlements: [], balances: [:])
        if let account {
            purchases = try await ledger.entitlingPurchases(accountId: account)
            owned = try await ledger.entitlements(accountId: account, now: services.now())
        }
        let choice = RetentionRules.choose(productId: productId, locale: locale, rules: rules, offers: services.promotionalOffers,
                                           catalog: ledger.catalog, purchases: purchases, owned: owned)
        var answer = RealtimeResponseBody()
        switch choice {
        case .none:
            services.metrics.retentionMessage(.default)
        case .message(let id)?:
            answer.message = RetentionMessage(messageIdentifier: id)
            services.metrics.retentionMessage(.message)
        case .alternateProduct(let id, let alternate, let plan)?:
            answer.alternateProduct = AlternateProduct(messageIdentifier: id, productId: alternate, billingPlanType: plan)
            services.metrics.retentionMessage(.alternateProduct)
        case .promotionalOffer(let id, let offerProductId, let offer)?:
            guard let credentials = services.verifier.apple.serverAPI?.credentials else {
                throw APIError(.serviceUnavailable, code: .offersNotConfigured, "offer signatures need the In-App Purchase key")
            }
            // Dated by the wall clock: the App Store judges an offer signature's age by real time.
            let signature = try OfferSigner(credentials: credentials).promotionalOffer(productId: offerProductId, offerIdentifier: offer,
                                                                                       transactionId: original, now: Date())
            answer.promotionalOffer = RetentionPromotionalOffer(messageIdentifier: id, promotionalOfferSignatureV2: signature)
            services.metrics.retentionMessage(.promotionalOffer)
        }
        return answer
    }
}

/// What the server answers Get Retention Message with.
public struct RetentionSettings: Sendable {
    public var rules: [RetentionMessageRule]
    public init(rules: [RetentionMessageRule]) { self.rules = rules }
}
