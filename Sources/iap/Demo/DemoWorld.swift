import AppStoreTrust
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import Logging
import IAPKit
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import ServiceLifecycle
import StoreSimulator

/// The simulator and the server running in this process on loopback, and how to reach them as an app does.
struct DemoWorld: Sendable {
    let directory: URL
    let engine: StoreEngine
    let simulatorURL: URL
    let serverURL: URL
    let secret: String
    let group: ServiceGroup

    static func start(in directory: URL) async throws -> DemoWorld {
        let authority = try CertificateAuthority.loadOrCreate(in: directory.appendingPathComponent("simulator"))
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: authority),
                                     dataDirectory: directory.appendingPathComponent("simulator"))
        let delivery = NotificationDelivery(engine: engine, urls: [])
        let simulator = SimulatorServer.Services(
            engine: engine,
            authenticator: APIAuthenticator(keyId: "DEMOKEY001", publicKey: P256.Signing.PrivateKey().publicKey, bundleId: "com.example.iapkit"),
            delivery: delivery)

        var configuration = ServerConfiguration()
        configuration.dataDirectory = directory.appendingPathComponent("server").path
        configuration.auth.hs256Secret = (0..<4).map { _ in UUID().uuidString }.joined()
        var roots = TrustRoots()
        try roots.add(certificateData: authority.jws.rootDER, source: "simulator JWS root")
        try roots.add(certificateData: authority.receipts.rootDER, source: "simulator receipt root")
        let store = try await Ledger.openStore(url: configuration.databaseURL)
        let ledger = Ledger(store: store, catalog: configuration.catalog)
        try await ledger.migrate()
        let clock = await engine.clock
        let services = PurchaseServices(ledger: ledger, verifier: ProofVerifier(roots: roots, configuration: configuration),
                                               authenticator: try await AccountAuthenticator(configuration.auth), now: { clock.now })
        var logger = Logger(label: "iapkit.demo")
        logger.logLevel = .critical
        // Both listen on ports the system picks; each reports its port once it runs.
        let (ports, reported) = AsyncStream.makeStream(of: (String, Int).self)
        let group = ServiceGroup(services: [SimulatorServer.application(simulator, port: 0, logger: logger) { reported.yield(("simulator", $0)) },
                                            buildApplication(services, port: 0, logger: logger) { reported.yield(("server", $0)) }],
                                 gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        Task { try? await group.run() }
        var found: [String: Int] = [:]
        for await (name, port) in ports {
            found[name] = port
            if found.count == 2 { break }
        }
        let simulatorPort = found["simulator"]!, serverPort = found["server"]!
        await delivery.setURLs([URL(string: "http://127.0.0.1:\(serverPort)/v1/notifications/appstore")!])
        let world = DemoWorld(directory: directory, engine: engine, simulatorURL: URL(string: "http://127.0.0.1:\(simulatorPort)")!,
                              serverURL: URL(string: "http://127.0.0.1:\(serverPort)")!, secret: configuration.auth.hs256Secret!, group: group)
        try await world.waitUntilUp()
        return world
    }

    func stop() async {
        await group.triggerGracefulShutdown()
    }

    func waitUntilUp() async throws {
        for _ in 0..<200 {
            let simulatorUp = (try? await URLSession.shared.data(from: simulatorURL.appendingPathComponent("sim/root.cer"))) != nil
            let serverUp = (try? await URLSession.shared.data(from: serverURL.appendingPathComponent("health"))) != nil
            if simulatorUp && serverUp { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the demo's servers did not start"])
    }

    /// An app signed in as `account` on `device`, its journal in `journal` (a launch; a crash is dropping it).
    func app(account: String, storeAccount: String, device: String, journal: String) throws -> (PurchaseClient, SimulatorStore) {
        let store = SimulatorStore(baseURL: simulatorURL, account: storeAccount, device: device, pollInterval: .milliseconds(100))
        let secret = secret
        let server = PurchaseServerClient(baseURL: serverURL) { try await AccountAuthenticator.issueToken(account: account, secret: secret) }
        let client = PurchaseClient(store: store, server: server, journal: try FileJournal(directory: directory.appendingPathComponent(journal)),
                                    accountId: account, retryDelays: [.milliseconds(200)])
        return (client, store)
    }

    /// A call to the simulator's device side (a tester's switch, the clock).
    @discardableResult
    func simulator(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> [String: Any] {
        var request = URLRequest(url: simulatorURL.appendingPathComponent(path))
        request.httpMethod = method
        if let body { request.httpBody = try JSONSerialization.data(withJSONObject: body) }
        let (data, _) = try await URLSession.shared.data(for: request)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }
}
