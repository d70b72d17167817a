import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger

/// Everything the purchase server needs, from one JSON file with environment overrides (`IAPKIT_*`). Every field has
/// an embedded default, so `iap serve` starts with no file at all.
public struct ServerConfiguration: Codable, Sendable {
    /// The app whose purchases this server accepts.
    public var bundleId: String = "com.example.iapkit"
    /// Checked against production notifications and app transactions when set (Apple puts it in every production
    /// payload, and its libraries require it for production); unset, the bundle id alone ties them to the app.
    public var appAppleId: Int64?
    /// `Production`, `Sandbox` (and `Xcode`, which proves nothing about a real payment, only when asked for).
    public var environments: [String] = ["Production", "Sandbox"]
    /// Root certificates (DER or PEM) trusted for JWS and receipts: Apple's, or the simulator's for development. Named
    /// roots replace Apple's bundled ones (``trustAppleRoots``); name Apple's files too to keep them.
    public var trustedRoots: [String] = []
    /// With no ``trustedRoots``, trust Apple's two roots that IAPKit ships (checked against their pinned fingerprints
    /// at start). `false` trusts nothing until roots are named.
    public var trustAppleRoots: Bool = true
    /// What each product grants. With ``storeKitFile``, the products come from that file and this only says what
    /// they grant where the defaults do not fit (see `LedgerCatalog.init(storeKit:grants:)`).
    public var catalog: LedgerCatalog = .demo
    /// An Xcode `.storekit` file listing the products sold.
    public var storeKitFile: String?
    /// `sqlite:///path` (default: `ledger.sqlite` in the data directory) or `postgres://…`.
    public var database: String?
    /// Where the SQLite ledger and other files live.
    public var dataDirectory: String = ".iap-server"
    /// The address the server listens on; `0.0.0.0` behind a reverse proxy on another host.
    public var host: String = "127.0.0.1"
    /// The port the server listens on.
    public var port: Int = 8080
    /// How app calls prove their account: a JWT from the app's own sign-in.
    public var auth: AuthConfiguration = .init()
    /// Needed on `/admin/...`; without one, admin endpoints are closed.
    public var adminKey: String?
    /// `/metrics` needs a bearer key — this one or ``adminKey`` — unless ``publicMetrics`` is set.
    public var metricsKey: String?
    /// Serve `/metrics` to anyone (a port only the scraper reaches). Off by default: the counters are the business's.
    public var publicMetrics: Bool = false
    /// Proxies (addresses, or networks as `10.0.0.0/8`) whose `X-Forwarded-For` names the client. Without them the
    /// connection's peer is the client; the dashboard's sign-in throttle counts wrong keys per client.
    public var trustedProxies: [String] = []
    /// How long an unpaid order stays open, in seconds.
    public var orderLifetimeSeconds: Double = 86_400
    /// Largest request body read, in bytes (receipts are the largest input).
    public var maxBodyBytes: Int = 1 << 20
    /// Idle, header and body timeouts, and the cap on open connections.
    public var connections: ConnectionLimits = .init()
    /// Where Apple (or the simulator) is, and the credentials to ask it.
    public var appStore: AppStoreConfiguration = .init()
    /// What to do when an app reports device-integrity signals with a purchase: `record` (default) keeps them beside
    /// the transaction; `refuse` also refuses an order from such a device (403 `device_integrity`, before anything is
    /// charged), and an upload carrying such a report (nothing granted until a clean one).
    public var deviceIntegrityPolicy: DeviceIntegrityPolicy = .record

    public enum DeviceIntegrityPolicy: String, Codable, Sendable, CaseIterable {
        case record, refuse
    }
    /// Seconds between runs of the reconciliation job (retrying held proofs, refreshing stale subscriptions).
    public var reconcileIntervalSeconds: Double = 60
    /// Promotional offers the server signs (`POST /v1/offers/sign`), by offer identifier: the products each is set up
    /// for in App Store Connect and who may have it. Signing needs the In-App Purchase key (`appStore.privateKeyFile`).
    public var promotionalOffers: [String: PromotionalOfferRule] = [:]
    /// Outgoing webhooks: every change the ledger makes that the app's backend should know of, POSTed there signed.
    public var webhooks: WebhooksConfiguration?
    /// The business view's optional rate table (`{"currency": "USD", "rates": {"EUR": 1.08}}`): an approximate total
    /// in one currency beside the exact per-currency figures (docs/METRICS.md).
    public var metrics: MetricsRates?

    public struct WebhooksConfiguration: Codable, Sendable {
        /// `https://…` (or `http://` to a loopback host).
        public var url: String
        /// At least 16 characters; signs each request (`IAPKit-Signature`).
        public var secret: String
        /// Attempts before an event is marked failed (default 16, about 7½ hours).
        public var maxAttempts: Int?
        public init(url: String, secret: String, maxAttempts: Int? = nil) {
            self.url = url
            self.secret = secret
            self.maxAttempts = maxAttempts
        }
    }

    /// Retention Messaging: what `POST /v1/retention/appstore` (the Get Retention Message endpoint, configured at Apple
    /// with Configure Realtime URL) answers. Unset: that endpoint answers 404 and Apple shows the default messages.
    public var retentionMessaging: RetentionMessagingConfiguration?

    public struct RetentionMessagingConfiguration: Codable, Sendable {
        /// Tried in order; the first that fits the subscription, the locale and the customer is answered.
        public var rules: [RetentionMessageRule]
        public init(rules: [RetentionMessageRule]) { self.rules = rules }
    }

    /// Apple's APIs, asked when local proof is not enough. Each is off until configured.
    public struct AppStoreConfiguration: Codable, Sendable {
        /// App Store Server API base URL (`https://api.storekit.apple.com`, `https://api.storekit-sandbox.apple.com`, or the simulator's).
        public var serverAPIBaseURL: String?
        public var keyId: String?
        public var issuerId: String?
        /// The In-App Purchase key (`.p8`, PEM) downloaded from App Store Connect.
        public var privateKeyFile: String?
        /// verifyReceipt's production URL; with it, receipts that do not verify locally are sent to Apple.
        public var verifyReceiptURL: String?
        public var verifyReceiptSandboxURL: String?
        /// The app's shared secret for verifyReceipt.
        public var sharedSecret: String?
        /// Call Finish Transaction (API 1.20) once a transaction reached its owner, so that a device that died between
        /// the grant and its own `finish()` leaves nothing queued. Off unless set: the SDK finishes on the device, and
        /// Apple calls the server's call unnecessary then; it needs `serverAPIBaseURL`.
        public var finishTransactions: Bool?
        /// Set the account's `appAccountToken` at Apple (Set App Account Token, API 1.16) on purchases made outside the
        /// app's flow — an offer code redeemed in the App Store, a promotion, a purchase on a device without the app's
        /// order — once the server delivered them, so Apple's later transactions of the series name the account. Off
        /// unless set; needs `serverAPIBaseURL`.
        public var setAppAccountTokens: Bool?
        /// Answer Apple's consumption requests (a customer asked for a refund) with Send Consumption Information, for
        /// customers who consented (`PUT /v1/consumption-consent` from the app): `preferRefund`, `preferNoRefund` or
        /// `prorated` (by what was consumed). Unset: consumption requests are stored and left unanswered. Needs
        /// `serverAPIBaseURL`.
        public var refundPolicy: RefundPolicy?
        /// Whether the app shows a free sample, a trial or what a purchase brings before it is made (sent with each answer).
        public var sampleContentProvided: Bool?
        /// Attempts per call (with backoff) and seconds before one attempt times out.
        public var attempts: Int?
        public var timeoutSeconds: Double?
        /// How often app requests may make the server call Apple, per account and overall, how long Apple's "not
        /// found" is believed, and how many proofs an account may have held (``AppleLookupLimitSettings``).
        public var lookupLimits: AppleLookupLimitSettings?
        public init() {}
    }

    /// The app's sign-in tokens: an HS256 shared secret, or an ES256/RS256 public key (PEM file).
    public struct AuthConfiguration: Codable, Sendable {
        public var hs256Secret: String?
        public var publicKeyPEMFile: String?
        /// `ES256` or `RS256` for ``publicKeyPEMFile``.
        public var algorithm: String?
        /// Required in every token's `aud` when set: a token the sign-in issued for another service is refused here.
        public var audience: String?
        /// Required as every token's `iss` when set.
        public var issuer: String?
        public init(hs256Secret: String? = nil, publicKeyPEMFile: String? = nil, algorithm: String? = nil, audience: String? = nil, issuer: String? = nil) {
            self.hs256Secret = hs256Secret
            self.publicKeyPEMFile = publicKeyPEMFile
            self.algorithm = algorithm
            self.audience = audience
            self.issuer = issuer
        }
    }

    public init() {}

    /// The database URL in effect.
    public var databaseURL: String { database ?? "sqlite://" + URL(fileURLWithPath: dataDirectory).appendingPathComponent("ledger.sqlite").path }

    /// Reads `file` (when given), then applies `IAPKIT_*` environment overrides (`EnvironmentLayer`).
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        if let file {
            guard let data = FileManager.default.contents(atPath: file), data.count <= 4 << 20 else {
                throw ConfigurationError("cannot read configuration file \(file) (missing, unreadable or over 4 MiB)")
            }
            configuration = try decode(data, file: file)
        }
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            try EnvironmentLayer(environment).apply(to: &configuration)
        } else if let name = environment.keys.first(where: { $0.hasPrefix("IAPKIT_") }) {
            // swift-configuration, which reads this layer, starts at macOS 15; silence would serve the file's values.
            throw ConfigurationError("\(name) is set, but environment overrides need macOS 15 or later: put the key in the configuration file")
        }
        try configuration.resolveStoreKitCatalog(explicitGrants: file != nil)
        try configuration.validate()
        return configuration
    }

    /// Replaces the catalog with the `.storekit` file's products when one is named. Grants given in the file's
    /// `catalog` refine the defaults; the built-in demo grants never do.
    public mutating func resolveStoreKitCatalog(explicitGrants: Bool = true) throws {
        guard let storeKitFile else { return }
        guard let data = FileManager.default.contents(atPath: storeKitFile), data.count <= StoreKitConfiguration.maxBytes else {
            throw ConfigurationError("cannot read the .storekit file \(storeKitFile) (missing, unreadable or too large)")
        }
        do {
            let storeKit = try StoreKitConfiguration(data: [UInt8](data))
            let grants = explicitGrants && catalog != .demo ? catalog.products : [:]
            catalog = try LedgerCatalog(storeKit: storeKit, grants: grants)
        } catch let error as LedgerError {
            throw ConfigurationError(error.message)
        } catch {
            throw ConfigurationError("\(storeKitFile) is not a .storekit file: \(error)")
        }
    }

    /// Refuses a configuration that cannot work, naming what is wrong.
    public func validate() throws {
        guard !bundleId.isEmpty else { throw ConfigurationError("bundleId is empty") }
        guard (0...65_535).contains(port) else { throw ConfigurationError("port \(port) is out of range") }
        for (productId, rule) in catalog.products {
            if let problem = rule.problem { throw ConfigurationError("catalog product \(productId): \(problem)") }
        }
        for name in environments where !["Production", "Sandbox", "Xcode", "LocalTesting"].contains(name) {
            throw ConfigurationError("unknown environment \(name)")
        }
        // Anyone can sign an Xcode or local-testing purchase (a self-signed certificate made on any Mac): a production
        // server that took them would give every product away to whoever asks. They stay on a server for development
        // (with Sandbox at most), and are kept apart from Apple's transactions there (TransactionKey).
        if let problem = appStore.lookupLimits?.problem { throw ConfigurationError(problem) }
        if environments.contains("Production"), let test = environments.first(where: { $0 == "Xcode" || $0 == "LocalTesting" }) {
            throw ConfigurationError("environments: \(test) with Production would let anyone grant themselves any product (\(test) payloads are self-signed on a developer's Mac); accept \(test) only on a development server, with Sandbox at most")
        }
        if auth.publicKeyPEMFile != nil, !["ES256", "RS256"].contains(auth.algorithm ?? "") {
            throw ConfigurationError("auth.algorithm must be ES256 or RS256 with auth.publicKeyPEMFile")
        }
        if let metricsKey, metricsKey.count < 16 {
            // Not throttled either, for the same reason as the admin key.
            throw ConfigurationError("metricsKey must be at least 16 characters")
        }
        if case .failure(let error) = TrustedProxies.parse(trustedProxies) { throw error }
        if let adminKey, adminKey.count < 16 {
            // The admin API is not throttled (a lock-out would let anyone lock the operators out): the key's length is
            // what makes guessing it hopeless.
            throw ConfigurationError("adminKey must be at least 16 characters")
        }
        guard maxBodyBytes >= 1024, maxBodyBytes <= 16 << 20 else { throw ConfigurationError("maxBodyBytes must be 1 KiB to 16 MiB") }
        try connections.validate()
        for (offer, rule) in promotionalOffers {
            for productId in rule.productIds where catalog.rule(for: productId)?.type != .autoRenewableSubscription {
                throw ConfigurationError("promotionalOffers.\(offer): \(productId) is not an auto-renewable subscription the catalog sells")
            }
        }
        if let webhooks {
            guard let url = URL(string: webhooks.url), let host = url.host, url.scheme == "https" || (url.scheme == "http" && ["127.0.0.1", "localhost", "::1"].contains(host)) else {
                throw ConfigurationError("webhooks.url must be https:// (or http:// to a loopback host): \(webhooks.url)")
            }
            guard webhooks.secret.utf8.count >= 16 else { throw ConfigurationError("webhooks.secret must be at least 16 characters") }
            guard (1...100).contains(webhooks.maxAttempts ?? 16) else { throw ConfigurationError("webhooks.maxAttempts is 1 to 100") }
        }
        if retentionMessaging != nil, environments.contains("Production"), appAppleId == nil {
            throw ConfigurationError("retentionMessaging needs appAppleId: a production retention request names the app only by it")
        }
        for (index, rule) in (retentionMessaging?.rules ?? []).enumerated() {
            if let problem = rule.problem(catalog: catalog, offers: promotionalOffers) { throw ConfigurationError("retentionMessaging.rules[\(index)]: \(problem)") }
            if rule.promotionalOfferIdentifier != nil, appStore.serverAPIBaseURL == nil {
                throw ConfigurationError("retentionMessaging.rules[\(index)]: a promotional offer is signed with the In-App Purchase key: set appStore.serverAPIBaseURL and its key")
            }
        }
        if let metrics {
            guard metrics.currency.count == 3 else { throw ConfigurationError("metrics.currency is an ISO 4217 code such as USD") }
            for (currency, rate) in metrics.rates where !(rate.isFinite && rate > 0) {
                throw ConfigurationError("metrics.rates.\(currency) must be a positive number")
            }
        }
        if appStore.refundPolicy != nil, appStore.serverAPIBaseURL == nil {
            throw ConfigurationError("appStore.refundPolicy answers through the Server API: set appStore.serverAPIBaseURL and its key")
        }
    }

    /// The environments accepted.
    public var acceptedEnvironments: Set<AppStoreEnvironment> { Set(environments.map(AppStoreEnvironment.init(rawValue:))) }

    // Codable with every key optional: a file names only what it changes.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = ServerConfiguration()
        bundleId = try c.decodeIfPresent(String.self, forKey: .bundleId) ?? d.bundleId
        appAppleId = try c.decodeIfPresent(Int64.self, forKey: .appAppleId)
        environments = try c.decodeIfPresent([String].self, forKey: .environments) ?? d.environments
        trustedRoots = try c.decodeIfPresent([String].self, forKey: .trustedRoots) ?? d.trustedRoots
        trustAppleRoots = try c.decodeIfPresent(Bool.self, forKey: .trustAppleRoots) ?? d.trustAppleRoots
        catalog = try c.decodeIfPresent(LedgerCatalog.self, forKey: .catalog) ?? d.catalog
        storeKitFile = try c.decodeIfPresent(String.self, forKey: .storeKitFile)
        database = try c.decodeIfPresent(String.self, forKey: .database)
        dataDirectory = try c.decodeIfPresent(String.self, forKey: .dataDirectory) ?? d.dataDirectory
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? d.host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? d.port
        auth = try c.decodeIfPresent(AuthConfiguration.self, forKey: .auth) ?? d.auth
        adminKey = try c.decodeIfPresent(String.self, forKey: .adminKey)
        metricsKey = try c.decodeIfPresent(String.self, forKey: .metricsKey)
        publicMetrics = try c.decodeIfPresent(Bool.self, forKey: .publicMetrics) ?? d.publicMetrics
        trustedProxies = try c.decodeIfPresent([String].self, forKey: .trustedProxies) ?? d.trustedProxies
        orderLifetimeSeconds = try c.decodeIfPresent(Double.self, forKey: .orderLifetimeSeconds) ?? d.orderLifetimeSeconds
        maxBodyBytes = try c.decodeIfPresent(Int.self, forKey: .maxBodyBytes) ?? d.maxBodyBytes
        connections = try c.decodeIfPresent(ConnectionLimits.self, forKey: .connections) ?? d.connections
        appStore = try c.decodeIfPresent(AppStoreConfiguration.self, forKey: .appStore) ?? d.appStore
        reconcileIntervalSeconds = try c.decodeIfPresent(Double.self, forKey: .reconcileIntervalSeconds) ?? d.reconcileIntervalSeconds
        if let policy = try c.decodeIfPresent(String.self, forKey: .deviceIntegrityPolicy) {
            guard let known = DeviceIntegrityPolicy(rawValue: policy) else {
                throw DecodingError.dataCorruptedError(forKey: .deviceIntegrityPolicy, in: c, debugDescription: "deviceIntegrityPolicy is record or refuse, not \(policy)")
            }
            deviceIntegrityPolicy = known
        } else {
            deviceIntegrityPolicy = d.deviceIntegrityPolicy
        }
        promotionalOffers = try c.decodeIfPresent([String: PromotionalOfferRule].self, forKey: .promotionalOffers) ?? d.promotionalOffers
        retentionMessaging = try c.decodeIfPresent(RetentionMessagingConfiguration.self, forKey: .retentionMessaging)
        webhooks = try c.decodeIfPresent(WebhooksConfiguration.self, forKey: .webhooks)
        metrics = try c.decodeIfPresent(MetricsRates.self, forKey: .metrics)
    }
}

/// A configuration that cannot work.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
