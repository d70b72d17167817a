import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import PurchaseLedger
import ServiceLifecycle

/// Where and how the server tells the app's backend what happened (outgoing webhooks).
public struct WebhookSettings: Sendable {
    /// The backend's endpoint: each event is POSTed there as JSON.
    public var url: String
    /// The shared secret the signature header is made with.
    public var secret: String
    /// Attempts before an event is marked failed (it then waits for a replay).
    public var maxAttempts: Int
    public var timeout: Duration

    public init(url: String, secret: String, maxAttempts: Int = 16, timeout: Duration = .seconds(10)) {
        self.url = url
        self.secret = secret
        self.maxAttempts = maxAttempts
        self.timeout = timeout
    }

    /// The header a receiver checks: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>`. The
    /// timestamp lets a receiver refuse a replayed request; the body is the raw bytes received.
    public static func signature(body: String, timestamp: Int64, secret: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(timestamp).\(body)".utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// Seconds before attempt `attempts + 1`: 10 s doubling, at most an hour (16 attempts span about 11 hours).
    static func backoff(afterAttempts attempts: Int) -> TimeInterval {
        min(3600, 10 * pow(2, Double(max(0, attempts - 1))))
    }
}

/// Delivers the outbox: claims due events, POSTs each with its signature, and records the outcome. Any 2xx is
/// delivered; anything else is retried with backoff — across restarts, since the outbox is the ledger — until
/// ``WebhookSettings/maxAttempts``, then failed (visible in the admin API, replayable).
public struct WebhookSender: Sendable {
    public let ledger: Ledger
    public let settings: WebhookSettings
    let metrics: ServerMetrics
    let now: @Sendable () -> Date

    public init(ledger: Ledger, settings: WebhookSettings, metrics: ServerMetrics = ServerMetrics(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.ledger = ledger
        self.settings = settings
        self.metrics = metrics
        self.now = now
    }

    /// Sends what is due; returns how many were delivered.
    @discardableResult
    public func deliverDue(limit: Int = 20) async throws -> Int {
        var delivered = 0
        for event in try await ledger.claimWebhookEvents(now: now(), limit: limit) {
            let error = await post(event)
            let attempts = event.attempts + 1
            let retryAt = attempts >= settings.maxAttempts ? nil : now().addingTimeInterval(WebhookSettings.backoff(afterAttempts: attempts))
            try await ledger.settleWebhookEvent(event.eventId, delivered: error == nil, error: error, retryAt: retryAt, now: now())
            metrics.webhook(error == nil ? "delivered" : retryAt == nil ? "failed" : "retry")
            if error == nil { delivered += 1 }
        }
        return delivered
    }

    /// One delivery attempt: nil when the receiver took it, else why not.
    func post(_ event: StoredWebhookEvent) async -> String? {
        var request = HTTPClientRequest(url: settings.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "IAPKit-Event-Id", value: event.eventId)
        request.headers.add(name: "IAPKit-Event-Type", value: event.type)
        request.headers.add(name: "IAPKit-Signature", value: WebhookSettings.signature(body: event.body, timestamp: Int64(Date().timeIntervalSince1970),
                                                                                   secret: settings.secret))
        request.body = .bytes(ByteBuffer(string: event.body))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .init(settings.timeout))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            return (200..<300).contains(response.status.code) ? nil : "HTTP \(response.status.code)"
        } catch {
            return "\(error)".prefix(300).description
        }
    }
}

/// Runs the sender every `interval` while the server runs; a shutdown lets a batch under way finish.
public struct WebhookService: Service {
    let sender: WebhookSender
    let interval: Duration
    let logger: Logger

    public init(sender: WebhookSender, interval: Duration = .seconds(1), logger: Logger = Logger(label: "iapkit.webhooks")) {
        self.sender = sender
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do { try await sender.deliverDue() } catch { logger.error("webhook delivery failed: \(error)") }
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } } catch is CancellationError { return }
        }
    }
}
