import Foundation
import Hummingbird
import Logging
import PurchaseAPI
import ServiceLifecycle

/// Which of IAPKit's routes a collection holds (``PurchaseServices/routes(_:context:)``).
public struct PurchaseRoutes: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// What apps call with their bearer token under `/v1` (orders, purchases, entitlements, spending, restore, consent,
    /// offer signatures), and the entitlement signing key.
    public static let app = PurchaseRoutes(rawValue: 1 << 0)
    /// What the App Store calls: Server Notifications (`/v1/notifications/appstore`) and Get Retention Message
    /// (`/v1/retention/appstore`).
    public static let appStore = PurchaseRoutes(rawValue: 1 << 1)
    /// `/admin/...`, behind the admin key.
    public static let admin = PurchaseRoutes(rawValue: 1 << 2)
    /// `/dashboard`, the operator's pages (they link and redirect to `/dashboard/...`: mount them at the root).
    public static let dashboard = PurchaseRoutes(rawValue: 1 << 3)
    /// `/health`, `/metrics` and `/openapi.json`.
    public static let operations = PurchaseRoutes(rawValue: 1 << 4)
    /// The APIs: ``app``, ``appStore`` and ``admin`` — what a host app mounts by default, beside its own `/health`.
    public static let api: PurchaseRoutes = [.app, .appStore, .admin]
    public static let all: PurchaseRoutes = [.app, .appStore, .admin, .dashboard, .operations]
}

extension PurchaseServices {
    /// IAPKit's routes for any router whose context is a ``PurchaseRequestContext``: a host app adds them to its own
    /// with `router.addRoutes(services.routes(context: AppContext.self))`, and runs ``backgroundServices(reconcileEvery:logger:)``
    /// in its service group. Every route answers the errors of the ledger, the verifier and Apple as ``APIError``s
    /// (`APIErrorMiddleware`), and refuses a body declared larger than it reads before anything else.
    /// Mounting a path twice stops the router at start (Hummingbird refuses a second handler): a host with its own
    /// `/health` or `/metrics` leaves out ``PurchaseRoutes/operations`` (the default, ``PurchaseRoutes/api``, does).
    public func routes<Context: PurchaseRequestContext>(_ parts: PurchaseRoutes = .api, context: Context.Type = Context.self) -> RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.add(middleware: DeclaredBodyLimitMiddleware(limit: max(maxBodyBytes, NotificationRoutes<Context>.maxBody)))
        routes.add(middleware: APIErrorMiddleware())
        if parts.contains(.operations) { addOperationRoutes(to: routes) }
        if parts.contains(.app) {
            let app = routes.group().add(middleware: AccountAuthenticationMiddleware(authenticator: authenticator))
            AppRoutes(services: self).add(to: app)
            ConsentRoutes(services: self).add(to: app)
            OfferRoutes(services: self).add(to: app)
            EntitlementKeyRoutes(services: self).add(to: routes)
        }
        if parts.contains(.appStore) {
            NotificationRoutes(services: self).add(to: routes)
            RetentionRoutes(services: self).add(to: routes)
        }
        if parts.contains(.admin) {
            AdminRoutes(services: self).add(to: routes.group("admin").add(middleware: AdminKeyMiddleware(adminKey: adminKey)))
        }
        if parts.contains(.dashboard) { DashboardRoutes(services: self).add(to: routes.group("dashboard")) }
        return routes
    }

    private func addOperationRoutes<Context: PurchaseRequestContext>(to routes: RouteCollection<Context>) {
        let services = self
        routes.get("metrics") { request, _ in
            try services.authorizeMetrics(request)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: .init(byteBuffer: ByteBuffer(string: services.metrics.exposition())))
        }
        routes.get("openapi.json") { _, _ in try OpenAPIResource.response() }
        // The answer never changes, so it is written once: encoding it was ~7 % of a check's CPU under load.
        let healthy = ByteBuffer(bytes: (try? APIJSON.encode(HealthReply(status: "ok", store: ledger.store.kind.rawValue))) ?? [])
        routes.get("health") { _, _ in
            try await services.ledger.checkHealth()
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: healthy))
        }
    }
}

/// The purchase server's router, as `iap serve` serves it: every route of ``PurchaseServices/routes(_:context:)``.
/// With `logger`, every request is logged on one line under a request id (`RequestLogMiddleware`).
public func buildRouter(_ services: PurchaseServices, logger: Logger? = nil) -> Router<BasicPurchaseRequestContext> {
    let router = Router(context: BasicPurchaseRequestContext.self)
    if let logger { router.add(middleware: RequestLogMiddleware(logger: logger)) }
    // A body declared larger than any route reads is refused before anything else, a path no route serves included.
    router.add(middleware: DeclaredBodyLimitMiddleware(limit: max(services.maxBodyBytes, NotificationRoutes<BasicPurchaseRequestContext>.maxBody)))
    router.addRoutes(services.routes(.all, context: BasicPurchaseRequestContext.self))
    return router
}

/// The server on `host:port`, with its ``PurchaseServices/backgroundServices(reconcileEvery:logger:)`` (the reconciliation
/// job every `reconcileEvery` when given); `onRunning` receives the port listened on (useful with port 0).
public func buildApplication(_ services: PurchaseServices, host: String = "127.0.0.1", port: Int = 8080, reconcileEvery: Duration? = nil,
                             logger: Logger? = nil, logRequests: Bool = false, onRunning: (@Sendable (Int) async -> Void)? = nil) -> some ApplicationProtocol {
    var log = logger ?? Logger(label: "iapkit.server")
    if logger == nil { log.logLevel = .info }
    if let warning = services.connectionLimits.descriptorWarning() { log.warning("\(warning)") }
    return Application(responder: buildRouter(services, logger: logRequests ? log : nil).buildResponder(),
                       server: .guardedHTTP1(services.connectionLimits, trustedProxies: (try? TrustedProxies.parse(services.trustedProxies).get()) ?? .none,
                                             metrics: services.metrics),
                       configuration: .init(address: .hostname(host, port: port), serverName: "iapkit"),
                       services: services.backgroundServices(reconcileEvery: reconcileEvery, logger: log),
                       onServerRunning: { channel in await onRunning?(channel.localAddress?.port ?? port) }, logger: log)
}
