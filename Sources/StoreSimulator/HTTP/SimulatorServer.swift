import AppStoreFormats
import Foundation
import Hummingbird

/// The simulated App Store as an HTTP service: the device side under `/sim`, `/verifyReceipt` (production) and
/// `/sandbox/verifyReceipt`, and the App Store Server API under `/inApps`.
public enum SimulatorServer {
    /// Everything the routes answer from.
    public struct Services: Sendable {
        public let engine: StoreEngine
        public let authenticator: APIAuthenticator
        /// The app's shared secret for `/verifyReceipt`; nil accepts any password.
        public let sharedSecret: String?

        public init(engine: StoreEngine, authenticator: APIAuthenticator, sharedSecret: String? = nil) {
            self.engine = engine
            self.authenticator = authenticator
            self.sharedSecret = sharedSecret
        }
    }

    /// The simulator's routes, to run alone or mount elsewhere.
    public static func router(_ services: Services) -> Router<BasicRequestContext> {
        let router = Router()
        DeviceRoutes(engine: services.engine).add(to: router)
        VerifyReceiptRoutes(engine: services.engine, sharedSecret: services.sharedSecret).add(to: router)
        ServerAPIRoutes(engine: services.engine, authenticator: services.authenticator).add(to: router)
        return router
    }

    /// An application serving the simulator on `host:port`.
    public static func application(_ services: Services, host: String = "127.0.0.1", port: Int = 8090) -> some ApplicationProtocol {
        Application(router: router(services), configuration: .init(address: .hostname(host, port: port), serverName: "IAPKit StoreSimulator"))
    }
}
