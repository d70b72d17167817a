import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import Testing

/// The history explorer's smaller set over real processes (docs/EXPLORER.md): `iap simulator`, `iap serve` and the app as
/// `iap app` processes, with the steps only processes have — the app's process killed with SIGKILL at a random moment
/// of a purchase, `iap serve` killed with SIGKILL while a purchase is in flight and started again. Seeded: a failing
/// seed prints its steps, and `IAPKIT_PROCESS_SEEDS=first:count` (scripts/explore --processes) runs a campaign.
@Suite("Seeded histories over real processes: kill -9 of the app and of the server anywhere", .serialized, .timeLimit(.minutes(10)))
struct ProcessHistoryTests {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let devices = ["phone", "tablet"]

    enum Step: CustomStringConvertible {
        /// The app buys; with `crash`, it exits at that point of the flow (`--crash-at`, an immediate `_exit`).
        case buy(device: Int, product: String, crash: String?)
        /// The app buys and its process is sent SIGKILL after `milliseconds`, wherever it is.
        case buyAppKilled(device: Int, product: String, milliseconds: Int)
        /// The app buys and `iap serve` is sent SIGKILL after `milliseconds`; it is started again once the app is done.
        case buyServerKilled(device: Int, product: String, milliseconds: Int)
        /// The server is killed, the app is launched while it is down, then the server comes back.
        case launchWhileServerDown(device: Int)
        /// The app is launched again.
        case launch(device: Int)
        /// Another app account signs in on the device (the next runs of the app there are that account's).
        case signIn(device: Int, account: Int)
        /// Restore Purchases.
        case restore(device: Int)

        /// Whether the step kills a process (the app at a checkpoint or with SIGKILL, or `iap serve`).
        var kills: Bool {
            switch self {
            case .buy(_, _, let crash): crash != nil
            case .buyAppKilled, .buyServerKilled, .launchWhileServerDown: true
            case .launch, .signIn, .restore: false
            }
        }

        var description: String {
            switch self {
            case .buy(let device, let product, let crash): "\(ProcessHistoryTests.devices[device]) buys \(product)" + (crash.map { ", the app exits \($0)" } ?? "")
            case .buyAppKilled(let device, let product, let ms): "\(ProcessHistoryTests.devices[device]) buys \(product), the app is killed -9 after \(ms) ms"
            case .buyServerKilled(let device, let product, let ms): "\(ProcessHistoryTests.devices[device]) buys \(product), iap serve is killed -9 after \(ms) ms"
            case .launchWhileServerDown(let device): "iap serve killed -9; \(ProcessHistoryTests.devices[device]) launches; iap serve starts again"
            case .launch(let device): "\(ProcessHistoryTests.devices[device]) launches the app"
            case .signIn(let device, let account): "\(ProcessHistoryTests.devices[device]): account \(account) signs in"
            case .restore(let device): "\(ProcessHistoryTests.devices[device]) restores purchases"
            }
        }
    }

    static func history(seed: UInt64) -> [Step] {
        var random = SeededGenerator(state: seed &* 0xD1B5_4A32_D192_ED03 &+ 7)
        return (0..<Int.random(in: 6...9, using: &random)).map { _ in
            let device = Int.random(in: 0..<devices.count, using: &random)
            let product = Int.random(in: 0..<4, using: &random) == 0 ? premium : coins
            let milliseconds = Int.random(in: 20...700, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<28:
                return .buy(device: device, product: product,
                            crash: [nil, nil, "afterPayment", "afterJournal", "duringUpload", "afterGrant"].randomElement(using: &random)!)
            case 28..<44: return .buyAppKilled(device: device, product: product, milliseconds: milliseconds)
            case 44..<60: return .buyServerKilled(device: device, product: product, milliseconds: milliseconds)
            case 60..<68: return .launchWhileServerDown(device: device)
            case 68..<80: return .launch(device: device)
            case 80..<92: return .signIn(device: device, account: Int.random(in: 0..<2, using: &random))
            default: return .restore(device: device)
            }
        }
    }

    /// One history's actors in the shared world: one Apple ID on two devices, two app accounts.
    struct Actors {
        let seed: UInt64
        var signedIn = [0, 1]
        var store: String { "store-h\(seed)" }
        func account(_ index: Int) -> String { "h\(seed)-\(index)" }
        func journal(_ device: Int) -> String { "journal-h\(seed)-\(ProcessHistoryTests.devices[device])" }
        func deviceId(_ device: Int) -> String { "h\(seed)-\(ProcessHistoryTests.devices[device])" }
    }

    typealias World = CrashMatrixTests.World

    @Test("Seeded process histories: every charge ends granted once to its order's account, finished, and the ledger consistent")
    func seeded() async throws {
        let range = Self.seeds()
        var world = try await World.start()
        var failures: [String] = []
        var charged = 0, kills = 0
        for seed in range {
            let steps = Self.history(seed: seed)
            let (problems, count) = try await Self.run(steps, seed: seed, world: &world)
            charged += count
            kills += steps.filter(\.kills).count
            if !problems.isEmpty {
                failures.append("seed \(seed):\n" + steps.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
                                + "\n  found:\n" + problems.map { "    - \($0)" }.joined(separator: "\n"))
            }
        }
        try await world.stop()
        for failure in failures.prefix(3) { Issue.record("\(failure)\nreplay: IAPKIT_PROCESS_SEEDS=<seed>:1 scripts/explore --processes") }
        print("process histories: \(range.count) run, \(kills) processes killed, \(charged) charged transactions checked, \(failures.count) failing")
        #expect(charged >= range.count, "the histories bought something to check: \(charged) transactions")
        #expect(kills > 0)
    }

    /// Seeds 1…4 in the suite; `IAPKIT_PROCESS_SEEDS=first:count` for a campaign.
    static func seeds() -> ClosedRange<UInt64> {
        let text = ProcessInfo.processInfo.environment["IAPKIT_PROCESS_SEEDS"] ?? "1:4"
        let parts = text.split(separator: ":").compactMap { UInt64($0) }
        guard parts.count == 2, parts[1] > 0 else { return 1...4 }
        return parts[0]...(parts[0] + parts[1] - 1)
    }

    static func run(_ steps: [Step], seed: UInt64, world: inout World) async throws -> (problems: [String], charged: Int) {
        var actors = Actors(seed: seed)
        try await world.createStoreAccount("h\(seed)")
        for step in steps { try await perform(step, actors: &actors, world: &world) }
        return try await quiesceAndCheck(actors, world: world)
    }

    static func app(_ command: String, _ device: Int, _ actors: Actors, world: World, account: String? = nil,
                    _ extra: [String] = []) async throws -> (status: Int32, line: AppLine) {
        try await world.app(command, account ?? actors.account(actors.signedIn[device]), journal: actors.journal(device), device: actors.deviceId(device),
                            storeAccount: actors.store, extra)
    }

    /// Runs `iap app buy` as a process of its own and sends it SIGKILL after `milliseconds` (if it is still running).
    static func buyKilled(_ device: Int, _ product: String, after milliseconds: Int, actors: Actors, world: World) async throws {
        let arguments = ["app", "buy", "--simulator", "http://127.0.0.1:\(world.simulatorPort)", "--server", "http://127.0.0.1:\(world.serverPort)",
                         "--secret", CrashMatrixTests.secret, "--account", actors.account(actors.signedIn[device]), "--store-account", actors.store,
                         "--device", actors.deviceId(device), "--journal", world.root.appendingPathComponent(actors.journal(device)).path,
                         "--product", product]
        let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path, arguments)
        try await Task.sleep(for: .milliseconds(milliseconds))
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for _ in 0..<500 where process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
    }

    static func perform(_ step: Step, actors: inout Actors, world: inout World) async throws {
        switch step {
        case .buy(let device, let product, let crash):
            _ = try await app("buy", device, actors, world: world, ["--product", product] + (crash.map { ["--crash-at", $0] } ?? []))
        case .buyAppKilled(let device, let product, let milliseconds):
            try await buyKilled(device, product, after: milliseconds, actors: actors, world: world)
        case .buyServerKilled(let device, let product, let milliseconds):
            let running = world
            async let bought = app("buy", device, actors, world: running, ["--product", product])
            try await Task.sleep(for: .milliseconds(milliseconds))
            kill(world.server.processIdentifier, SIGKILL)
            _ = try await bought
            for _ in 0..<250 where world.server.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            world.server = try await world.startServer()
        case .launchWhileServerDown(let device):
            kill(world.server.processIdentifier, SIGKILL)
            for _ in 0..<250 where world.server.isRunning { try await Task.sleep(for: .milliseconds(20)) }
            _ = try await app("resume", device, actors, world: world)
            world.server = try await world.startServer()
        case .launch(let device):
            _ = try await app("resume", device, actors, world: world)
        case .signIn(let device, let account):
            actors.signedIn[device] = account
            _ = try await app("resume", device, actors, world: world)
        case .restore(let device):
            _ = try await app("restore", device, actors, world: world)
        }
    }

    /// Every app launched until no journal holds a paid entry (each account with one waiting signs in on that device),
    /// then the checks: the simulator's own record of what it charged against the ledger, the devices' queues, the
    /// balances each account is told, and the ledger's own consistency checks.
    static func quiesceAndCheck(_ actors: Actors, world: World) async throws -> (problems: [String], charged: Int) {
        var problems: [String] = []
        for device in devices.indices {
            var account = actors.account(actors.signedIn[device])
            for _ in 0..<4 {
                let launched = try await app("resume", device, actors, world: world, account: account)
                let waiting = (launched.line.journaled ?? []).compactMap { $0.split(separator: ":").last.map(String.init) }
                guard let next = waiting.first(where: { $0 != account }) ?? waiting.first else { break }
                account = next
            }
            let last = try await app("resume", device, actors, world: world, account: account)
            if let left = last.line.journaled, !left.isEmpty {
                problems.append("\(devices[device])'s journal still holds paid entries after every account launched: \(left)")
            }
        }

        // The simulator's record, as it saved it: every transaction it minted for this history's Apple ID.
        let state = try Data(contentsOf: world.root.appendingPathComponent("sim/state.json")).decoded(as: SimulatorState.self)
        let minted = state.transactions.values.filter { $0.account == actors.store }
        var tokens: [String: String] = [:]
        for filter in ["created", "granted", "settled"] {
            let orders = try await world.get(world.serverPort, "/admin/orders?state=\(filter)", bearer: CrashMatrixTests.adminKey).decoded(as: AdminOrdersReply.self).orders
            for order in orders { tokens[order.appAccountToken] = order.accountId }
        }
        var coins: [String: Int] = [:]
        for transaction in minted {
            let payload = transaction.payload
            let id = payload.transactionId ?? "?"
            let token = payload.appAccountToken?.lowercased()
            guard let owner = token.flatMap({ tokens[$0] }) else {
                problems.append("transaction \(id) carries a token (\(token ?? "none")) no order of the server names")
                continue
            }
            let held = try? await world.get(world.serverPort, "/admin/transactions/\(id)", bearer: CrashMatrixTests.adminKey).decoded(as: TransactionRecord.self)
            if held?.accountId != owner {
                problems.append("Apple charged \(id) (\(payload.productId ?? "")) for \(owner)'s order; the ledger has it \(held?.accountId.map { "bound to \($0)" } ?? "nowhere")")
            }
            if let unfinished = transaction.unfinishedOn, !unfinished.isEmpty {
                problems.append("transaction \(id) is still unfinished on \(unfinished)")
            }
            if payload.productId == Self.coins { coins[owner, default: 0] += 100 }
        }
        for index in 0..<2 {
            let account = actors.account(index)
            let (_, owned) = try await IAPServeProcessTests.request("http://127.0.0.1:\(world.serverPort)/v1/entitlements", account: account,
                                                                     secret: CrashMatrixTests.secret)
            let balance = Int((try? owned.decoded(as: EntitlementsReply.self))?.entitlements.balances["coins"] ?? 0)
            if balance != coins[account, default: 0] { problems.append("\(account) holds \(balance) coins; Apple charged it for \(coins[account, default: 0])") }
        }
        let consistency = try? await world.get(world.serverPort, "/admin/consistency", bearer: CrashMatrixTests.adminKey).decoded(as: ConsistencyReply.self)
        if consistency?.consistent != true { problems.append("the ledger's own checks: \(consistency.map { "\($0.inconsistencies)" } ?? "no answer")") }
        return (problems, minted.count)
    }
}
