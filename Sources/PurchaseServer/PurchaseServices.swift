import AppStoreFormats
import AppStoreTrust
import Foundation
import Hummingbird
import Logging
import PurchaseAPI
import PurchaseLedger
import ServiceLifecycle

/// The purchase server's parts and settings: what its routes (``buildRouter(_:logger:)``, or a host app's router with
/// ``routes(_:context:)``) and its background services (``backgroundServices(reconcileEvery:logger:)``) work with.
/// The server creates orders, verifies what the App Store signed, binds each transaction to one order and one account,
/// grants it once, and keeps subscriptions current from App Store Server Notifications.
public struct PurchaseServices: Sendable {
    /// Where orders, transactions and grants are kept: SQLite or PostgreSQL.
    public var ledger: Ledger
    /// Decides whether Apple signed a proof (JWS or receipt) under the trusted roots, for this app.
    public var verifier: ProofVerifier
    /// Checks the app's sign-in tokens (`Authorization: Bearer`) and names the account.
    public var authenticator: AccountAuthenticator
    /// The key of the admin API and the dashboard; nil: both are closed.
    public var adminKey: String?
    /// The largest request body read; a larger one is refused before it is read.
    public var maxBodyBytes: Int
    /// The server's clock: the wall clock, or a simulated one in tests and demos.
    public var now: @Sendable () -> Date
    /// How far Apple's signatures show Apple's clock ahead of ``now`` (``AppleClock``): for the operator's gauge.
    public let appleClock = AppleClock()
    /// The calls to Apple that follow answers, made by ``AppleCallService``.
    let appleCalls = AppleCallQueue()
    /// The operator's counters and gauges, served at `/metrics`.
    public var metrics = ServerMetrics()
    /// Refuse purchases reported with device-integrity signals (otherwise they are only recorded).
    public var refuseSuspiciousDevices = false
    /// Signs entitlement answers for apps that ask (a nonce header); nil: answers are unsigned.
    public var entitlementSigner: EntitlementSigner?
    /// Tell Apple (Finish Transaction) when a transaction reached its owner; needs the Server API.
    public var finishTransactionsWithApple = false
    /// Set at Apple (Set App Account Token) the account's token on purchases made outside the app's flow; needs the
    /// Server API.
    public var setAppAccountTokensWithApple = false
    /// Promotional offers the server signs, by offer identifier (`OfferRoutes`).
    public var promotionalOffers: [String: PromotionalOfferRule] = [:]
    /// Answer Apple's consumption requests (a customer asked for a refund) for customers who consented; needs the
    /// Server API. Nil: they are stored and left unanswered.
    public var consumption: ConsumptionSettings?
    /// Tell the app's backend what happened (outgoing webhooks); nil: no event is recorded (an outbox nobody drains
    /// would only grow, and cost every grant a write).
    public var webhooks: WebhookSettings? {
        didSet { ledger.recordsWebhookEvents = webhooks != nil }
    }
    /// Answer the App Store's Get Retention Message requests (`RetentionRoutes`); nil: the endpoint answers 404.
    public var retention: RetentionSettings?
    /// Proxies (addresses or networks) whose `X-Forwarded-For` names the client: the dashboard's sign-in throttle
    /// counts wrong keys per client (`ClientAddress`).
    public var trustedProxies: [String] = []
    /// `/metrics` open to anyone; otherwise it answers only ``metricsKey`` or the admin key (`authorizeMetrics(_:)`).
    public var publicMetrics = false
    /// A bearer key for `/metrics` alone, so that a scraper needs no admin key.
    public var metricsKey: String?
    /// The business view's rate table, for an approximate total in one currency (``MetricsRates``).
    public var metricsRates: MetricsRates?
    /// Close the ledger's store when the service group running ``backgroundServices(reconcileEvery:logger:)`` shuts
    /// down (``LedgerStoreService``): `iap serve` and `iap dev` do. Off by default, for a host whose store outlives the
    /// group.
    public var closesStoreOnShutdown = false
    /// Timeouts and the cap on open connections, applied by ``buildApplication(_:host:port:reconcileEvery:logger:logRequests:onRunning:)``.
    public var connectionLimits = ConnectionLimits()

    /// The server's parts, made by the caller (a test, a host app that opens its own ledger); ``open(_:roots:)`` makes
    /// them from a ``ServerConfiguration`` as `iap serve` does.
    public init(ledger: Ledger, verifier: ProofVerifier, authenticator: AccountAuthenticator, adminKey: String? = nil, maxBodyBytes: Int = 1 << 20,
                refuseSuspiciousDevices: Bool = false, now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
        self.refuseSuspiciousDevices = refuseSuspiciousDevices
        self.ledger = ledger
        // `webhooks` starts nil, and its didSet does not run in an initializer.
        self.ledger.recordsWebhookEvents = false
        self.verifier = verifier
        self.authenticator = authenticator
        self.adminKey = adminKey
        self.maxBodyBytes = maxBodyBytes
    }

    /// Notes when Apple signed what a request brought (``AppleClock``): only payloads of Apple's own environments
    /// (an Xcode transaction is signed by a developer's Mac, with its clock).
    func observeAppleClock(_ signedDate: Date?, environment: AppStoreEnvironment?) {
        guard let signedDate, environment == .production || environment == .sandbox else { return }
        metrics.appleClockLead(appleClock.observe(signedDate: signedDate, at: now()))
    }

    /// Opens the ledger the configuration names (migrating it, then refusing a catalog that dropped a product customers
    /// own: ``checkCatalogKeepsOwnedProducts(_:)``); loads the trusted roots unless given (``ServerConfiguration/loadTrustRoots()``).
    public static func open(_ configuration: ServerConfiguration, roots: TrustRoots? = nil) async throws -> PurchaseServices {
        let roots = try roots ?? configuration.loadTrustRoots()
        let store = try await Ledger.openStore(url: configuration.databaseURL)
        var ledger = Ledger(store: store, catalog: configuration.catalog)
        ledger.orderLifetime = configuration.orderLifetimeSeconds
        try await ledger.migrate()
        try await checkCatalogKeepsOwnedProducts(ledger)
        var services = PurchaseServices(ledger: ledger, verifier: ProofVerifier(roots: roots, configuration: configuration, apple: try AppleAccess(configuration)),
                                authenticator: try await AccountAuthenticator(configuration.auth), adminKey: configuration.adminKey,
                                maxBodyBytes: configuration.maxBodyBytes, refuseSuspiciousDevices: configuration.deviceIntegrityPolicy == .refuse)
        services.entitlementSigner = try EntitlementSigner.loadOrCreate(in: configuration.dataDirectory)
        services.finishTransactionsWithApple = configuration.appStore.finishTransactions ?? false
        services.setAppAccountTokensWithApple = configuration.appStore.setAppAccountTokens ?? false
        services.promotionalOffers = configuration.promotionalOffers
        services.consumption = configuration.appStore.refundPolicy.map {
            ConsumptionSettings(policy: $0, sampleContentProvided: configuration.appStore.sampleContentProvided ?? false)
        }
        services.retention = configuration.retentionMessaging.map { RetentionSettings(rules: $0.rules) }
        services.webhooks = configuration.webhooks.map { WebhookSettings(url: $0.url, secret: $0.secret, maxAttempts: $0.maxAttempts ?? 16) }
        services.trustedProxies = configuration.trustedProxies
        services.publicMetrics = configuration.publicMetrics
        services.metricsKey = configuration.metricsKey
        services.connectionLimits = configuration.connections
        services.metricsRates = configuration.metrics
        return services
    }

    /// Purchases made outside the app's flow carry no `appAccountToken`: Apple's later transactions of their series
    /// would name nobody. After the answer (``AppleCallQueue``), the account's token is set at Apple for each (Set App Account Token).
    /// Best effort: a failure is counted, and the next upload of a transaction of the series still without a token
    /// tries again; the ledger binds the series to the account whatever Apple holds.
    func setAppAccountTokensWithApple(_ transactions: [JWSTransactionDecodedPayload], account: String) {
        guard setAppAccountTokensWithApple, let serverAPI = verifier.apple.serverAPI else { return }
        let outside = transactions.filter { $0.appAccountToken == nil && $0.inAppOwnershipType != .familyShared && $0.transactionId != nil }
        guard !outside.isEmpty else { return }
        let (ledger, metrics, now) = (self.ledger, self.metrics, self.now)
        let queued = appleCalls.enqueue {
            for transaction in outside {
                do {
                    guard let id = transaction.transactionId, let original = transaction.originalTransactionId,
                          let token = try await ledger.appAccountToken(accountId: account, forTransaction: id, now: now()) else { continue }
                    try await serverAPI.serving(transaction.environment).setAppAccountToken(originalTransactionId: original, token)
                    metrics.appAccountTokenSet(succeeded: true)
                } catch {
                    metrics.appAccountTokenSet(succeeded: false)
                }
            }
        }
        if !queued { for _ in outside { metrics.appAccountTokenSet(succeeded: false) } }
    }

    /// Finishes with Apple the transactions that reached their owner, after the answer and without holding it up
    /// (``AppleCallQueue``).
    /// Best effort: the device's own `finish()` still follows a delivery, so a failure here loses nothing; it is
    /// counted for the operator.
    func finishWithApple(_ transactionIds: [String]) {
        guard finishTransactionsWithApple, let serverAPI = verifier.apple.serverAPI, !transactionIds.isEmpty else { return }
        let metrics = self.metrics
        let queued = appleCalls.enqueue {
            for id in transactionIds {
                do {
                    try await serverAPI.finishTransaction(id)
                    metrics.finishedWithApple(succeeded: true)
                } catch {
                    metrics.finishedWithApple(succeeded: false)
                }
            }
        }
        if !queued { for _ in transactionIds { metrics.finishedWithApple(succeeded: false) } }
    }
}

extension PurchaseServices {
    /// What runs beside the routes, for the application's service group: the reconciliation job every `reconcileEvery`
    /// (60 s unless told, as `iap serve`'s default; nil: none — proofs held while Apple was away then wait for the device
    /// to send them again), the webhook sender when webhooks are configured, and the calls to Apple that follow answers
    /// (``AppleCallService``). A host app that mounts ``PurchaseServices/routes(_:context:)`` runs these in its own service group, listed
    /// before its HTTP server: services stop in reverse order, and calls queued by requests still being answered are made
    /// only while the Apple-call service runs.
    public func backgroundServices(reconcileEvery: Duration? = .seconds(60), logger: Logger = Logger(label: "iapkit.server")) -> [any Service] {
        var jobs: [any Service] = closesStoreOnShutdown ? [LedgerStoreService(store: ledger.store)] : []
        jobs.append(AppleCallService(services: self))
        if let reconcileEvery { jobs.append(ReconciliationService(reconciler: Reconciler(services: self), interval: reconcileEvery, logger: logger)) }
        if let webhooks {
            jobs.append(WebhookService(sender: WebhookSender(ledger: ledger, settings: webhooks, metrics: metrics), logger: logger))
        }
        return jobs
    }
}
