import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import PurchaseAPI
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

    /// Seconds before attempt `attempts + 1`: 10 s doubling, at most an hour (16 attempts span about 7½ hours).
    static func backoff(afterAttempts attempts: Int) -> TimeInterval {
        min(3600, 10 * pow(2, Double(max(0, attempts - 1))))
    }
}

/// Delivers the outbox: claims due events one at a time, POSTs each with its signature, and records the outcome. Any
/// 2xx is delivered; anything else — a redirect included (never followed: the signed body goes to the configured URL
/// only) — is retried with backoff, across restarts since the outbox is the ledger, until
/// ``WebhookSettings/maxAttempts``, then failed (visible in the admin API, replayable). Scheduling runs on the wall
/// clock, whatever clock the ledger's entitlements are judged by.
public struct WebhookSender: Sendable {
    public let ledger: Ledger
    public let settings: WebhookSettings
    let metrics: ServerMetrics

    /// One client for the process: redirects off, never shut down.
    static let client: HTTPClient = {
        let configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(10)))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// Delivered events are kept this long for the operator, then forgotten.
    public static let keepDelivered: TimeInterval = 30 * 86_400

    public init(ledger: Ledger, settings: WebhookSettings, metrics: ServerMetrics = ServerMetrics()) {
        self.ledger = ledger
        self.settings = settings
        self.metrics = metrics
    }

    /// A claim outlives one attempt comfortably, and lapses soon after a sender that died.
    var lease: TimeInterval { Double(settings.timeout.components.seconds) + 20 }

    /// What a claim must have left beyond one attempt's timeout for its holder to post. Replicas judge claims by their
    /// own clocks, which must agree to well within this (NTP does).
    static let claimMargin: TimeInterval = 10

    /// Sends what is due by `dueBy` (now unless given: a later time sends retries before their backoff ends; other
    /// senders' claims still hold), up to `limit` events; returns how many were delivered.
    @discardableResult
    public func deliverDue(limit: Int = 50, dueBy: Date? = nil) async throws -> Int {
        var delivered = 0
        for _ in 0..<limit {
            guard let (event, claim) = try await ledger.claimWebhookEvent(now: Date(), dueBy: dueBy, lease: lease) else { break }
            // A claim granted late (a long queue before the ledger's writer, a paused process) may lapse while its
            // POST runs, and another sender would post the event at the same time: such a claim is left to lapse.
            guard claim.timeIntervalSinceNow > Double(settings.timeout.components.seconds) + Self.claimMargin else { continue }
            let error = await post(event)
            let attempts = event.attempts + 1
            let retryAt = attempts >= settings.maxAttempts ? nil : Date().addingTimeInterval(WebhookSettings.backoff(afterAttempts: attempts))
            try await ledger.settleWebhookEvent(event.eventId, claim: claim, delivered: error == nil, error: error, retryAt: retryAt)
            metrics.webhook(error == nil ? .delivered : retryAt == nil ? .failed : .retry)
            if error == nil { delivered += 1 }
        }
        return delivered
    }

    /// One delivery attempt: nil when the receiver took it, else why not. The whole exchange, body included, is held to
    /// the timeout: a receiver that trickles its answer cannot stall delivery.
    func post(_ event: StoredWebhookEvent) async -> String? {
        let (url, timeout) = (settings.url, settings.timeout)
        let signature = WebhookSettings.signature(body: event.body, timestamp: Int64(Date().timeIntervalSince1970), secret: settings.secret)
        return await withTaskGroup(of: String?.self) { group in
            group.addTask {
                var request = HTTPClientRequest(url: url)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.headers.add(name: "IAPKit-Event-Id", value: event.eventId)
                request.headers.add(name: "IAPKit-Event-Type", value: event.type)
                request.headers.add(name: "IAPKit-Signature", value: signature)
                request.body = .bytes(ByteBuffer(string: event.body))
                do {
                    let response = try await Self.client.execute(request, timeout: .init(timeout))
                    _ = try? await response.body.collect(upTo: 64 * 1024)
                    return (200..<300).contains(response.status.code) ? nil : "HTTP \(response.status.code)"
                } catch {
                    return String("\(error)".prefix(300))
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout + .seconds(1))
                return "timed out after \(timeout)"
            }
            let first = await group.next() ?? "no answer"
            group.cancelAll()
            return first
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
        var pruned = Date.distantPast
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do { try await sender.deliverDue() } catch { logger.error("webhook delivery failed: \(error)") }
            if Date().timeIntervalSince(pruned) > 3600 {
                pruned = Date()
                do { try await sender.ledger.pruneWebhookEvents(deliveredBefore: Date().addingTimeInterval(-WebhookSender.keepDelivered)) } catch {
                    logger.error("webhook outbox pruning failed: \(error)")
                }
            }
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } } catch is CancellationError { return }
        }
    }
}
