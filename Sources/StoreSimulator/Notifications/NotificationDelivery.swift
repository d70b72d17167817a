import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Posts due notifications to the configured URLs as the App Store does — `{"signedPayload": "<JWS>"}` — and records
/// each attempt: HTTP 200–206 is success; anything else, or no answer, is retried on Apple's schedule in simulated time.
public actor NotificationDelivery {
    public let engine: StoreEngine
    /// Where notifications go (changeable while running, as App Store Connect's URL setting is).
    public private(set) var urls: [URL]
    /// Whether failed deliveries are retried (Apple's production behaviour; sandbox sends once).
    public let retries: Bool
    public let timeout: TimeInterval
    private let session: URLSession
    /// Delivery faults: repeat a notification, or send a batch newest first.
    public var faults = NotificationFaults()

    public init(engine: StoreEngine, urls: [URL], retries: Bool = true, timeout: TimeInterval = 5) {
        self.engine = engine
        self.urls = urls
        self.retries = retries
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration)
    }

    public func setFaults(_ faults: NotificationFaults) { self.faults = faults }

    /// Points delivery at other URLs from now on.
    public func setURLs(_ urls: [URL]) { self.urls = urls }

    /// Delivers everything due now; returns how many notifications were attempted.
    @discardableResult
    public func deliverDue() async throws -> Int {
        var due = try await engine.dueNotifications()
        guard !urls.isEmpty, !due.isEmpty else { return 0 }
        if faults.outOfOrder { due.reverse() }
        for notification in due {
            let result = await post(notification.signedPayload)
            if faults.duplicate, result == .success { _ = await post(notification.signedPayload) }
            try await engine.recordAttempt(notification.uuid, result: result, retries: retries)
        }
        return due.count
    }

    private func post(_ signedPayload: String) async -> SendAttemptResult {
        var worst = SendAttemptResult.success
        for url in urls {
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try? AppStoreJSON.encoder().encode(ResponseBodyV2(signedPayload: signedPayload))
            do {
                let (_, response) = try await session.data(for: request)
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                if !(200...206).contains(status) { worst = .unsuccessfulHTTPResponseCode }
            } catch let error as URLError where error.code == .timedOut {
                worst = .timedOut
            } catch {
                worst = .noResponse
            }
        }
        return worst
    }
}

/// Faults in notification delivery, for tests of a server's idempotency and ordering.
public struct NotificationFaults: Codable, Sendable, Hashable {
    /// Deliver every successfully delivered notification a second time.
    public var duplicate: Bool = false
    /// Deliver each batch of due notifications newest first.
    public var outOfOrder: Bool = false
    public init(duplicate: Bool = false, outOfOrder: Bool = false) {
        self.duplicate = duplicate
        self.outOfOrder = outOfOrder
    }
}
