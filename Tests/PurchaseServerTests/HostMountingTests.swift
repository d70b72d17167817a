import AppStoreTrust
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
@testable import PurchaseLedger
import PurchaseServer
import ServiceLifecycle
import StoreSimulator
import Testing

/// IAPKit's routes as a library: mounted in a host app's own Hummingbird router with the host's own request context,
/// and answering a storage failure the same way on every group.
@Suite("Host apps: IAPKit's routes in another app's router; a failing store is 503 storage on every group")
struct HostMountingTests {
    static let premium = "com.example.iapkit.premium"
    static let adminKey = "host-admin-key-for-tests"
    static let secret = String(repeating: "host-secret-", count: 4)

    /// A host app's context: what IAPKit needs, and something of the host's own.
    struct HostContext: PurchaseRequestContext {
        var coreContext: CoreRequestContextStorage
        var purchaseAccountId: String?
        let peerAddress: String?
        var greeting: String?

        init(source: ApplicationRequestContextSource) {
            coreContext = .init(source: source)
            peerAddress = source.channel.remoteAddress?.ipAddress
        }
    }

    /// The host's own middleware, in front of its routes and IAPKit's alike.
    struct GreetingMiddleware: RouterMiddleware {
        func handle(_ request: Request, context: HostContext, next: (Request, HostContext) async throws -> Response) async throws -> Response {
            var context = context
            context.greeting = "hello from the host"
            return try await next(request, context)
        }
    }

    /// A store that fails every operation once told to, as a database that went away does.
    final class FailingStore: SQLLedgerStore, @unchecked Sendable {
        let inner: any SQLLedgerStore
        private let lock = NSLock()
        private var broken = false

        init(_ inner: any SQLLedgerStore) { self.inner = inner }

        func fail() { lock.withLock { broken = true } }

        var kind: LedgerStoreKind { inner.kind }

        var operations: LedgerStoreOperations { LedgerStoreOperations(self) }

        func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
            try check()
            return try await inner.write(body)
        }

        func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
            try check()
            return try await inner.read(body)
        }

        func close() async throws { try await inner.close() }

        private func check() throws {
            if lock.withLock({ broken }) { throw LedgerError(.storage, "connection refused (the test's failing store)") }
        }
    }

    struct OrderAnswer: Decodable { var orderId: String; var appAccountToken: String }
    struct PurchaseAnswer: Decodable { var outcome: String?; var transactionId: String?; var orderId: String? }
    struct EntitlementsAnswer: Decodable {
        struct Item: Decodable { var productId: String; var transactionId: String }
        var entitlements: [Item]
    }
    struct OrdersAnswer: Decodable { struct Item: Decodable { var orderId: String; var state: String }; var orders: [Item] }
    struct NotificationAnswer: Decodable { var result: String }
    struct ErrorAnswer: Decodable { struct Detail: Decodable { var code: String; var `class`: String? }; var error: Detail }

    /// Services over `store`, trusting the simulator's JWS root and judging time by the simulator's clock.
    static func services(_ store: any LedgerStore, engine: StoreEngine) async throws -> PurchaseServices {
        var configuration = ServerConfiguration()
        configuration.auth.hs256Secret = secret
        configuration.adminKey = adminKey
        let ledger = Ledger(store: store, catalog: configuration.catalog)
        try await ledger.migrate()
        var roots = TrustRoots()
        try roots.add(certificateData: simulatorAuthority.jws.rootDER, source: "simulator JWS root")
        let clock = await engine.clock
        return PurchaseServices(ledger: ledger, verifier: ProofVerifier(roots: roots, configuration: configuration),
                                authenticator: try await AccountAuthenticator(configuration.auth), adminKey: adminKey, now: { clock.now })
    }

    static func engine() throws -> StoreEngine {
        try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: simulatorAuthority))
    }

    static func json(_ object: [String: String]) throws -> ByteBuffer { ByteBuffer(bytes: try JSONEncoder().encode(object)) }

    static func decode<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) throws -> T {
        try JSONDecoder().decode(type, from: Data(body.readableBytesView))
    }

    static func bearer(_ account: String) async throws -> HTTPFields {
        [.authorization: "Bearer \(try await AccountAuthenticator.issueToken(account: account, secret: secret))"]
    }

    @Test("A host app with its own context and route serves a purchase end to end through IAPKit's routes in its router: order, payment, grant, entitlements, the admin API and Apple's notification")
    func hostServesAPurchase() async throws {
        let engine = try Self.engine()
        let services = try await Self.services(try await Ledger.openStore(url: try LedgerKind.sqlite.databaseURL()), engine: engine)
        let router = Router(context: HostContext.self)
        router.add(middleware: GreetingMiddleware())
        router.get("host/hello") { _, context in context.greeting ?? "nobody greeted" }
        // The host's own /health: IAPKit's default parts leave theirs out, so mounting does not collide with it.
        router.get("health") { _, _ in "the host's health" }
        router.addRoutes(services.routes(context: HostContext.self))
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), services: services.backgroundServices())
        try await app.test(.live) { client in
            let hello = try await client.execute(uri: "/host/hello", method: .get)
            #expect(hello.status == .ok && String(buffer: hello.body) == "hello from the host")
            #expect(String(buffer: try await client.execute(uri: "/health", method: .get).body) == "the host's health")

            #expect(try await client.execute(uri: "/v1/entitlements", method: .get).status == .unauthorized, "the app API still asks for a bearer token")
            let auth = try await Self.bearer("ada")
            let ordered = try await client.execute(uri: "/v1/orders", method: .post, headers: auth, body: try Self.json(["productId": Self.premium]))
            #expect(ordered.status == .created)
            let order = try Self.decode(OrderAnswer.self, ordered.body)

            try await engine.createAccount("store-ada")
            let paid = try await engine.purchase(account: "store-ada", device: "phone", productId: Self.premium, appAccountToken: UUID(uuidString: order.appAccountToken))
            guard case .purchased(let signed, let transactionId, _) = paid else {
                Issue.record("the store did not sell: \(paid)")
                return
            }
            let submitted = try await client.execute(uri: "/v1/purchases", method: .post, headers: auth,
                                                     body: try Self.json(["signedTransaction": signed, "orderId": order.orderId]))
            #expect(submitted.status == .ok)
            let purchase = try Self.decode(PurchaseAnswer.self, submitted.body)
            #expect(purchase.outcome == "granted" && purchase.transactionId == transactionId && purchase.orderId == order.orderId)

            let owned = try Self.decode(EntitlementsAnswer.self, try await client.execute(uri: "/v1/entitlements", method: .get, headers: auth).body)
            #expect(owned.entitlements.contains { $0.productId == Self.premium && $0.transactionId == transactionId })

            let admin = try await client.execute(uri: "/admin/orders?state=granted", method: .get, headers: [.authorization: "Bearer \(Self.adminKey)"])
            #expect(try Self.decode(OrdersAnswer.self, admin.body).orders.contains { $0.orderId == order.orderId && $0.state == "granted" })
            #expect(try await client.execute(uri: "/admin/orders", method: .get, headers: [.authorization: "Bearer wrong"]).status == .unauthorized)

            let notification = try #require(await engine.notifications().first { $0.transactionId == transactionId })
            let told = try await client.execute(uri: "/v1/notifications/appstore", method: .post,
                                                body: try Self.json(["signedPayload": notification.signedPayload]))
            #expect(told.status == .ok)
            #expect(try Self.decode(NotificationAnswer.self, told.body).result.isEmpty == false)
        }
    }

    @Test("A storage failure is 503 storage on every group: the app API, the admin API, the dashboard signed in, Apple's notification endpoint, /health")
    func failingStoreOnEveryGroup() async throws {
        let engine = try Self.engine()
        let store = FailingStore(try #require(try await Ledger.openStore(url: try LedgerKind.sqlite.databaseURL()) as? any SQLLedgerStore))
        let services = try await Self.services(store, engine: engine)
        try await engine.createAccount("store-bob")
        _ = try await engine.purchase(account: "store-bob", device: "phone", productId: Self.premium)
        let notification = try #require(await engine.notifications().first?.signedPayload)
        try await buildApplication(services, port: 0).test(.router) { client in
            let browser = DashboardTests.Browser(client)
            #expect(try await browser.signIn(key: Self.adminKey).0 == .seeOther)
            #expect(try await browser.go(.get, "/dashboard").status == .ok, "signed in while the store answers")
            #expect(try await client.execute(uri: "/health", method: .get).status == .ok)

            store.fail()
            let auth = try await Self.bearer("bob")
            let admin: HTTPFields = [.authorization: "Bearer \(Self.adminKey)"]
            let answers: [(String, HTTPResponse.Status, String)] = [
                ("app: entitlements", try await client.execute(uri: "/v1/entitlements", method: .get, headers: auth)),
                ("app: order", try await client.execute(uri: "/v1/orders", method: .post, headers: auth, body: try Self.json(["productId": Self.premium]))),
                ("app: consent", try await client.execute(uri: "/v1/consumption-consent", method: .get, headers: auth)),
                ("admin: orders", try await client.execute(uri: "/admin/orders", method: .get, headers: admin)),
                ("admin: audit", try await client.execute(uri: "/admin/audit", method: .get, headers: admin)),
                ("apple: notification", try await client.execute(uri: "/v1/notifications/appstore", method: .post,
                                                                 body: try Self.json(["signedPayload": notification]))),
                ("health", try await client.execute(uri: "/health", method: .get)),
            ].map { ($0.0, $0.1.status, String(buffer: $0.1.body)) }
            var pages = [
                ("dashboard: overview", try await browser.go(.get, "/dashboard")),
                ("dashboard: orders", try await browser.go(.get, "/dashboard/orders")),
            ].map { ($0.0, $0.1.status, $0.1.html) }
            // The right key's sign-in is audited before the session is given: without the audit, no session.
            let (status, html) = try await DashboardTests.Browser(client).signIn(key: Self.adminKey)
            pages.append(("dashboard: sign-in", status, html))
            for (what, status, body) in answers + pages {
                #expect(status == .serviceUnavailable, "\(what)")
                let error = try? JSONDecoder().decode(ErrorAnswer.self, from: Data(body.utf8))
                #expect(error?.error.code == "storage" && error?.error.class == "retry", "\(what): \(body)")
                #expect(!body.contains("connection refused"), "\(what): the database's words stay in the log")
            }
        }
    }

    @Test("With closesStoreOnShutdown the background services close the ledger's store once their group shuts down; without it the store stays open")
    func storeClosedWithTheGroup() async throws {
        let engine = try Self.engine()
        for closes in [false, true] {
            let store = try await Ledger.openStore(url: try LedgerKind.sqlite.databaseURL())
            var services = try await Self.services(store, engine: engine)
            services.closesStoreOnShutdown = closes
            let group = ServiceGroup(services: services.backgroundServices(reconcileEvery: nil), logger: Logger(label: "iapkit.tests"))
            let running = Task { try await group.run() }
            _ = try await services.ledger.createOrder(accountId: "group-alice", productId: Self.premium)
            await group.triggerGracefulShutdown()
            try await running.value
            if closes {
                let refused = await #expect(throws: LedgerError.self) {
                    _ = try await services.ledger.createOrder(accountId: "group-alice", productId: Self.premium)
                }
                #expect(refused?.code == .storage)
            } else {
                _ = try await services.ledger.createOrder(accountId: "group-alice", productId: Self.premium)
                try await store.close()
            }
        }
    }
}
