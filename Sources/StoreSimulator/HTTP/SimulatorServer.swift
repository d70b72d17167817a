import AppStoreFormats
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// The simulated App Store as an HTTP service: the device side under `/sim`, `/verifyReceipt` (production) and
/// `/sandbox/verifyReceipt`, and the App Store Server API under `/inApps`.
public enum SimulatorServer {
    /// Everything the routes answer from.
    public struct Services: Sendable {
        public let engine: StoreEngine
        public let authenticator: APIAuthenticator
        /// The app's shared secret for `/verifyReceipt`; nil accepts any password.
        public let sharedSecret: String?
        /// Where notifications go; nil keeps them only in the history.
        public let delivery: NotificationDelivery?
        /// Faults injected into the Apple endpoints (never into `/sim`).
        public let faults = FaultInjector()
        /// How long the App Store waits for a Get Retention Message answer: Apple's 700 ms, unless a test gives more.
        public var retentionBudget: Duration = RetentionRequester.budget

        public init(engine: StoreEngine, authenticator: APIAuthenticator, sharedSecret: String? = nil, delivery: NotificationDelivery? = nil) {
            self.engine = engine
            self.authenticator = authenticator
            self.sharedSecret = sharedSecret
            self.delivery = delivery
        }

        /// Runs what fell due and delivers due notifications.
        func catchUp() async throws {
            try await engine.tick()
            try await delivery?.deliverDue()
        }
    }

    /// The simulator's routes, to run alone or mount elsewhere.
    public static func router(_ services: Services) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: FaultMiddleware(injector: services.faults))
        router.add(middleware: AppleErrorMiddleware())
        DeviceRoutes(services: services).add(to: router)
        CustomerRequestRoutes(services: services).add(to: router)
        VerifyReceiptRoutes(engine: services.engine, sharedSecret: services.sharedSecret).add(to: router)
        ServerAPIRoutes(services: services).add(to: router)
        RetentionMessagingRoutes(services: services).add(to: router)
        AdvancedCommerceRoutes(services: services).add(to: router)
        return router
    }

    /// An application serving the simulator on `host:port`; with `tick`, it also renews subscriptions and delivers
    /// notifications as real time passes.
    /// `onRunning` receives the port listened on (useful with port 0).
    public static func application(_ services: Services, host: String = "127.0.0.1", port: Int = 8090, tick: Duration? = nil,
                                   logger: Logger? = nil, onRunning: (@Sendable (Int) async -> Void)? = nil) -> some ApplicationProtocol {
        Application(router: router(services), configuration: .init(address: .hostname(host, port: port), serverName: "IAPKit StoreSimulator"),
                    services: tick.map { [Ticker(services: services, interval: $0)] } ?? [],
                    onServerRunning: { channel in await onRunning?(channel.localAddress?.port ?? port) }, logger: logger)
    }

    /// Catches the store up with real time at a fixed interval.
    struct Ticker: Service {
        let services: Services
        let interval: Duration
        /// Stops at graceful shutdown (SIGTERM), so the server can exit.
        func run() async throws {
            await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    do { try await Task.sleep(for: interval) } catch { return }
                    try? await services.catchUp()
                }
            }
        }
    }
}
