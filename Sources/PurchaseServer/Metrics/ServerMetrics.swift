import Foundation
import Prometheus
import PurchaseAPI

/// The server's counters, served at `/metrics` in Prometheus' text format. Names and labels carry no account ids,
/// tokens or payloads.
public struct ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let purchaseLatency: DurationHistogram
    /// Counters for the outcomes every server sees, made once: the purchase path does not look them up per request.
    private let purchaseCounters: [String: Counter]
    private let notificationCounters: [String: Counter]
    private let appleClockGauge: Gauge
    /// The same counts, readable (the dashboard shows them; Prometheus' counters are write-only).
    private let notificationTally = Tally()

    static var purchases: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "purchases", unitName: "total", helpText: "Purchase submissions by outcome")
    }
    static var notifications: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "notifications", unitName: "total", helpText: "App Store notifications by result")
    }
    static var reconciled: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "reconciled", unitName: "total", helpText: "Reconciliation repairs")
    }

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        purchaseLatency = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(namespace: "iapkit", metricName: "purchase_duration", unitName: "seconds",
                                             helpText: "Time to answer POST /v1/purchases"),
            buckets: [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5)])
        purchaseCounters = Dictionary(uniqueKeysWithValues: PurchaseRequestOutcome.announced.map {
            ($0.label, registry.makeCounter(descriptor: Self.purchases, labels: [("outcome", $0.label)]))
        })
        notificationCounters = Dictionary(uniqueKeysWithValues: NotificationRequestOutcome.allCases.map {
            ($0.rawValue, registry.makeCounter(descriptor: Self.notifications, labels: [("result", $0.rawValue)]))
        })
        appleClockGauge = registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "iapkit", metricName: "apple_clock_lead", unitName: "seconds",
            helpText: "How far Apple's signing times run ahead of this server's clock (largest in this and the last 5-minute slot; 0 or less: not behind)"))
    }

    /// The largest lead of Apple's clock over this server's seen lately (``AppleClock``).
    func appleClockLead(_ seconds: TimeInterval) {
        appleClockGauge.set(seconds)
    }

    /// How a `POST /v1/purchases` ended, and how long it took.
    func purchase(_ outcome: PurchaseRequestOutcome, took duration: Duration) {
        let label = outcome.label
        (purchaseCounters[label] ?? registry.makeCounter(descriptor: Self.purchases, labels: [("outcome", label)])).increment()
        purchaseLatency.record(duration)
    }

    /// How a notification posted by Apple ended.
    func notification(_ outcome: NotificationRequestOutcome) {
        let result = outcome.rawValue
        notificationTally.add(result)
        (notificationCounters[result] ?? registry.makeCounter(descriptor: Self.notifications, labels: [("result", result)])).increment()
    }

    /// A reconciliation run's repairs.
    func reconciled(_ report: Reconciler.Report) {
        for (what, count) in [("proof_granted", report.proofsGranted), ("proof_rejected", report.proofsRejected),
                              ("proof_postponed", report.proofsPostponed), ("subscription_refreshed", report.subscriptionsRefreshed),
                              ("order_repaired", report.ordersRepaired), ("notification_recovered", report.notificationsRecovered)] where count > 0 {
            registry.makeCounter(descriptor: Self.reconciled, labels: [("what", what)]).increment(by: Int64(count))
        }
    }

    /// A Finish Transaction call to Apple, by result.
    func finishedWithApple(succeeded: Bool) {
        registry.makeCounter(descriptor: Self.finishedWithApple, labels: [("result", succeeded ? "finished" : "failed")]).increment()
    }
    static var finishedWithApple: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "apple_finish", unitName: "total", helpText: "Finish Transaction calls to Apple by result")
    }

    /// The `kind` label of ``offerSignatures``.
    enum OfferSignature: String { case promotional, introductory }

    func offerSigned(_ kind: OfferSignature) {
        registry.makeCounter(descriptor: Self.offerSignatures, labels: [("kind", kind.rawValue)]).increment()
    }
    static var offerSignatures: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "offer_signatures", unitName: "total", helpText: "Offer signatures made for StoreKit, by kind")
    }

    func appAccountTokenSet(succeeded: Bool) {
        registry.makeCounter(descriptor: Self.appAccountTokens, labels: [("result", succeeded ? "set" : "failed")]).increment()
    }
    static var appAccountTokens: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "apple_app_account_token", unitName: "total",
                             helpText: "Set App Account Token calls to Apple for purchases made outside the app's flow, by result")
    }

    /// What became of a `CONSUMPTION_REQUEST`: `sent`, `refused` by Apple, or why nothing was sent.
    func consumptionAnswer(_ result: String) {
        registry.makeCounter(descriptor: Self.consumptionAnswers, labels: [("result", result)]).increment()
    }
    static var consumptionAnswers: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "consumption_answers", unitName: "total",
                             helpText: "Answers to Apple's consumption requests (Send Consumption Information) by result")
    }

    /// What a Get Retention Message request was answered with.
    enum RetentionChoice: String {
        case message, alternateProduct, promotionalOffer
        /// No rule fitted.
        case `default`
        /// No choice within Apple's deadline.
        case deadline
    }

    func retentionMessage(_ choice: RetentionChoice) {
        registry.makeCounter(descriptor: Self.retentionMessages, labels: [("choice", choice.rawValue)]).increment()
    }
    static var retentionMessages: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "retention_messages", unitName: "total",
                             helpText: "Answers to the App Store's Get Retention Message requests, by choice")
    }

    /// A webhook delivery attempt's result.
    enum WebhookDelivery: String {
        case delivered, retry
        /// Out of attempts.
        case failed
    }

    func webhook(_ result: WebhookDelivery) {
        registry.makeCounter(descriptor: Self.webhooks, labels: [("result", result.rawValue)]).increment()
    }
    static var webhooks: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "webhook_deliveries", unitName: "total", helpText: "Outgoing webhook delivery attempts by result")
    }

    /// Why a dashboard sign-in was refused (``SignInThrottle``).
    enum SignInRefusal: String {
        /// A wrong key, written to the audit log.
        case audited
        /// A wrong key past the audit log's ceiling for the minute.
        case unaudited
        /// A wrong key not judged: its client sent too many.
        case throttled
    }

    func dashboardSignInRefused(_ result: SignInRefusal) {
        registry.makeCounter(descriptor: Self.dashboardSignInRefusals, labels: [("result", result.rawValue)]).increment()
    }
    static var dashboardSignInRefusals: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "dashboard_sign_in_refused", unitName: "total",
                             helpText: "Wrong keys at the dashboard's sign-in, by whether they were audited or throttled")
    }

    /// The text Prometheus scrapes.
    public func exposition() -> String { registry.emitToString() }

    /// Notifications with `result` (applied, duplicate, refused) since this process started.
    public func notifications(_ result: String) -> Int { notificationTally.count(result) }
}

/// Counts by name, behind a lock.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]

    func add(_ name: String) { lock.withLock { counts[name, default: 0] += 1 } }
    func count(_ name: String) -> Int { lock.withLock { counts[name] ?? 0 } }
}
