import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// One certificate authority for the whole test process (RSA key generation is slow).
let simulatorAuthority: CertificateAuthority = try! CertificateAuthority.create()

enum LedgerKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres
    var testDescription: String { rawValue }

    func databaseURL() throws -> String {
        switch self {
        case .sqlite:
            return "sqlite://" + FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)/ledger.sqlite").path
        case .postgres:
            guard let url = ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"] else {
                throw ConfigurationError("IAPKIT_POSTGRES_URL is not set: run the suite with scripts/test, which starts a throwaway PostgreSQL")
            }
            return url
        }
    }
}

/// The whole system on loopback: the purchase server, and the simulator posting its notifications to it.
struct System {
    let server: any TestClientProtocol
    let simulator: any TestClientProtocol
    let engine: StoreEngine
    let services: PurchaseServices
    let secret: String
    /// What the server was started with, for a second server over the same ledger (``withServer(bundleId:_:)``).
    let configuration: ServerConfiguration
    let roots: TrustRoots

    static let bundleId = "com.example.iapkit"

    static let adminKey = "admin-key-for-tests"

    /// How the server is set up for a test.
    struct Options: Sendable {
        var kind: LedgerKind = .sqlite
        var faults = NotificationFaults()
        var grace = true
        /// Whether the simulator posts its notifications to the server.
        var deliver = true
        /// Whether the server trusts the simulator's receipt root (without it, receipts go to verifyReceipt).
        var trustReceiptRoot = true
        /// Attempts and per-attempt timeout for calls to Apple.
        var appleAttempts = 2
        var appleTimeoutSeconds = 2.0
        var refuseSuspiciousDevices = false
        /// Whether the server signs entitlement answers (for apps that send a nonce).
        var signEntitlements = false
        /// Whether the server calls Finish Transaction once a transaction reached its owner.
        var finishWithApple = false
        /// Promotional offers the server signs.
        var promotionalOffers: [String: PromotionalOfferRule] = [:]
        /// Whether the server sets the account's token at Apple on purchases made outside the app's flow.
        var setAppAccountTokens = false
        /// How the server answers Apple's consumption requests; nil: it does not.
        var refundPolicy: RefundPolicy?
        /// What the server answers the App Store's Get Retention Message requests with; nil: it does not.
        var retention: [RetentionMessageRule]?
        /// Where the server sends its webhooks; nil: it keeps them in the outbox.
        var webhooks: WebhookSettings?
        /// The environments the server accepts; nil: its default.
        var environments: [String]?
        /// How many seconds the server's clock runs behind the simulator's (a misconfigured server).
        var serverClockBehind: TimeInterval = 0
        /// A database of its own on PostgreSQL (SQLite's is always new): for tests that count what the whole ledger
        /// holds, which the suite's shared database mixes with every other test's rows.
        var ownDatabase = false
    }

    /// Runs `body` with both servers up. The simulator starts first; the server trusts its roots, asks its Server API
    /// and verifyReceipt, and judges entitlements on its clock, so advancing the simulator's clock moves both.
    static func run(_ kind: LedgerKind = .sqlite, faults: NotificationFaults = NotificationFaults(), grace: Bool = true, deliver: Bool = true,
                    _ body: @Sendable (System) async throws -> Void) async throws {
        try await run(Options(kind: kind, faults: faults, grace: grace, deliver: deliver), body)
    }

    static func run(_ options: Options, _ body: @Sendable (System) async throws -> Void) async throws {
        try await liveSystems.run { try await start(options, body) }
    }

    /// Live systems at once. Swift Testing starts a suite's tests together; unbounded, this suite held 194 listeners
    /// and 1,700 descriptors at its peak, past what Foundation's `Process.run()` survives (``OpenFiles``).
    private static let liveSystems = ConcurrencyGate(limit: 8)

    private static func start(_ options: Options, _ body: @Sendable (System) async throws -> Void) async throws {
        let database = options.ownDatabase && options.kind == .postgres ? try PostgresDatabases.fresh("system") : try options.kind.databaseURL()
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: simulatorAuthority),
                                     gracePeriodEnabled: options.grace)
        let apiKey = P256.Signing.PrivateKey()
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("api-key-\(UUID().uuidString).p8")
        try Data(apiKey.pemRepresentation.utf8).write(to: keyFile)
        // Delivery is judged, not timed, here (CI on 4eca729: a CONSUMPTION_REQUEST the server took with its 3 s answer
        // budget crossed Apple's 5 s under the suite's load and was recorded TIMED_OUT).
        let delivery = options.deliver ? NotificationDelivery(engine: engine, urls: [], timeout: 30) : nil
        await delivery?.setFaults(options.faults)
        let authenticator = APIAuthenticator(keyId: "TESTKEY001", issuerId: "test-issuer", publicKey: apiKey.publicKey, bundleId: bundleId)
        var simulatorServices = SimulatorServer.Services(engine: engine, authenticator: authenticator, delivery: delivery)
        // The server's answers are judged, not timed, here: the whole suite shares two cores (time: BENCHMARKS.md).
        simulatorServices.retentionBudget = .seconds(10)
        try await SimulatorServer.application(simulatorServices, port: 0).test(.live) { simulator in
            var configuration = ServerConfiguration()
            configuration.database = database
            configuration.auth.hs256Secret = String(repeating: "s3cret-", count: 6)
            configuration.adminKey = adminKey
            let base = "http://127.0.0.1:\(simulator.port!)"
            configuration.appStore.serverAPIBaseURL = base
            configuration.appStore.keyId = "TESTKEY001"
            configuration.appStore.issuerId = "test-issuer"
            configuration.appStore.privateKeyFile = keyFile.path
            configuration.appStore.verifyReceiptURL = base + "/verifyReceipt"
            configuration.appStore.verifyReceiptSandboxURL = base + "/sandbox/verifyReceipt"
            configuration.appStore.attempts = options.appleAttempts
            configuration.appStore.timeoutSeconds = options.appleTimeoutSeconds
            if let environments = options.environments { configuration.environments = environments }
            var roots = TrustRoots()
            try roots.add(certificateData: simulatorAuthority.jws.rootDER, source: "simulator JWS root")
            if options.trustReceiptRoot { try roots.add(certificateData: simulatorAuthority.receipts.rootDER, source: "simulator receipt root") }
            let store = try await Ledger.openStore(url: configuration.databaseURL)
            let ledger = Ledger(store: store, catalog: configuration.catalog)
            try await ledger.migrate()
            let clock = await engine.clock
            let behind = options.serverClockBehind
            var services = PurchaseServices(
                ledger: ledger, verifier: ProofVerifier(roots: roots, configuration: configuration, apple: try AppleAccess(configuration)),
                authenticator: try await AccountAuthenticator(configuration.auth), adminKey: adminKey,
                refuseSuspiciousDevices: options.refuseSuspiciousDevices, now: { clock.now.addingTimeInterval(-behind) })
            if options.signEntitlements { services.entitlementSigner = EntitlementSigner(key: P256.Signing.PrivateKey()) }
            services.finishTransactionsWithApple = options.finishWithApple
            services.consumption = options.refundPolicy.map { ConsumptionSettings(policy: $0) }
            services.setAppAccountTokensWithApple = options.setAppAccountTokens
            services.promotionalOffers = options.promotionalOffers
            services.retention = options.retention.map(RetentionSettings.init(rules:))
            services.webhooks = options.webhooks
            // The test client keeps one connection to the server for the whole test; a test that spends longer than
            // the 20 s idle timeout talking to the simulator alone (220 purchases under the suite's load, CI on eab494c)
            // found it closed ("I/O on closed channel"). Idle closing is ConnectionLimitsTests' to judge, over processes.
            services.connectionLimits.idleTimeoutSeconds = 600
            let secret = configuration.auth.hs256Secret!
            try await buildApplication(services, port: 0).test(.live) { [services, roots, configuration] server in
                await delivery?.setURLs([URL(string: "http://127.0.0.1:\(server.port!)/v1/notifications/appstore")!])
                try await body(System(server: server, simulator: simulator, engine: engine, services: services, secret: secret,
                                      configuration: configuration, roots: roots))
            }
        }
    }

    /// Runs `body` with a second purchase server over the same ledger and simulator, configured for another bundle id
    /// (a bad deploy): it refuses every transaction of the real app with `wrong_bundle`. `body` gets its base URL.
    func withServer(bundleId: String, _ body: @Sendable (URL) async throws -> Void) async throws {
        var misconfigured = configuration
        misconfigured.bundleId = bundleId
        let other = PurchaseServices(
            ledger: services.ledger, verifier: ProofVerifier(roots: roots, configuration: misconfigured, apple: try AppleAccess(misconfigured)),
            authenticator: services.authenticator, adminKey: System.adminKey, now: services.now)
        try await buildApplication(other, port: 0).test(.live) { server in
            try await body(URL(string: "http://127.0.0.1:\(server.port!)")!)
        }
    }

    /// Calls an admin endpoint; returns the status and the body, for ``decode(_:_:)``.
    @discardableResult
    func admin(_ method: HTTPRequest.Method, _ path: String, _ body: (any Encodable)? = nil) async throws -> (HTTPResponse.Status, Data) {
        let response = try await server.execute(uri: path, method: method, headers: [.authorization: "Bearer \(Self.adminKey)"],
                                                body: try body.map { ByteBuffer(bytes: try encodeRequest($0)) })
        return (response.status, Data(response.body.readableBytesView))
    }

    func token(_ account: String) async throws -> String {
        try await AccountAuthenticator.issueToken(account: account, secret: secret)
    }

    /// Calls the purchase server as `account`; returns the status and the body, for ``decode(_:_:)``.
    @discardableResult
    func call(_ method: HTTPRequest.Method, _ path: String, as account: String?, _ body: (any Encodable)? = nil) async throws -> (HTTPResponse.Status, Data) {
        var headers = HTTPFields()
        if let account { headers[.authorization] = "Bearer \(try await token(account))" }
        let response = try await server.execute(uri: path, method: method, headers: headers,
                                                body: try body.map { ByteBuffer(bytes: try encodeRequest($0)) })
        return (response.status, Data(response.body.readableBytesView))
    }

    /// Calls the simulator's device side; returns the body, for ``decode(_:_:)`` (``SimulatedPurchaseAnswer``…). The requests are the
    /// simulator's own (a test's stand-in for a phone), not the contract's: written as JSON objects.
    @discardableResult
    func device(_ method: HTTPRequest.Method, _ path: String, _ body: [String: Any]? = nil) async throws -> Data {
        let response = try await simulator.execute(uri: path, method: method,
                                                   body: try body.map { ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: $0)) })
        return Data(response.body.readableBytesView)
    }

    /// Sets the simulator's faults (`/sim/faults`).
    func inject(_ plan: FaultPlan) async throws {
        let response = try await simulator.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(bytes: try JSONEncoder().encode(plan)))
        #expect((200..<300).contains(response.status.code), "\(response.status)")
    }

    /// The simulator's purchase: what a phone's StoreKit hands the app.
    func storePurchase(_ body: [String: Any]) async throws -> SimulatedPurchaseAnswer {
        try decode(SimulatedPurchaseAnswer.self, await device(.post, "/sim/purchases", body))
    }

    /// The app's whole purchase: order on the server, payment in the store with the order's token, submission. `reply`
    /// is nil when not submitted; a submission the server does not answer with a purchase (200) fails the test.
    func buy(_ productId: String, account: String, storeAccount: String, submit: Bool = true) async throws -> (order: OrderReply, purchase: SimulatedPurchaseAnswer, reply: PurchaseReply?) {
        let (status, answer) = try await call(.post, "/v1/orders", as: account, OrderRequest(productId: productId))
        #expect(status == .created)
        let order = try decode(OrderReply.self, answer)
        let purchase = try await storePurchase(["account": storeAccount, "device": "phone", "productId": productId,
                                                "appAccountToken": order.appAccountToken.lowercasedString])
        guard submit, let jws = purchase.signedTransaction else { return (order, purchase, nil) }
        let (_, reply) = try await call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: jws, orderId: order.orderId))
        return (order, purchase, try decode(PurchaseReply.self, reply))
    }

    /// A new app account named from `prefix` and its own Apple ID in the simulator (`store-<account>`).
    func customer(_ prefix: String) async throws -> (account: String, store: String) {
        let account = "\(prefix)-\(UUID().uuidString.prefix(8))"
        _ = try await device(.post, "/sim/accounts", ["id": "store-\(account)"])
        return (account, "store-\(account)")
    }

    /// Advances the simulator's clock (and so the server's), delivering the notifications that fell due.
    func advance(by seconds: Double) async throws {
        _ = try await device(.post, "/sim/clock/advance", ["seconds": seconds])
        _ = try await device(.post, "/sim/notifications/deliver")
    }

    /// The account's entitlements as the server answers them.
    func entitlements(_ account: String) async throws -> EntitlementsReply {
        try decode(EntitlementsReply.self, await call(.get, "/v1/entitlements", as: account).1)
    }
}

/// What the simulator's `/sim/transactions/{id}/refund-request` answers (Apple's side of a refund request).
struct SimRefundRequest: Decodable {
    var reason: ConsumptionRequestReason
    /// What the developer sent with Send Consumption Information, if anything.
    var consumption: ConsumptionRequest?
    var decision: String?

    /// As the simulator writes it (Apple's wire format).
    static func read(_ data: Data) throws -> Self { try AppStoreJSON.decoder().decode(Self.self, from: data) }
}

/// Apple's decision on a refund request (`…/refund-request/decide`).
struct SimRefundDecision: Decodable {
    /// `REFUND` or `REFUND_DECLINED`.
    var decision: String
    var revocationPercentage: Int?
}

/// An answer's body as text, for a failure's message.
func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

/// What the simulator's `/sim/external-purchase-tokens` answers.
struct SimExternalPurchaseToken: Decodable {
    var externalPurchaseId: String?
}

/// Reading what an account owns.
extension Entitlements {
    var entitlementNames: [String] { entitlements.map(\.name) }
    func balance(_ currency: String) -> Int64? { balances[currency] }
}

extension EntitlementsReply {
    var entitlementNames: [String] { entitlements.entitlementNames }
    func balance(_ currency: String) -> Int64? { entitlements.balance(currency) }
}

/// The stable code of a refusal's body (`{"error": {"code", …}}`).
func errorCode(_ data: Data) throws -> ErrorCode {
    try decode(ErrorBody.self, data).error.code
}
