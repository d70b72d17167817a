import AppStoreClient
import AppStoreFormats
import Foundation
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// Retention Messaging end to end over real HTTP: content set up at the simulator with `AppStoreClient`, the simulator's
/// App Store asking the purchase server's Get Retention Message endpoint while a customer may cancel, and what the
/// customer is shown and can redeem.
@Suite("Get Retention Message: the server answers Apple in real time from its rules, and only Apple's fresh requests")
struct RetentionMessagingServerTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"
    static let offerMessage = UUID(), switchMessage = UUID(), stayMessage = UUID(), defaultMessage = UUID()

    static func options(_ kind: LedgerKind = .sqlite) -> System.Options {
        var options = System.Options()
        options.kind = kind
        options.promotionalOffers = ["pro.yearly.upgrade": PromotionalOfferRule(productIds: [yearly], eligibility: .subscribers)]
        options.retention = [
            RetentionMessageRule(messageIdentifier: offerMessage, productIds: [monthly], locales: ["en-US"], promotionalOfferIdentifier: "pro.yearly.upgrade"),
            RetentionMessageRule(messageIdentifier: switchMessage, locales: ["de-DE"], alternateProductId: yearly),
            RetentionMessageRule(messageIdentifier: stayMessage),
        ]
        return options
    }

    /// Uploads the messages at Apple (the simulator), sets the default and points Apple at the server's endpoint.
    static func setUpAtApple(_ system: System) async throws -> ServerAPIClient {
        let apple = try #require(system.services.verifier.apple.serverAPI)
        for id in [offerMessage, switchMessage, stayMessage, defaultMessage] {
            do {
                try await apple.uploadRetentionMessage(id, UploadMessageRequestBody(header: "Before you go", body: "Here is something for you."))
            } catch let error as AppStoreClientError where error.apiErrorCode == .messageAlreadyExists {
                // This simulator is new, so only this upload's own first attempt stored it: on a loaded machine that
                // attempt timed out, and the client's retry heard Apple's 409 (seen once in a full run).
            }
        }
        // Apple shows retention messages (and asks the server) only where a default is configured.
        for product in [monthly, yearly] {
            for locale in ["en-US", "de-DE"] { try await apple.configureDefaultRetentionMessage(productId: product, locale: locale, messageIdentifier: defaultMessage) }
        }
        try await apple.configureRealtimeURL("http://127.0.0.1:\(system.server.port!)/v1/retention/appstore")
        return apple
    }

    /// The customer opens the subscription's page, where they could cancel: what the App Store shows.
    static func view(_ system: System, _ originalTransactionId: String, locale: String = "en-US") async throws -> Shown {
        try AppStoreJSON.decoder().decode(Shown.self, from: await system.device(.post, "/sim/subscriptions/\(originalTransactionId)/retention-message",
                                                                                 ["userLocale": locale]))
    }

    /// What the simulator's App Store shows the customer (`/sim/subscriptions/{id}/retention-message`).
    struct Shown: Decodable {
        /// `REALTIME`, `DEFAULT` or `NONE`.
        var source: String
        /// Lower case, as Apple writes UUIDs.
        var messageIdentifier: String?
        var alternateProduct: AlternateProduct?
        var promotionalOfferIdentifier: String?
        var promotionalOfferProductId: String?
        var promotionalOfferSignatureV2: String?
        var sendAttemptResult: String?
        var problem: String?
    }

    /// The claims of a promotional offer's V2 signature that these tests read.
    struct OfferClaims: Decodable {
        var transactionId: String?
    }

    @Test("A subscriber gets the offer its rules allow, signed for that subscription and redeemed once; another locale gets another plan; a subscription the server never saw is still the one Apple vouches for")
    func answersFromRules() async throws {
        try await System.run(Self.options()) { system in
            _ = try await Self.setUpAtApple(system)
            let (account, store) = try await system.customer("keeper")
            let (_, purchase, reply) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            #expect([.granted, .alreadyGranted].contains(reply?.outcome), "\(String(describing: reply))")
            let original = try #require(purchase.transactionId)

            let offered = try await Self.view(system, original)
            #expect(offered.source == "REALTIME" && offered.problem == nil, "\(offered)")
            #expect(offered.messageIdentifier == Self.offerMessage.uuidString.lowercased())
            #expect(offered.promotionalOfferIdentifier == "pro.yearly.upgrade" && offered.promotionalOfferProductId == Self.yearly)

            let switched = try await Self.view(system, original, locale: "de-DE")
            #expect(switched.source == "REALTIME" && switched.messageIdentifier == Self.switchMessage.uuidString.lowercased())
            #expect(switched.alternateProduct?.productId == Self.yearly)

            // The customer accepts the offer in the App Store's sheet: the signature names their subscription, once.
            let signature = try #require(offered.promotionalOfferSignatureV2)
            let fresh = try #require(try await Self.view(system, original).promotionalOfferSignatureV2)
            #expect(fresh != signature, "each answer is signed anew, with its own nonce")
            let offer = ["kind": "promotional", "id": "pro.yearly.upgrade", "signature": signature]
            let redeemed = try await system.storePurchase(["account": store, "device": "settings", "productId": Self.yearly, "offer": offer])
            #expect(redeemed.signedTransaction != nil, "\(redeemed)")
            let again = try await system.storePurchase(["account": store, "device": "settings", "productId": Self.yearly, "offer": offer])
            #expect(again.signedTransaction == nil, "a signature is taken once: \(again)")
            // Another customer cannot use an unused one either: it names this subscription.
            let (_, thief) = try await system.customer("thief")
            let stolen = try await system.storePurchase(["account": thief, "device": "d", "productId": Self.yearly,
                                                         "offer": ["kind": "promotional", "id": "pro.yearly.upgrade", "signature": fresh]])
            #expect(stolen.signedTransaction == nil, "\(stolen)")
            // Now on the yearly plan, the monthly plan's offer rule no longer fits: the plain message.
            let upgraded = try await Self.view(system, original)
            #expect(upgraded.messageIdentifier == Self.stayMessage.uuidString.lowercased(), "\(upgraded)")

            // A subscription bought where the server never saw it: Apple's signed request shows it is active, so the
            // subscribers' offer is given — signed for that subscription, it serves its customer only.
            let (_, stranger) = try await system.customer("stranger")
            let unseen = try await system.storePurchase(["account": stranger, "device": "d", "productId": Self.monthly])
            let unseenId = try #require(unseen.transactionId)
            let offeredToStranger = try await Self.view(system, unseenId)
            #expect(offeredToStranger.promotionalOfferIdentifier == "pro.yearly.upgrade", "\(offeredToStranger)")
            let claims = try #require(offeredToStranger.promotionalOfferSignatureV2.flatMap { try? CompactJWS($0).payload() })
            #expect(try AppStoreJSON.decoder().decode(OfferClaims.self, from: Data(claims)).transactionId == unseenId)
        }
    }

    @Test("Refused: an altered request, a replayed old one, a production one the server cannot tie to the app, a body of the wrong shape; a server without rules answers 404 and Apple shows its default")
    func refusals() async throws {
        var options = System.Options()
        options.retention = [RetentionMessageRule(messageIdentifier: Self.stayMessage)]
        try await System.run(options) { system in
            let (account, store) = try await system.customer("asked")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let original = try #require(purchase.transactionId)
            let minter = try Minter(authority: simulatorAuthority)
            func request(signedDate: Date, originalTransactionId: String = original) -> DecodedRealtimeRequestBody {
                DecodedRealtimeRequestBody(originalTransactionId: originalTransactionId, appAppleId: 1_234_567_890, productId: Self.monthly,
                                           userLocale: "en-US", requestIdentifier: UUID(), signedDate: signedDate, environment: .sandbox)
            }
            func post(_ signedPayload: String) async throws -> (Int, Data) {
                let (status, body) = try await system.call(.post, "/v1/retention/appstore", as: nil, SignedPayloadRequest(signedPayload: signedPayload))
                return (Int(status.code), body)
            }
            let good = try minter.sign(request(signedDate: Date()))
            let (status, answer) = try await post(good)
            #expect(try status == 200 && (AppStoreJSON.decoder().decode(RealtimeResponseBody.self, from: answer).message?.messageIdentifier) == Self.stayMessage,
                    "\(text(answer))")

            // Another subscription's id put into a signed request: the signature no longer holds.
            let parts = good.split(separator: ".").map(String.init)
            let altered = parts[0] + "." + Base64.urlEncode(try AppStoreJSON.encoder(sortedKeys: true).encode(request(signedDate: Date(), originalTransactionId: "1"))) + "." + parts[2]
            let (alteredStatus, alteredBody) = try await post(altered)
            #expect(try alteredStatus == 422 && (errorCode(alteredBody)) == "bad_signature", "\(text(alteredBody))")
            // Production names the app only by its app Apple id, and this server knows none: not answered.
            var production = request(signedDate: Date())
            production.environment = .production
            let (productionStatus, productionBody) = try await post(try minter.sign(production))
            #expect(try productionStatus == 422 && (errorCode(productionBody)) == "wrong_app_apple_id", "\(text(productionBody))")
            let (staleStatus, staleBody) = try await post(try minter.sign(request(signedDate: Date().addingTimeInterval(-600))))
            #expect(try staleStatus == 422 && (errorCode(staleBody)) == "stale_request")
            #expect(try await system.call(.post, "/v1/retention/appstore", as: nil, ["signed": "x"]).0 == .badRequest)
            // A notification's payload is not a retention request, though Apple signed it.
            #expect(try await post("not.a.jws").0 == 422)
        }
        try await System.run(System.Options()) { system in
            let apple = try #require(system.services.verifier.apple.serverAPI)
            try await apple.uploadRetentionMessage(Self.defaultMessage, UploadMessageRequestBody(header: "Stay", body: "Please stay."))
            try await apple.configureDefaultRetentionMessage(productId: Self.monthly, locale: "en-US", messageIdentifier: Self.defaultMessage)
            try await apple.configureRealtimeURL("http://127.0.0.1:\(system.server.port!)/v1/retention/appstore")
            let (account, store) = try await system.customer("unconfigured")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let shown = try await Self.view(system, try #require(purchase.transactionId))
            #expect(shown.source == "DEFAULT" && shown.sendAttemptResult == "UNSUCCESSFUL_HTTP_RESPONSE_CODE", "\(shown)")
            #expect(shown.messageIdentifier == Self.defaultMessage.uuidString.lowercased())
        }
    }

    @Test("Apple's performance test of the server's endpoint runs to the end, every answer one Apple takes", arguments: LedgerKind.allCases)
    func performanceTest(_ kind: LedgerKind) async throws {
        try await System.run(Self.options(kind)) { system in
            let apple = try await Self.setUpAtApple(system)
            let (account, store) = try await system.customer("tested")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let started = try await apple.initiatePerformanceTest(originalTransactionId: try #require(purchase.transactionId))
            let requestId = try #require(started.requestId)
            var result = try await apple.performanceTestResult(requestId)
            let deadline = ContinuousClock.now + .seconds(60)
            while result.result == .pending, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                result = try await apple.performanceTestResult(requestId)
            }
            // Every request answered as Apple wants it (HTTP 200, a JSON answer); only time can fail one. Whether the
            // times fit Apple's 700 ms is a figure measured alone on the machine (BENCHMARKS.md), not asserted here, where
            // the whole suite shares two cores.
            #expect(result.result != .pending && result.numPending == 0, "\(result)")
            #expect((result.failures ?? [:]).keys.allSatisfy { $0 == SendAttemptResult.timedOut.rawValue }, "\(result)")
            #expect((result.successRate ?? 0) > 0)
            let p99 = try #require(result.responseTimes?.p99)
            print("retention performance test (\(kind.rawValue)): \(result.config?.totalRequests ?? 0) requests, \(result.config?.maxConcurrentRequests ?? 0) at once: average \(result.responseTimes?.average ?? -1) ms, p50 \(result.responseTimes?.p50 ?? -1) ms, p99 \(p99) ms")
        }
    }
}
