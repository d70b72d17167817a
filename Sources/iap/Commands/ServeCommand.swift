import AppStoreTrust
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PurchaseAPI
import PurchaseLedger
import PurchaseServer

/// `iap serve`: the purchase server.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the purchase server: orders, verified purchases granted once, entitlements, App Store notifications.",
        discussion: """
        With no configuration it starts on 127.0.0.1:8080 with the demo catalog and a SQLite ledger in .iap-server, and \
        makes an HS256 secret for app tokens in the data directory. It trusts Apple's two roots, which IAPKit ships, unless \
        roots are named (trustedRoots, IAPKIT_TRUSTED_ROOTS or --root: they replace Apple's) or --no-apple-roots \
        (trustAppleRoots: false) turns them off. Environment overrides: IAPKIT_DATABASE, IAPKIT_PORT, IAPKIT_HOST, \
        IAPKIT_DATA, IAPKIT_BUNDLE_ID, IAPKIT_APP_APPLE_ID, IAPKIT_ENVIRONMENTS, IAPKIT_TRUSTED_ROOTS, IAPKIT_TRUST_APPLE_ROOTS, \
        IAPKIT_AUTH_HS256_SECRET, IAPKIT_ADMIN_KEY.
        """)

    @Option(help: "A JSON configuration file (docs/CONFIGURATION.md).")
    var config: String?

    @Option(help: "Port to listen on (overrides the configuration).")
    var port: Int?

    @Option(help: "Data directory (overrides the configuration).")
    var data: String?

    @Option(help: "Database URL: sqlite:///path or postgres://user@host:port/db (overrides the configuration).")
    var database: String?

    @Option(name: .customLong("root"), help: "A trusted root certificate (DER or PEM). Repeatable. Named roots replace Apple's bundled ones.")
    var roots: [String] = []

    @Flag(name: .customLong("no-apple-roots"), help: "Do not trust Apple's bundled roots when no root is named (trustAppleRoots: false).")
    var noAppleRoots = false

    @Option(name: .customLong("log-format"), help: "text (default) or json: one JSON object a line (or IAPKIT_LOG_FORMAT).")
    var logFormat: String?

    @Flag(name: .customLong("print-config"), help: "Print the configuration in effect (file, environment, flags; secrets masked) and exit.")
    var printConfig = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info (default: a line a request), notice, warning, error (or IAPKIT_LOG_LEVEL).")
    var logLevel: String?

    func run() async throws {
        switch logFormat ?? ProcessInfo.processInfo.environment["IAPKIT_LOG_FORMAT"] ?? "text" {
        case "text":
            LoggingSystem.bootstrap(TextLogHandler.init(label:))
        case "json":
            LoggingSystem.bootstrap(JSONLogHandler.init(label:))
            Output.logger = Logger(label: "iapkit.serve")
        case let other: throw ValidationError("--log-format is text or json, not \(other)")
        }
        var configuration = try ServerConfiguration.load(file: config)
        if let port { configuration.port = port }
        if let data { configuration.dataDirectory = data }
        if let database { configuration.database = database }
        configuration.trustedRoots += roots
        if noAppleRoots { configuration.trustAppleRoots = false }
        try configuration.validate()
        if printConfig {
            print(try configuration.printable())
            return
        }
        let levelName = logLevel ?? ProcessInfo.processInfo.environment["IAPKIT_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: levelName) else { throw ValidationError("--log-level is one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))") }
        var logger = Logger(label: "iapkit.server")
        logger.logLevel = level
        try await Self.serve(configuration, logger: logger)
    }

    /// Starts the server; with no auth configured, an HS256 secret is made in the data directory.
    static func prepare(_ configuration: ServerConfiguration) async throws -> (PurchaseServices, ServerConfiguration) {
        var configuration = configuration
        AllocatorTuning.keepFreedMemoryForReuse()
        if configuration.auth.hs256Secret == nil && configuration.auth.publicKeyPEMFile == nil {
            let directory = URL(fileURLWithPath: configuration.dataDirectory)
            configuration.auth.hs256Secret = try AccountAuthenticator.loadOrCreateSecret(in: directory)
            Output.note("app tokens: HS256 with the secret in \(directory.appendingPathComponent("auth-hs256-secret").path)")
        }
        let roots = try configuration.loadTrustRoots()
        var services = try await PurchaseServices.open(configuration, roots: roots)
        services.closesStoreOnShutdown = true
        if configuration.trustedRoots.isEmpty && configuration.trustAppleRoots {
            Output.note("trust roots: Apple's, bundled (Apple Root CA - G3 for JWS, Apple Root CA for receipts)")
        }
        for warning in roots.warnings { Output.note("warning: \(warning)") }
        for warning in configuration.warnings(trusting: roots) { Output.note("warning: \(warning)") }
        if roots.anchors.isEmpty { Output.note("warning: no trusted roots: every purchase will be refused until roots are named or trustAppleRoots is true") }
        return (services, configuration)
    }

    static func serve(_ configuration: ServerConfiguration, logger: Logger? = nil) async throws {
        let (services, configuration) = try await prepare(configuration)
        Output.note("IAPKit purchase server: http://\(configuration.host):\(configuration.port) — bundle \(configuration.bundleId), ledger \(services.ledger.store.kind)")
        try await buildApplication(services, host: configuration.host, port: configuration.port,
                                   reconcileEvery: .milliseconds(Int64(configuration.reconcileIntervalSeconds * 1000)), logger: logger,
                                   logRequests: true).runService()
    }
}
