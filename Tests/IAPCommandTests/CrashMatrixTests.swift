import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import StoreSimulator
import Testing

/// The proof, over real processes: `iap simulator`, `iap serve`, and the app as `iap app` processes killed at each
/// point of the flow (`--crash-at`, an immediate `_exit`), then launched again on the same journal. No webhook: the
/// app alone must carry every paid order to the server.
// One world (an `iap simulator` and an `iap serve` process) at a time: started together on a loaded two-core machine,
// they can miss the 15 s start-up probe.
@Suite("Crash matrix: kill the app (or the server) anywhere; the order ends granted, exactly once, to the right account", .serialized,
       .timeLimit(.minutes(3)))
struct CrashMatrixTests {
    static let secret = String(repeating: "crash-matrix-", count: 3)
    static let adminKey = "crash-matrix-admin"

    struct World {
        let root: URL
        let simulatorPort: Int
        let serverPort: Int
        var simulator: Process
        var server: Process

        var serverArguments: [String] {
            ["serve", "--port", String(serverPort), "--data", root.appendingPathComponent("server").path,
             "--root", root.appendingPathComponent("sim/jws-root.pem").path]
        }

        static func start() async throws -> World {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-matrix-\(UUID().uuidString)")
            let simulatorPort = try FreePort.pick(), serverPort = try FreePort.pick()
            var world = World(root: root, simulatorPort: simulatorPort, serverPort: serverPort, simulator: Process(), server: Process())
            world.simulator = try await world.startSimulator()
            world.server = try await world.startServer()
            return world
        }

        func startSimulator() async throws -> Process {
            try await IAPServeProcessTests.start(["simulator", "--port", String(simulatorPort), "--data", root.appendingPathComponent("sim").path],
                                                 probe: "http://127.0.0.1:\(simulatorPort)/sim/root.cer")
        }

        func startServer() async throws -> Process {
            try await IAPServeProcessTests.start(serverArguments, probe: "http://127.0.0.1:\(serverPort)/health",
                                                 environment: ["IAPKIT_AUTH_HS256_SECRET": CrashMatrixTests.secret, "IAPKIT_ADMIN_KEY": CrashMatrixTests.adminKey])
        }

        func stop() async throws {
            for process in [server, simulator] { try await IAPServeProcessTests.stop(process) }
            try? FileManager.default.removeItem(at: root)
        }

        /// Runs `iap app <command>` for `account` (store account `store-<account>`) with its journal.
        func app(_ command: String, _ account: String, journal: String? = nil, device: String = "phone", storeAccount: String? = nil,
                 _ extra: [String] = []) async throws -> (status: Int32, line: AppLine) {
            let arguments = ["app", command, "--simulator", "http://127.0.0.1:\(simulatorPort)", "--server", "http://127.0.0.1:\(serverPort)",
                             "--secret", CrashMatrixTests.secret, "--account", account, "--store-account", storeAccount ?? "store-\(account)", "--device", device,
                             "--journal", root.appendingPathComponent(journal ?? "journal-\(account)").path] + extra
            let result = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path, arguments)
            var line = (try? result.stdout.decoded(as: AppLine.self)) ?? AppLine()
            line.text = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if result.status != 0 && result.status != 137 { line.stderr = String(result.stderr.suffix(3000)) }
            return (result.status, line)
        }

        func get(_ port: Int, _ path: String, bearer: String? = nil) async throws -> Data {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
            return try await URLSession.shared.data(for: request).0
        }

        /// The account's orders by state, and the device's unfinished transactions.
        func settled(_ account: String, device: String = "phone", storeAccount: String? = nil) async throws -> (granted: Int, open: Int, unfinished: Int) {
            func count(_ state: String) async throws -> Int {
                let orders = try await get(serverPort, "/admin/orders?state=\(state)", bearer: CrashMatrixTests.adminKey).decoded(as: AdminOrdersReply.self).orders
                return orders.filter { $0.accountId == account }.count
            }
            let unfinished = try await get(simulatorPort, "/sim/accounts/\(storeAccount ?? "store-\(account)")/devices/\(device)/unfinished")
                .decoded(as: SimulatedSignedTransactions.self).signedTransactions
            return (try await count("granted"), try await count("created"), unfinished.count)
        }

        func createStoreAccount(_ account: String) async throws {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(simulatorPort)/sim/accounts")!)
            request.httpMethod = "POST"
            request.httpBody = Data(#"{"id":"store-\#(account)"}"#.utf8)
            _ = try await URLSession.shared.data(for: request)
        }
    }

    static let coins = "com.example.iapkit.coins.100"

    @Test("Each crash point of a purchase, then a fresh launch on the same journal")
    func crashPoints() async throws {
        let world = try await World.start()
        for point in ["afterPayment", "afterJournal", "duringUpload", "afterGrant"] {
            let account = "crash-\(point)"
            try await world.createStoreAccount(account)
            let crashed = try await world.app("buy", account, ["--product", Self.coins, "--crash-at", point])
            #expect(crashed.status == 137, "\(point): the app died there")
            let relaunched = try await world.app("resume", account)
            #expect(relaunched.status == 0, "\(relaunched.line.stderr ?? "")")
            #expect(relaunched.line.balances?["coins"] == 100, "\(point): granted exactly once: \(relaunched.line)")
            let state = try await world.settled(account)
            #expect(state.granted == 1 && state.open == 0, "\(point): the order is granted: \(state)")
            #expect(state.unfinished == 0, "\(point): the transaction is finished")
            // A further launch changes nothing.
            let again = try await world.app("resume", account)
            #expect(again.line.balances?["coins"] == 100, "\(point): \(again)")
        }
        try await world.stop()
    }

    @Test("Reinstalled after the crash (journal gone), server death during the flow, and a crash during restore")
    func reinstallServerDeathRestore() async throws {
        var world = try await World.start()
        // Reinstalled: the journal is deleted with the app; the unfinished transaction and its appAccountToken remain.
        try await world.createStoreAccount("reinstalled")
        #expect(try await world.app("buy", "reinstalled", ["--product", Self.coins, "--crash-at", "afterJournal"]).status == 137)
        try FileManager.default.removeItem(at: world.root.appendingPathComponent("journal-reinstalled"))
        let fresh = try await world.app("resume", "reinstalled")
        #expect(fresh.line.balances?["coins"] == 100, "\(fresh.line)")
        #expect(try await world.settled("reinstalled") == (granted: 1, open: 0, unfinished: 0))

        // The server dies after the payment: the app keeps the purchase through launches until the server is back.
        try await world.createStoreAccount("server-death")
        #expect(try await world.app("buy", "server-death", ["--product", Self.coins, "--crash-at", "afterJournal"]).status == 137)
        kill(world.server.processIdentifier, SIGKILL)
        try await Task.sleep(for: .milliseconds(100))
        let whileDown = try await world.app("resume", "server-death")
        #expect(whileDown.line.outcome == "resumed:0", "\(whileDown.line)")
        world.server = try await world.startServer()
        let afterRestart = try await world.app("resume", "server-death")
        #expect(afterRestart.line.outcome == "resumed:1")
        #expect(afterRestart.line.balances?["coins"] == 100)
        #expect(try await world.settled("server-death") == (granted: 1, open: 0, unfinished: 0))

        // App Store faults: a failed payment is a typed outcome and leaves nothing; the store down at launch delays only
        // the finish — the journal's proof is granted meanwhile, and the next launch with the store back finishes it.
        try await world.createStoreAccount("store-fault")
        let failed = try await world.app("buy", "store-fault", ["--product", Self.coins, "--outcome", "failed"])
        #expect(failed.line.outcome == "failed:store_failed")
        #expect(failed.line.message?.isEmpty == false, "the failure's message is printed: \(failed.line)")
        // An Apple ID the simulator does not have is a device with no account signed in: said so, not only by its code.
        let nobody = try await world.app("buy", "store-fault", storeAccount: "never-created", ["--product", Self.coins])
        #expect(nobody.line.outcome == "failed:store_unavailable")
        #expect(nobody.line.message?.contains("never-created") == true, "\(nobody.line)")
        #expect(try await world.app("resume", "store-fault").line.balances?.isEmpty == true, "nothing granted")
        #expect(try await world.app("buy", "store-fault", ["--product", Self.coins, "--crash-at", "afterJournal"]).status == 137)
        try await IAPServeProcessTests.stop(world.simulator)
        let storeDown = try await world.app("resume", "store-fault")
        #expect(storeDown.line.balances?["coins"] == 100, "\(storeDown.line)")
        world.simulator = try await world.startSimulator()
        #expect(try await world.settled("store-fault").unfinished == 1, "not finished while the store was down")
        let storeBack = try await world.app("resume", "store-fault")
        #expect(storeBack.line.balances?["coins"] == 100)
        #expect(try await world.settled("store-fault").unfinished == 0)

        // A crash during restore on a second device, then restore again.
        try await world.createStoreAccount("restorer")
        let bought = try await world.app("buy", "restorer", ["--product", "com.example.iapkit.premium"])
        #expect(bought.line.outcome == "granted")
        #expect(try await world.app("restore", "restorer", journal: "journal-restorer-tablet", device: "tablet", ["--crash-at", "duringRestore"]).status == 137)
        let restored = try await world.app("restore", "restorer", journal: "journal-restorer-tablet", device: "tablet")
        #expect(restored.line.entitlements == ["premium"])
        try await world.stop()
    }
}

extension CrashMatrixTests {
    @Test("Account switch on one device: A pays and the app dies (at each point), B launches on the same journal and Apple ID, then A launches — A has it once, B nothing")
    func accountSwitch() async throws {
        let world = try await World.start()
        try await world.createStoreAccount("family")
        // `iap serve` made its entitlements key in its data directory, readable by its owner only, and serves it; the
        // app processes below believe only answers signed with it.
        let keyFile = world.root.appendingPathComponent("server/entitlements-signing-key.pem")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: keyFile.path)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o777 == 0o600)
        let (pem, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(world.serverPort)/v1/keys/entitlements")!)
        #expect(String(decoding: pem, as: UTF8.self).hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let pemFile = world.root.appendingPathComponent("entitlements-key.pem")
        try pem.write(to: pemFile)
        let signed = ["--entitlements-key", pemFile.path]
        for point in ["afterPayment", "afterJournal", "duringUpload"] {
            let (ann, bea, journal) = ("ann-\(point)", "bea-\(point)", "journal-device-\(point)")
            let crashed = try await world.app("buy", ann, journal: journal, storeAccount: "store-family", signed + ["--product", Self.coins, "--crash-at", point])
            #expect(crashed.status == 137, "\(point): the app died there")
            let other = try await world.app("resume", bea, journal: journal, storeAccount: "store-family", signed)
            #expect(other.status == 0, "\(other.line.stderr ?? "")")
            #expect(other.line.balances?["coins"] == nil, "\(point): B got nothing: \(other.line)")
            #expect(try await world.settled(ann, storeAccount: "store-family").unfinished == 1, "\(point): A's payment is not finished under B")
            let back = try await world.app("resume", ann, journal: journal, storeAccount: "store-family", signed)
            #expect(back.line.balances?["coins"] == 100, "\(point): A has it once: \(back.line)")
            #expect(try await world.settled(ann, storeAccount: "store-family") == (granted: 1, open: 0, unfinished: 0), "\(point)")
            let again = try await world.app("resume", bea, journal: journal, storeAccount: "store-family", signed)
            #expect(again.line.balances?["coins"] == nil, "\(point): B still nothing: \(again.line)")
            #expect(again.line.journaled?.isEmpty == true, "\(point): nothing left waiting")
        }
        try await world.stop()
    }
}

@Suite("iap demo", .timeLimit(.minutes(3)))
struct IAPDemoTests {
    @Test("iap demo runs the whole timeline in under a minute and exits 0 with every step as expected")
    func demo() async throws {
        let started = ContinuousClock.now
        let result = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path, ["demo"])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(!result.stdout.contains("✘"))
        #expect(result.stdout.contains("13/13 steps as expected"))
        for line in ["100 coins (consumable)", "Premium (non-consumable)", "Season Pass (non-renewing subscription)", "Pro Monthly (auto-renewable",
                     "grace period", "billing recovered", "expires at the period's end", "REFUND revokes it", "the app relaunches"] {
            #expect(result.stdout.contains(line), "missing: \(line)")
        }
    }
}
