import AppStoreFormats
import ArgumentParser
import Crypto
import Foundation
import Hummingbird
import StoreSimulator

/// `iap simulator`: the simulated App Store on loopback.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "Run the simulated App Store: device side (/sim), /verifyReceipt, /sandbox/verifyReceipt and the Server API (/inApps).",
        discussion: """
        State, the certificate authority and the Server API key live in the data directory, so a restart loses nothing. \
        Trust <data>/jws-root.pem (JWS) and <data>/receipt-root.pem (receipts), or fetch GET /sim/root.cer. \
        Server API clients sign their tokens with <data>/api-key.p8 and the key id in <data>/api-key-id.
        """)

    @Option(help: "Port to listen on (loopback).")
    var port: Int = 8090

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Data directory: state, certificate authority, API key.")
    var data: String = ".iap-simulator"

    @Option(help: "An Xcode .storekit file. Without it, a built-in demo catalog with one product of each type.")
    var catalog: String?

    @Option(help: "The simulator's catalog settings JSON (bundle id, app Apple id, storefront prices).")
    var settings: String?

    @Option(name: .customLong("shared-secret"), help: "The app's shared secret for /verifyReceipt (21004 when a subscription receipt comes without it).")
    var sharedSecret: String?

    @Option(help: "Environment the simulator mints for: Sandbox or Production.")
    var environment: String = "Sandbox"

    @Option(name: .customLong("webhook"), help: "A URL to post App Store Server Notifications V2 to. Repeatable.")
    var webhooks: [String] = []

    @Flag(name: .customLong("no-retries"), help: "Send each notification once, as Apple's sandbox does, instead of retrying on Apple's production schedule.")
    var noRetries = false

    func run() async throws {
        let services = try makeServices()
        try await SimulatorServer.application(services, host: host, port: port, tick: .seconds(1)).runService()
    }

    /// The simulator's parts as these options describe them, announced on stderr.
    func makeServices() throws -> SimulatorServer.Services {
        let directory = URL(fileURLWithPath: data)
        let authority = try CertificateAuthority.loadOrCreate(in: directory)
        let storeKit = try catalog.map { path -> StoreKitConfiguration in
            try StoreKitConfiguration(data: try InputFile.read(path, limit: StoreKitConfiguration.maxBytes))
        }
        var catalogSettings = try settings.map { try CatalogSettings(data: try InputFile.read($0, limit: CatalogSettings.maxBytes)) } ?? .demo
        if storeKit != nil, settings == nil { catalogSettings.products = nil }
        let catalog = try SimulatorCatalog(storeKit: storeKit, settings: catalogSettings)
        for warning in catalog.warnings { Output.note("warning: \(warning)") }
        guard environment == "Sandbox" || environment == "Production" else { throw ValidationError("--environment is Sandbox or Production") }
        let engine = try StoreEngine(catalog: catalog, minter: Minter(authority: authority), environment: AppStoreEnvironment(rawValue: environment),
                                     dataDirectory: directory)
        let (keyId, key) = try Self.apiKey(in: directory)
        let urls = try webhooks.map { text -> URL in
            guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https" else { throw ValidationError("--webhook \(text) is not an http(s) URL") }
            return url
        }
        let services = SimulatorServer.Services(
            engine: engine, authenticator: APIAuthenticator(keyId: keyId, publicKey: key.publicKey, bundleId: catalog.bundleId), sharedSecret: sharedSecret,
            delivery: urls.isEmpty ? nil : NotificationDelivery(engine: engine, urls: urls, retries: !noRetries))
        Output.note("IAPKit StoreSimulator: http://\(host):\(port) — bundle \(catalog.bundleId), \(catalog.products.count) products, \(environment)")
        Output.note("trust \(directory.appendingPathComponent("jws-root.pem").path); Server API key id \(keyId) (\(directory.appendingPathComponent("api-key.p8").path))")
        return services
    }

    /// The Server API key: made on first start and kept beside the state, like a key downloaded from App Store Connect.
    static func apiKey(in directory: URL) throws -> (String, P256.Signing.PrivateKey) {
        let keyFile = directory.appendingPathComponent("api-key.p8"), idFile = directory.appendingPathComponent("api-key-id")
        if let pem = FileManager.default.contents(atPath: keyFile.path), let id = FileManager.default.contents(atPath: idFile.path) {
            return (String(decoding: id, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
                    try P256.Signing.PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self)))
        }
        let key = P256.Signing.PrivateKey()
        let id = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10))
        try Data(key.pemRepresentation.utf8).write(to: keyFile, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        try Data(id.utf8).write(to: idFile, options: .atomic)
        return (id, key)
    }
}
