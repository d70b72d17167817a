import AppStoreFormats
import AppStoreTrust
import Foundation
import Hummingbird
import HummingbirdTesting
import StoreSimulator
import Testing

/// A webhook on loopback that records what it receives and fails the first `failures` deliveries with a 500.
final class WebhookReceiver: @unchecked Sendable {
    private let lock = NSLock()
    private var payloads: [String] = []
    private var failuresLeft: Int

    init(failures: Int = 0) { failuresLeft = failures }

    /// What the webhook has accepted so far.
    var received: [String] { lock.withLock { payloads } }

    var application: some ApplicationProtocol {
        let router = Router()
        router.post("hook") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let payload = try JSONDecoder().decode(ResponseBodyV2.self, from: Data(body.readableBytesView))
            let fail = self.lock.withLock { () -> Bool in
                guard self.failuresLeft > 0 else { return false }
                self.failuresLeft -= 1
                return true
            }
            if fail { return Response(status: .internalServerError) }
            self.lock.withLock { self.payloads.append(payload.signedPayload) }
            return Response(status: .ok)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }
}

@Suite("Notifications V2 delivered to a real webhook")
struct NotificationDeliveryTests {
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.example.iapkit"))

    func engine() throws -> StoreEngine {
        try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority))
    }

    func types(_ payloads: [String]) async throws -> [NotificationTypeV2] {
        var result: [NotificationTypeV2] = []
        for payload in payloads { result.append(try await verifier.verifyNotification(payload).payload.notificationType!) }
        return result
    }

    @Test("Failed deliveries are retried 1, 12, 24, 48 and 72 simulated hours later, then given up")
    func retrySchedule() async throws {
        let receiver = WebhookReceiver(failures: 10)
        try await receiver.application.test(.live) { hook in
            let store = try engine()
            let delivery = NotificationDelivery(engine: store, urls: [URL(string: "http://127.0.0.1:\(hook.port!)/hook")!])
            try await store.createAccount("a")
            _ = try await store.purchase(account: "a", device: "d", productId: "com.example.iapkit.premium")
            #expect(try await delivery.deliverDue() == 1)
            #expect(try await delivery.deliverDue() == 0, "the retry is not due before an hour of simulated time")
            for hours in [1.0, 12, 24, 48, 72] {
                try await store.advanceClock(by: hours * 3600 - 1)
                #expect(try await delivery.deliverDue() == 0, "not due at \(hours) h minus a second")
                try await store.advanceClock(by: 1)
                #expect(try await delivery.deliverDue() == 1, "due at \(hours) h")
            }
            try await store.advanceClock(by: 200 * 3600)
            #expect(try await delivery.deliverDue() == 0, "six attempts, then no more")
            let record = try #require(await store.notifications().first)
            #expect(record.attempts.count == 6)
            #expect(record.attempts.allSatisfy { $0.sendAttemptResult == .unsuccessfulHTTPResponseCode })
            #expect(receiver.received.isEmpty)
        }
    }

    @Test("A webhook that recovers gets the notification; a dead URL is recorded as no response")
    func recovery() async throws {
        let receiver = WebhookReceiver(failures: 1)
        try await receiver.application.test(.live) { hook in
            let store = try engine()
            let delivery = NotificationDelivery(engine: store, urls: [URL(string: "http://127.0.0.1:\(hook.port!)/hook")!])
            try await store.createAccount("b")
            _ = try await store.purchase(account: "b", device: "d", productId: "com.example.iapkit.pro.monthly")
            try await delivery.deliverDue()
            try await store.advanceClock(by: 3600)
            try await delivery.deliverDue()
            let attempts = try #require(await store.notifications().first?.attempts)
            #expect(attempts.map(\.sendAttemptResult) == [.unsuccessfulHTTPResponseCode, .success])
            // The hour also renewed the subscription many times over: those went out first time.
            let received = receiver.received
            #expect(try await types(received).first == .subscribed)
            #expect(try await types(received).dropFirst().allSatisfy { $0 == .didRenew || $0 == .expired })
        }
        let store = try engine()
        let dead = NotificationDelivery(engine: store, urls: [URL(string: "http://127.0.0.1:9/hook")!], retries: false)
        try await store.createAccount("c")
        _ = try await store.purchase(account: "c", device: "d", productId: "com.example.iapkit.premium")
        try await dead.deliverDue()
        #expect(await store.notifications().first?.attempts.map(\.sendAttemptResult) == [.noResponse])
        try await store.advanceClock(by: 3600)
        #expect(try await dead.deliverDue() == 0, "sandbox-style delivery sends once")
    }

    @Test("Faults: every notification delivered twice; a batch delivered newest first")
    func faults() async throws {
        let receiver = WebhookReceiver()
        try await receiver.application.test(.live) { hook in
            let store = try engine()
            let delivery = NotificationDelivery(engine: store, urls: [URL(string: "http://127.0.0.1:\(hook.port!)/hook")!])
            await delivery.setFaults(NotificationFaults(duplicate: true, outOfOrder: true))
            try await store.createAccount("d")
            _ = try await store.purchase(account: "d", device: "d", productId: "com.example.iapkit.premium")
            _ = try await store.purchase(account: "d", device: "d", productId: "com.example.iapkit.coins.100")
            try await delivery.deliverDue()
            let received = receiver.received
            #expect(received.count == 4)
            let ids = try await received.asyncMap { try await verifier.verifyNotification($0).payload.notificationUUID! }
            #expect(ids[0] == ids[1] && ids[2] == ids[3] && ids[0] != ids[2])
            let records = await store.notifications()
            #expect(ids[0] == records[1].uuid, "newest first")
        }
    }

    @Test("Server API: test notification and its status, notification history with filters and paging")
    func serverAPINotifications() async throws {
        let receiver = WebhookReceiver()
        try await receiver.application.test(.live) { hook in
            let fixture = try SimulatorFixture()
            let store = try engine()
            let services = SimulatorServer.Services(
                engine: store,
                authenticator: APIAuthenticator(keyId: fixture.keyId, issuerId: fixture.issuerId, publicKey: fixture.apiKey.publicKey, bundleId: "com.example.iapkit"),
                delivery: NotificationDelivery(engine: store, urls: [URL(string: "http://127.0.0.1:\(hook.port!)/hook")!]))
            try await store.createAccount("e")
            var first = ""
            for index in 0..<25 {
                guard case .purchased(_, let id, _) = try await store.purchase(account: "e", device: "d", productId: "com.example.iapkit.coins.100") else { return }
                if index == 0 { first = id }
            }
            let firstId = first
            // The purchases' own notifications delivered now: the test notification's request delivers whatever is due,
            // and 26 posts in one request took over the test client's 60 s under the whole suite's load (CI, once).
            #expect(try await services.delivery?.deliverDue() == 25)
            try await SimulatorServer.application(services, port: 0).test(.live) { client in
                let auth: HTTPFields = [.authorization: "Bearer \(try fixture.token(bundleId: "com.example.iapkit"))", .contentType: "application/json"]
                let requested = try decode(SendTestNotificationResponse.self, try await client.execute(uri: "/inApps/v1/notifications/test", method: .post, headers: auth))
                let token = try #require(requested.testNotificationToken)
                let status = try decode(CheckTestNotificationResponse.self, try await client.execute(uri: "/inApps/v1/notifications/test/\(token)", method: .get, headers: auth))
                let signed = try #require(status.signedPayload)
                #expect(try await verifier.verifyNotification(signed).payload.notificationType == .test)
                #expect(status.sendAttempts?.first?.sendAttemptResult == .success)
                let unknown = try await client.execute(uri: "/inApps/v1/notifications/test/nope", method: .get, headers: auth)
                #expect(apiError(unknown) == 4_040_008)

                let now = Date()
                func history(_ start: Date, _ end: Date, type: NotificationTypeV2? = nil, subtype: NotificationSubtype? = nil, transactionId: String? = nil,
                             token: String? = nil) async throws -> TestResponse {
                    var body = NotificationHistoryRequest()
                    (body.startDate, body.endDate, body.notificationType, body.notificationSubtype, body.transactionId) = (start, end, type, subtype, transactionId)
                    let path = "/inApps/v1/notifications/history" + (token.map { "?paginationToken=\($0)" } ?? "")
                    return try await client.execute(uri: path, method: .post, headers: auth, body: encoded(body))
                }
                let page1 = try decode(NotificationHistoryResponse.self, try await history(now - 3_600, now + 3_600, type: .oneTimeCharge))
                #expect(page1.notificationHistory?.count == 20)
                #expect(page1.hasMore == true)
                let next = try #require(page1.paginationToken)
                let page2 = try decode(NotificationHistoryResponse.self, try await history(now - 3_600, now + 3_600, type: .oneTimeCharge, token: next))
                #expect(page2.notificationHistory?.count == 5)
                let byTransaction = try decode(NotificationHistoryResponse.self, try await history(now - 3_600, now + 3_600, transactionId: firstId))
                #expect(byTransaction.notificationHistory?.count == 20, "every notification of that customer, 20 a page")
                #expect(apiError(try await history(now + 1, now)) == 4_000_013)
                #expect(apiError(try await history(now - 200 * 86_400, now)) == 4_000_012)
                #expect(apiError(try await history(now - 1, now, subtype: .initialBuy)) == 4_000_018)
            }
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
