import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PurchaseServer
import ServiceLifecycle
import StoreSimulator

/// `iap dev`: the purchase server and the simulated App Store together, already trusting each other.
struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run the purchase server and the simulator together for local development.",
        discussion: """
        The server trusts the simulator's roots and accepts Sandbox, asks the simulator's Server API and verifyReceipt when \
        local proof is not enough, and the simulator posts its notifications to the server. \
        For each --account (default `dev-user`) it makes a store account of the same name in the simulator if there is none and prints a 24-hour sign-in token for the server, then how an app connects: the product ids, the entitlements key, and the SDK's SimulatorStore and PurchaseServerClient; and the dashboard's address with its admin key (made in the data directory unless IAPKIT_ADMIN_KEY or --config gives one). The server judges on the simulator's clock, so that POST /sim/clock/advance moves both. \
        `iap dev token ACCOUNT` prints a token for any other account, while it runs or not.
        """,
        subcommands: [Token.self])

    /// Where the dev world lives: `iap dev` and `iap dev token` read the same folder and configuration.
    struct World: ParsableArguments {
        static let defaultData = ".iap-dev"

        @Option(help: "Data directory for both (simulator/ and server/ inside).")
        var data: String = World.defaultData

        @Option(help: "A server configuration file; the dev settings (roots, ports, data) are applied over it.")
        var config: String?

        var serverDirectory: URL { URL(fileURLWithPath: data).appendingPathComponent("server") }

        /// The arguments that name this world to another `iap dev` command, empty for the default one.
        var arguments: String {
            (data == World.defaultData ? "" : " --data \(data)") + (config.map { " --config \($0)" } ?? "")
        }
    }

    @Option(name: .customLong("account"), help: "An app account to print a sign-in token for, with a store account of the same name (repeatable; default dev-user).")
    var accounts: [String] = []

    @OptionGroup var world: World

    @Option(name: .customLong("server-port"), help: "The purchase server's port.")
    var serverPort: Int = 8080

    @Option(name: .customLong("simulator-port"), help: "The simulator's port.")
    var simulatorPort: Int = 8090

    @Option(help: "An Xcode .storekit file for both: the simulator sells it, the server grants by it (consumables and non-renewing subscriptions need grants in --config).")
    var catalog: String?

    func run() async throws {
        let simulatorDirectory = URL(fileURLWithPath: world.data).appendingPathComponent("simulator")
        var arguments = ["--data", simulatorDirectory.path, "--port", String(simulatorPort),
                         "--webhook", "http://127.0.0.1:\(serverPort)/v1/notifications/appstore"]
        if let catalog { arguments += ["--catalog", catalog] }
        let simulator = try SimulatorCommand.parse(arguments)
        let simulatorServices = try simulator.makeServices()

        var configuration = try ServerConfiguration.load(file: world.config)
        if let catalog {
            configuration.storeKitFile = catalog
            try configuration.resolveStoreKitCatalog(explicitGrants: world.config != nil)
        }
        configuration.dataDirectory = world.serverDirectory.path
        // The dashboard and the admin API open in development: a key of its own, kept beside the HS256 secret.
        if configuration.adminKey == nil {
            configuration.adminKey = try AccountAuthenticator.loadOrCreateSecret(in: URL(fileURLWithPath: configuration.dataDirectory), named: "admin-key")
        }
        configuration.port = serverPort
        configuration.bundleId = await simulatorServices.engine.catalog.bundleId
        configuration.trustedRoots += ["jws-root.pem", "receipt-root.pem"].map { simulatorDirectory.appendingPathComponent($0).path }
        if !configuration.environments.contains("Sandbox") { configuration.environments.append("Sandbox") }
        let simulatorURL = "http://127.0.0.1:\(simulatorPort)"
        configuration.appStore.serverAPIBaseURL = simulatorURL
        configuration.appStore.keyId = try String(contentsOf: simulatorDirectory.appendingPathComponent("api-key-id"), encoding: .utf8)
        configuration.appStore.issuerId = "iapkit-dev"
        configuration.appStore.privateKeyFile = simulatorDirectory.appendingPathComponent("api-key.p8").path
        configuration.appStore.verifyReceiptURL = simulatorURL + "/verifyReceipt"
        configuration.appStore.verifyReceiptSandboxURL = simulatorURL + "/sandbox/verifyReceipt"
        var (services, effective) = try await ServeCommand.prepare(configuration)
        // The server judges on the simulator's clock: after `POST /sim/clock/advance` a plan bought is judged at the time
        // the store signed it, not at the machine's (where it would not have begun yet).
        let clock = await simulatorServices.engine.clock
        services.now = { clock.now }
        let names = accounts.isEmpty ? ["dev-user"] : accounts
        for name in names {
            // The app's account and the Apple ID it pays with, named alike so that a newcomer has one name to type.
            if await simulatorServices.engine.account(name) == nil { try await simulatorServices.engine.createAccount(name) }
            if let secret = effective.auth.hs256Secret {
                Output.note("token for \(name) (24 h; store account \(name) in the simulator): \(try await Self.signInToken(for: name, secret: secret))")
            }
        }
        if effective.auth.hs256Secret != nil {
            Output.note("a token for another account: iap dev token <accountId>\(world.arguments)")
        }
        let products = await simulatorServices.engine.catalog.products.map(\.productId)
        Output.note("IAPKit dev: server http://127.0.0.1:\(serverPort), simulator http://127.0.0.1:\(simulatorPort)")
        Output.note("products: \(products.joined(separator: ", "))")
        Output.note("entitlements key (to pin in the app): http://127.0.0.1:\(serverPort)/v1/keys/entitlements")
        if let adminKey = effective.adminKey {
            Output.note("dashboard: http://127.0.0.1:\(serverPort)/dashboard — sign in with the admin key \(adminKey) (also the admin API's bearer key: iap orders list --server http://127.0.0.1:\(serverPort) --admin-key …)")
        }
        Output.note("""
            an app connects with: PurchaseClient(store: SimulatorStore(baseURL: URL(string: "http://127.0.0.1:\(simulatorPort)")!, \
            account: "\(names[0])", device: "phone"), server: PurchaseServerClient(baseURL: URL(string: "http://127.0.0.1:\(serverPort)")!) \
            { "<the token above>" }, journal: try FileJournal(directory: …), accountId: "\(names[0])")
            """)
        var logger = Logger(label: "iapkit.dev")
        logger.logLevel = .notice
        let group = ServiceGroup(
            services: [SimulatorServer.application(simulatorServices, port: simulatorPort, tick: .seconds(1)),
                       buildApplication(services, host: "127.0.0.1", port: serverPort, reconcileEvery: .seconds(30))],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
    }

    /// What the app's sign-in would hand over, for a day: long enough for a session at the desk.
    static func signInToken(for account: String, secret: String) async throws -> String {
        try await AccountAuthenticator.issueToken(account: account, secret: secret, lifetime: 86_400)
    }

    /// `iap dev token ACCOUNT`: a sign-in token for any account, signed with the secret of the world `iap dev` made.
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a 24-hour sign-in token for an account of the iap dev world (its data directory, as iap dev names it).",
            discussion: "The token alone is printed on stdout, so that TOKEN=$(iap dev token ann) works. An account needs no making: the server takes any account id a token names.")

        @Argument(help: "The app account the token signs in.") var accountId: String
        @OptionGroup var world: World

        func run() async throws {
            let configuration = try ServerConfiguration.load(file: world.config)
            let secret: String
            if let configured = configuration.auth.hs256Secret {
                secret = configured
            } else if configuration.auth.publicKeyPEMFile != nil {
                Output.note("error: the server takes tokens signed by your own sign-in (auth.publicKeyPEMFile): there is no secret here to sign one with")
                throw ExitCode(1)
            } else {
                // Not made here: a secret made in the wrong folder would sign tokens no running server accepts.
                let file = world.serverDirectory.appendingPathComponent("auth-hs256-secret")
                guard FileManager.default.fileExists(atPath: file.path) else {
                    Output.note("error: no iap dev world in \(world.data) (no \(file.path)): run iap dev first, or name its folder with --data")
                    throw ExitCode(1)
                }
                secret = try AccountAuthenticator.loadOrCreateSecret(in: world.serverDirectory)
            }
            Output.print(try await DevCommand.signInToken(for: accountId, secret: secret))
            Output.note("token for \(accountId) (24 h), signed with the secret of \(world.data)")
        }
    }
}
