import AppStoreClient
import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPKit
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import NIOEmbedded
import StoreSimulator

/// A broken promise, with the step after which it was seen.
public struct Violation: Sendable, Hashable, CustomStringConvertible {
    /// The invariant (1–5, as docs/EXPLORER.md numbers them).
    public var invariant: Int
    /// The step index (0-based) after which it was seen; nil for the checks after the whole history.
    public var step: Int?
    public var detail: String
    public var description: String { "invariant \(invariant)" + (step.map { " after step \($0 + 1)" } ?? " at the end") + ": \(detail)" }
}

/// What one history did and found.
public struct HistoryResult: Sendable {
    public var seed: UInt64?
    public var steps: [Step]
    public var violations: [Violation]
    /// Checks performed, by invariant.
    public var checks: [Int: Int]
    public var seconds: Double
    /// What the server was seen to do on the rarer paths (a receipt held for Apple, then granted by the reconciler).
    public var events: [String: Int] = [:]
}

/// What every history shares in one process: the simulator's certificate authority (RSA keys are slow to make), the
/// Server API key, and a directory on tmpfs for ledgers and journals.
public final class ExplorerEnvironment: Sendable {
    let authority: CertificateAuthority
    let roots: TrustRoots
    /// The JWS root alone: receipts do not verify locally and go to verifyReceipt.
    let jwsRoots: TrustRoots
    let apiKey = P256.Signing.PrivateKey()
    let root: URL
    let secret = String(repeating: "explorer-", count: 4)
    /// Set for histories on PostgreSQL: the server this URL names gets a database per history, dropped after it.
    public let postgresURL: String?

    public init(postgresURL: String? = nil) throws {
        self.postgresURL = postgresURL
        authority = try CertificateAuthority.create()
        var roots = TrustRoots()
        try roots.add(certificateData: authority.jws.rootDER, source: "simulator JWS root")
        jwsRoots = roots
        try roots.add(certificateData: authority.receipts.rootDER, source: "simulator receipt root")
        self.roots = roots
        let shm = URL(fileURLWithPath: "/dev/shm")
        let base = FileManager.default.fileExists(atPath: shm.path) ? shm : FileManager.default.temporaryDirectory
        // Directories left by explorers that exited without cleaning up (a test process keeps its environment to the end).
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? [] where name.hasPrefix("iapkit-explorer-") {
            if let pid = name.split(separator: "-").dropFirst(2).first.flatMap({ Int32($0) }), kill(pid, 0) != 0 {
                try? FileManager.default.removeItem(at: base.appendingPathComponent(name))
            }
        }
        root = base.appendingPathComponent("iapkit-explorer-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    private let template = Locked<Task<URL, any Error>?>(nil)

    /// A ledger file with every migration applied, made once: each history starts from a copy of it instead of
    /// migrating its own (the schema's creation was a fifth of an empty history). Migrations have their own tests.
    func migratedLedger() async throws -> URL {
        let root = root
        let task = template.update { task in
            if let task { return task }
            let made = Task {
                let file = root.appendingPathComponent("template/ledger.sqlite")
                let store = try SQLiteLedgerStore(path: file.path)
                try await Ledger(store: store, catalog: ServerConfiguration().catalog).migrate()
                // Closing the last connection checkpoints the WAL into the file: the file alone is the ledger.
                try await store.close()
                return file
            }
            task = made
            return made
        }
        return try await task.value
    }
}

/// One history against the real components in one process: the simulator's engine and routes, the purchase server's
/// routes over a real SQLite ledger, and `PurchaseClient`s with real journals — every HTTP request through the real
/// routers in process, the App Store's clock frozen between the history's own advances.
final class HistoryRun: @unchecked Sendable {
    static let bundleId = "com.example.iapkit"
    static let appAccounts = (0..<HistoryGenerator.appAccounts).map { "account-\($0)" }
    static let storeAccounts = (0..<HistoryGenerator.storeAccounts).map { "store-\($0)" }

    let environment: ExplorerEnvironment
    let directory: URL
    let engine: StoreEngine
    let simulator: InProcessHTTP
    let server: ServerSlot
    /// The channel every in-process request's context names (see ``InProcessHTTP``); closed with the history.
    let channel = NIOAsyncTestingChannel()
    let ownership = Ownership()
    /// How Apple answers the purchase server now, and where the server reaches Apple (``AppleSwitchboard``).
    let appleFault = Locked<AppleFault>(.up)
    private(set) var appleURL = ""
    let devices: [ExploredDevice]
    private let found = Locked<[Violation]>([])
    private let performed = Locked<[Int: Int]>([:])
    private let seen = Locked<[String: Int]>([:])
    private let tokens = Locked<[String: String]>([:])
    private let currentStep = Locked<Int?>(nil)
    /// The bundle id the server is deployed with now.
    private(set) var serverBundleId = HistoryRun.bundleId
    /// Whether the server is deployed without the receipt root (receipts verified by Apple's verifyReceipt).
    private(set) var receiptsByApple = false
    var serverConfigured: Bool { serverBundleId == Self.bundleId }
    var currentStepIndex: Int? {
        get { currentStep.value }
        set { currentStep.value = newValue }
    }

    init(environment: ExplorerEnvironment) async throws {
        self.environment = environment
        let directory = environment.root.appendingPathComponent(UUID().uuidString)
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: environment.authority),
                                 frozenClock: Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60))
        for account in Self.storeAccounts { try await engine.createAccount(account) }
        let authenticator = APIAuthenticator(keyId: "EXPLORER01", issuerId: "explorer", publicKey: environment.apiKey.publicKey, bundleId: Self.bundleId)
        simulator = InProcessHTTP(SimulatorServer.router(.init(engine: engine, authenticator: authenticator)), channel: channel)
        server = ServerSlot(channel: channel)
        // Two devices share the first Apple ID (a household), each with its own app user; the third is someone else's.
        let root = directory
        devices = [(0, 0), (1, 0), (2, 1)].map { index, store in
            ExploredDevice(index: index, storeAccount: HistoryRun.storeAccounts[store], appAccount: HistoryRun.appAccounts[index], root: root)
        }
        appleURL = try await AppleSwitchboard.shared.connect(directory.lastPathComponent, to: simulator, fault: appleFault)
        _ = server.replace(try await makeServices(bundleId: Self.bundleId))
        // The server has been running (and reconciling) since before the history began: Apple's notification history
        // is read from now on, not from 180 days back.
        try await ledger.advanceCursor(Reconciler.notificationHistoryCursor(baseURL: appleURL, bundleId: Self.bundleId), to: await engine.clock.now)
        for device in devices { await launch(device) }
    }

    func close() async {
        for device in devices {
            await device.client?.stop()
            // The SDK's closures hold this history (its transports): let go of them, or every world stays in memory.
            device.client = nil
            device.store = nil
        }
        AppleSwitchboard.shared.disconnect(directory.lastPathComponent)
        if let old = server.replace(nil) { try? await old.ledger.store.close() }
        if let database, let url = environment.postgresURL { try? PostgresDatabases.run("DROP DATABASE IF EXISTS \(database)", on: url) }
        _ = try? await channel.finish()
        try? FileManager.default.removeItem(at: directory)
    }

    var ledgerFile: URL { directory.appendingPathComponent("ledger.sqlite") }

    /// This history's own PostgreSQL database, when it runs on PostgreSQL.
    private(set) var database: String?

    /// Where this history's ledger lives: a SQLite file on tmpfs, or a database of its own on PostgreSQL.
    func databaseURL() throws -> String {
        guard let url = environment.postgresURL else { return "sqlite://" + ledgerFile.path }
        if database == nil {
            let name = "iapkit_explore_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
            try PostgresDatabases.run("CREATE DATABASE \(name)", on: url)
            database = name
        }
        return try PostgresDatabases.url(url, database: database!)
    }

    var violations: [Violation] { found.value }
    var checks: [Int: Int] { performed.value }

    func record(_ invariant: Int, _ detail: String, atEnd: Bool = false) {
        let step = atEnd ? nil : currentStep.value
        found.update { $0.append(Violation(invariant: invariant, step: step, detail: detail)) }
    }

    func checked(_ invariant: Int, _ count: Int = 1) { performed.update { $0[invariant, default: 0] += count } }
    var events: [String: Int] { seen.value }
    func saw(_ event: String) { seen.update { $0[event, default: 0] += 1 } }

    // MARK: The purchase server

    func makeServices(bundleId: String) async throws -> PurchaseServices {
        var configuration = ServerConfiguration()
        if environment.postgresURL == nil, !FileManager.default.fileExists(atPath: ledgerFile.path) {
            try FileManager.default.copyItem(at: try await environment.migratedLedger(), to: ledgerFile)
        }
        configuration.database = try databaseURL()
        configuration.auth.hs256Secret = environment.secret
        configuration.bundleId = bundleId
        let store = try await Ledger.openStore(url: configuration.databaseURL)
        let ledger = Ledger(store: store, catalog: configuration.catalog)
        try await ledger.migrate()
        let clock = await engine.clock
        // Apple as the server is told to reach it: the Server API with this deployment's bundle id (a wrong one is refused
        // by Apple too).
        let apple = AppleAccess(serverAPI: ServerAPIClient(baseURL: appleURL, credentials: .init(keyId: "EXPLORER01", issuerId: "explorer", bundleId: bundleId,
                                                                                                 privateKey: environment.apiKey), policy: Self.applePolicy),
                                verifyReceipt: VerifyReceiptClient(productionURL: appleURL + "/verifyReceipt", sandboxURL: appleURL + "/sandbox/verifyReceipt",
                                                                   sharedSecret: nil, policy: Self.applePolicy),
                                // A history's few accounts sync receipts through Apple at machine speed: the limits on
                                // look-ups (AppleLookupLimitsTests) are not what it explores.
                                limits: AppleLookupLimits(.init(perAccount: 100_000, perSecond: 100_000)))
        let roots = receiptsByApple ? environment.jwsRoots : environment.roots
        return PurchaseServices(ledger: ledger, verifier: ProofVerifier(roots: roots, configuration: configuration, apple: apple),
                                       authenticator: try await AccountAuthenticator(configuration.auth), now: { clock.now })
    }

    /// Two attempts with no real wait between them, so that an outage costs a history milliseconds; a timeout with room
    /// for a debug build's answers on a loaded machine (a slow answer takes longer: ``AppleSwitchboard/slowAnswer``).
    /// 400 ms was too little: on CI's two cores, with the rest of the suite running, two answers in a row took longer
    /// and a history failed as if Apple were down.
    static let applePolicy = RetryPolicy(attempts: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(2), timeout: .milliseconds(1_200))

    /// Stops the server and starts it again over the same ledger file, configured for `bundleId`.
    func redeploy(bundleId: String, receiptsByApple: Bool? = nil) async throws {
        if let receiptsByApple { self.receiptsByApple = receiptsByApple }
        if let old = server.replace(nil) { try await old.ledger.store.close() }
        _ = server.replace(try await makeServices(bundleId: bundleId))
        serverBundleId = bundleId
    }

    var ledger: Ledger { server.services!.ledger }

    func token(for account: String) async throws -> String {
        if let token = tokens.value[account] { return token }
        let token = try await AccountAuthenticator.issueToken(account: account, secret: environment.secret)
        tokens.update { $0[account] = token }
        return token
    }

    func account(bearer header: String?) -> String? {
        guard let header, header.hasPrefix("Bearer ") else { return nil }
        let token = String(header.dropFirst(7))
        return tokens.value.first { $0.value == token }?.key
    }

    // MARK: The app

    /// Starts the app's process on `device` (the journal and the store's queue are as the last process left them) and
    /// resumes its unfinished work, as `start()` does at launch.
    func launch(_ device: ExploredDevice) async {
        await device.client?.stop()
        device.dead.value = false
        let simulator = simulator
        let store = SimulatorStore(baseURL: URL(string: "http://simulator")!, account: device.storeAccount, device: device.name) { [self] request in
            if device.dead.value { throw InjectedFault(description: "the app's process is gone") }
            if request.httpMethod == "POST", let path = request.url?.path, path.hasPrefix("/sim/transactions/"), path.hasSuffix("/finish") {
                await checkFinish(transactionId: path.split(separator: "/")[2].description, device: device)
            }
            return try await simulator.send(request)
        }
        let serverClient = PurchaseServerClient(baseURL: URL(string: "http://server")!, token: { [self] in
            guard let account = device.signedIn.value else { throw InjectedFault(description: "nobody is signed in") }
            return try await token(for: account)
        }, transport: { [self] request in
            if device.dead.value { throw InjectedFault(description: "the app's process is gone") }
            if device.offline.value { throw InjectedFault(description: "the network is down") }
            guard let http = server.http else { throw InjectedFault(description: "the purchase server is down") }
            let (data, response) = try await http.send(request)
            observe(request, (response as? HTTPURLResponse)?.statusCode ?? 0, data)
            return (data, response)
        })
        let journal: any PurchaseJournal
        do { journal = FaultyJournal(inner: try FileJournal(directory: device.journalDirectory), device: device) } catch {
            record(4, "the journal directory cannot be made: \(error)")
            return
        }
        device.store = store
        device.client = PurchaseClient(store: store, server: serverClient, journal: journal, accountId: device.signedIn.value, retryDelays: [.zero])
        _ = await device.client?.resume()
    }

    /// Learns from the app's traffic who ordered what (an order's token is its account's) and whose uploads of
    /// transactions were accepted, as the oracle of ownership.
    func observe(_ request: URLRequest, _ status: Int, _ data: Data) {
        guard let path = request.url?.path, let account = account(bearer: request.value(forHTTPHeaderField: "Authorization")) else { return }
        /// The request's body, and the answer, as the contract's types (nil: not of that type).
        func sent<T: Decodable>(_ type: T.Type) -> T? { request.httpBody.flatMap { try? APIJSON.decoder().decode(type, from: $0) } }
        func answer<T: Decodable>(_ type: T.Type) -> T? { try? APIJSON.decoder().decode(type, from: data) }
        let upload = path == "/v1/purchases" ? sent(PurchaseRequest.self) : nil
        switch (path, status) {
        case ("/v1/orders", 200...201):
            if let token = answer(OrderReply.self)?.appAccountToken {
                ownership.ordered(token, by: account)
            }
        case ("/v1/purchases", 200) where upload?.receipt != nil:
            // A receipt's purchases that the server bound to the sender (not those its tokens sent to their owners). A
            // receipt lists a series' first period too, whose id is the series' key.
            for item in answer(PurchaseReply.self)?.transactions ?? [] where [.granted, .alreadyGranted].contains(item.outcome) {
                ownership.presented(ids: [item.transactionId], by: account)
            }
        case ("/v1/purchases", 202):
            if let receipt = upload?.receipt, let proofId = answer(HeldProofReply.self)?.proofId {
                saw("receipt held for Apple (202)")
                ownership.held(receipt: receipt, proofId: proofId, by: account)
            }
        case ("/v1/purchases", 200), ("/v1/purchases", 409):
            // Accepted, or refused as another account's: either way the server verified it and heard who presented it.
            if let jws = upload?.signedTransaction, let transaction = try? StoreTransaction(signedTransaction: jws) {
                ownership.presented(transaction, by: account)
            }
        case ("/v1/restore", 200), ("/v1/restore", 409):
            for jws in sent(RestoreRequest.self)?.signedTransactions ?? [] {
                if let transaction = try? StoreTransaction(signedTransaction: jws) { ownership.presented(transaction, by: account) }
            }
        case (_, 200) where path.hasPrefix("/v1/consumables/"):
            if let spend = sent(SpendRequest.self), let key = spend.idempotencyKey { ownership.spent(spend.amount, by: account, key: key) }
        default: break
        }
    }
}
