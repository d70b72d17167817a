import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import PurchaseServer
import StoreSimulator
import Testing

@Suite("iap serve as a process", .timeLimit(.minutes(3)))
struct IAPServeProcessTests {
    static let secret = String(repeating: "process-secret-", count: 3)

    /// Starts `iap` with `arguments` and waits until `probe` answers.
    static func start(_ arguments: [String], probe: String, environment: [String: String] = [:]) async throws -> Process {
        let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path, arguments, environment: environment)
        // Up to 30 s: with the whole suite on two cores (and PostgreSQL migrating under its lock), a start can be slow.
        for _ in 0..<300 {
            if (try? await URLSession.shared.data(from: URL(string: probe)!)) != nil { return process }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.terminate()
        throw CocoaError(.fileReadUnknown)
    }

    static func stop(_ process: Process) async throws {
        process.terminate()
        for _ in 0..<250 where process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    static func request(_ url: String, method: String = "GET", body: String? = nil, account: String? = nil,
                        secret: String = secret) async throws -> (Int, Data) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        if let account { request.setValue("Bearer \(try await AccountAuthenticator.issueToken(account: account, secret: secret))", forHTTPHeaderField: "Authorization") }
        request.timeoutInterval = 30
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    @Test("With the embedded defaults it starts, answers /health, refuses calls without a token, and exits on SIGTERM")
    func embeddedDefaults() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-serve-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let process = try await Self.start(["serve", "--port", String(port), "--data", data.path], probe: "http://127.0.0.1:\(port)/health")
        let (status, health) = try await Self.request("http://127.0.0.1:\(port)/health")
        #expect(status == 200)
        #expect(try health.decoded(as: HealthReply.self).store == "sqlite")
        #expect(try await Self.request("http://127.0.0.1:\(port)/v1/entitlements").0 == 401)
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("ledger.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("auth-hs256-secret").path))
        try await Self.stop(process)
        #expect(!process.isRunning, "iap serve must exit on SIGTERM")
    }

    @Test("--print-config: file, environment and flags layered, secrets masked, exit 0 without serving; an unknown key exits 1 naming it")
    func printConfig() async throws {
        let binary = try IAPSimulatorProcessTests.binary().path
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-print-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: config) }
        try Data(#"{"port": 9001, "bundleId": "com.acme.file", "adminKey": "from-the-file"}"#.utf8).write(to: config)
        var environment = ProcessInfo.processInfo.environment
        environment["IAPKIT_BUNDLE_ID"] = "com.acme.env"
        environment["IAPKIT_ADMIN_KEY"] = "admin-key-from-env"
        let shown = try await Subprocess.run(binary, ["serve", "--config", config.path, "--port", "9002", "--print-config"], environment: environment)
        #expect(shown.status == 0, "\(shown.stderr)")
        struct Printed: Decodable { var port: Int?; var bundleId: String?; var adminKey: String? }
        let printed = try? shown.stdout.decoded(as: Printed.self)
        #expect(printed?.port == 9002 && printed?.bundleId == "com.acme.env" && printed?.adminKey == "<set>", "\(shown.stdout)")
        #expect(!shown.stdout.contains("admin-key-from-env") && !shown.stdout.contains("from-the-file"))
        try Data(#"{"prot": 9001}"#.utf8).write(to: config)
        let refused = try await Subprocess.run(binary, ["serve", "--config", config.path, "--print-config"], environment: environment)
        #expect(refused.status != 0 && refused.stderr.contains("unknown key prot"), "\(refused.stderr)")
    }

    @Test("--log-format json: one JSON line a request with its request id (the caller's, answered back), the refusal's code, and no token or signed payload")
    func jsonLogs() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-logs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let log = data.appendingPathComponent("stderr.log")
        let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path, ["serve", "--port", String(port), "--data", data.path, "--log-format", "json"],
                                           environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret], stderrFile: log)
        for _ in 0..<150 {
            if (try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/health")!)) != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        var health = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/health")!)
        health.setValue("trace-42", forHTTPHeaderField: "X-Request-Id")
        let (_, answered) = try await URLSession.shared.data(for: health)
        #expect((answered as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Request-Id") == "trace-42")
        let forged = "eyJhbGciOiJFUzI1NiJ9.eyJzZWNyZXQtcGF5bG9hZCI6MX0.c2lnbmF0dXJl"
        let token = try await AccountAuthenticator.issueToken(account: "logged", secret: Self.secret)
        let (status, _) = try await Self.request("http://127.0.0.1:\(port)/v1/purchases", method: "POST", body: #"{"signedTransaction":"\#(forged)"}"#, account: "logged")
        #expect(status == 422)
        try await Self.stop(process)
        let text = try String(contentsOf: log, encoding: .utf8)
        let lines = text.split(separator: "\n").compactMap { try? String($0).decoded(as: LogLine.self) }
        let requests = lines.filter { $0.message == "request" }
        let traced = try #require(requests.first { $0.requestId == "trace-42" }, "\(text.suffix(2000))")
        #expect(traced.path == "/health" && traced.status == "200" && traced.method == "GET")
        let refused = try #require(requests.first { $0.path == "/v1/purchases" })
        #expect(refused.status == "422" && refused.error?.isEmpty == false && refused.requestId?.count == 36)
        #expect(lines.count == text.split(separator: "\n").count, "every line is JSON")
        #expect(!text.contains(forged) && !text.contains("eyJzZWNyZXQtcGF5bG9hZCI6MX0") && !text.contains(token), "no signed payload or token in a log line")
    }

    @Test("The OpenAPI document: served as kept in Sources/PurchaseServer/Resources/openapi.json, and schemathesis finds every answer to generated requests in it, no 5xx, auth enforced")
    func openAPI() async throws {
        guard let schemathesis = ProcessInfo.processInfo.environment["IAPKIT_SCHEMATHESIS"] else {
            Issue.record("IAPKIT_SCHEMATHESIS is not set: run the suite with scripts/test, which installs it")
            return
        }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-openapi-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let adminKey = "openapi-admin-key"
        let process = try await Self.start(["serve", "--port", String(port), "--data", data.path, "--log-level", "warning"], probe: "http://127.0.0.1:\(port)/health",
                                           environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret, "IAPKIT_ADMIN_KEY": adminKey])
        let (served, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/openapi.json")!)
        let kept = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/PurchaseServer/Resources/openapi.json"))
        #expect(served == kept, "run swift run iap openapi --output Sources/PurchaseServer/Resources/openapi.json")
        let token = try await AccountAuthenticator.issueToken(account: "generated", secret: Self.secret)
        // The checks of the document: answers, their codes, types, bodies and headers as documented, no server error,
        // authentication enforced. (Not "a schema-valid request is accepted": a purchase needs Apple's signature.)
        let checks = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,ignored_auth"
        for (bearer, filter) in [(token, ["--exclude-path-regex", "^/admin"]), (adminKey, ["--include-path-regex", "^/admin"])] {
            let run = try await Subprocess.run(schemathesis, ["run", "http://127.0.0.1:\(port)/openapi.json", "--checks", checks, "-H", "Authorization: Bearer \(bearer)",
                                                              "--max-examples", "20", "--workers", "1", "--seed", "1"] + filter)
            #expect(run.status == 0, "\(run.stdout.suffix(6000))")
        }
        try await Self.stop(process)
    }

    @Test("SIGTERM under load: the requests in flight are answered and iap serve exits 0 (its reconciliation job running)")
    func gracefulShutdown() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-sigterm-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let process = try await Self.start(["serve", "--port", String(port), "--data", data.path], probe: "http://127.0.0.1:\(port)/health")
        // Eight clients asking without pause; the signal lands while requests are in flight.
        let first = Flag()
        let load = Task {
            await withTaskGroup(of: (answered: Int, refused: Int).self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var (answered, refused) = (0, 0)
                        for _ in 0..<2_000 {
                            guard let (status, _) = try? await Self.request("http://127.0.0.1:\(port)/health") else { refused += 1; break }
                            if status == 200 { answered += 1; await first.set() } else { refused += 1 }
                        }
                        return (answered, refused)
                    }
                }
                return await group.reduce(into: (answered: 0, refused: 0)) { $0.answered += $1.answered; $0.refused += $1.refused }
            }
        }
        // The signal lands once the load is answered (a loaded machine can take a while to get there) and going on.
        for _ in 0..<300 where await !first.value { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(200))
        process.terminate()
        for _ in 0..<500 where process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!process.isRunning, "iap serve must exit on SIGTERM")
        if process.isRunning { kill(process.processIdentifier, SIGKILL) } else {
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "exit status \(process.terminationStatus)")
        }
        let (answered, _) = await load.value
        #expect(answered > 0, "the load ran before the signal")
    }

    @Test("Two iap serve processes on one PostgreSQL: 200 concurrent submissions of one transaction, one grant")
    func twoReplicas() async throws {
        let database = try PostgresDatabases.fresh("replicas")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-replicas-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let simulatorPort = try FreePort.pick()
        let simulator = try await Self.start(["simulator", "--port", String(simulatorPort), "--data", root.appendingPathComponent("sim").path],
                                             probe: "http://127.0.0.1:\(simulatorPort)/sim/root.cer")
        let ports = [try FreePort.pick(), try FreePort.pick()]
        var replicas: [Process] = []
        for (index, port) in ports.enumerated() {
            replicas.append(try await Self.start(
                ["serve", "--port", String(port), "--data", root.appendingPathComponent("server\(index)").path, "--database", database,
                 "--root", root.appendingPathComponent("sim/jws-root.pem").path],
                probe: "http://127.0.0.1:\(port)/health", environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret]))
        }
        let account = "replica-\(UUID().uuidString.prefix(8))"
        // The ports were free when picked; a process of another test taking one in between would answer instead.
        for port in ports {
            let (_, health) = try await Self.request("http://127.0.0.1:\(port)/health")
            #expect((try? health.decoded(as: HealthReply.self))?.store == "postgres", "port \(port) is answered by another server: \(health.utf8Text)")
        }
        let (orderStatus, order) = try await Self.request("http://127.0.0.1:\(ports[0])/v1/orders", method: "POST",
                                                          body: #"{"productId":"com.example.iapkit.coins.100"}"#, account: account)
        let token = try #require(try? order.decoded(as: OrderReply.self), "the order was answered \(orderStatus): \(order.utf8Text)").appAccountToken.lowercasedString
        _ = try await Self.request("http://127.0.0.1:\(simulatorPort)/sim/accounts", method: "POST", body: #"{"id":"store"}"#)
        let (_, bought) = try await Self.request("http://127.0.0.1:\(simulatorPort)/sim/purchases", method: "POST",
                                                 body: #"{"account":"store","device":"d","productId":"com.example.iapkit.coins.100","appAccountToken":"\#(token)"}"#)
        let jws = try #require(try bought.decoded(as: SimulatedPurchaseAnswer.self).signedTransaction)
        let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let (status, reply) = try await Self.request("http://127.0.0.1:\(ports[index % 2])/v1/purchases", method: "POST",
                                                                 body: #"{"signedTransaction":"\#(jws)"}"#, account: account)
                    return status == 200 ? (try? reply.decoded(as: PurchaseReply.self))?.outcome?.rawValue ?? "?" : "HTTP \(status)"
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == "granted" }.count == 1)
        #expect(outcomes.filter { $0 == "alreadyGranted" }.count == 199)
        for port in ports {
            let (_, owned) = try await Self.request("http://127.0.0.1:\(port)/v1/entitlements", account: account)
            #expect(try owned.decoded(as: EntitlementsReply.self).entitlements.balances["coins"] == 100)
        }
        for process in replicas + [simulator] { try await Self.stop(process) }
    }

    @Test("iap dev: the simulator's notification reaches the server, which trusts it and binds the purchase by its token; the dashboard opens with the key it made; the server judges on the simulator's clock")
    func dev() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-dev-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let (server, simulator) = (try FreePort.pick(), try FreePort.pick())
        let process = try await Self.start(["dev", "--data", data.path, "--server-port", String(server), "--simulator-port", String(simulator)],
                                           probe: "http://127.0.0.1:\(server)/health")
        defer { process.terminate() }
        let secret = try String(contentsOf: data.appendingPathComponent("server/auth-hs256-secret"), encoding: .utf8)
        let (_, order) = try await Self.request("http://127.0.0.1:\(server)/v1/orders", method: "POST",
                                                body: #"{"productId":"com.example.iapkit.premium"}"#, account: "dev-user", secret: secret)
        let token = try order.decoded(as: OrderReply.self).appAccountToken.lowercasedString
        _ = try await Self.request("http://127.0.0.1:\(simulator)/sim/accounts", method: "POST", body: #"{"id":"s"}"#)
        let (_, bought) = try await Self.request("http://127.0.0.1:\(simulator)/sim/purchases", method: "POST",
                                                 body: #"{"account":"s","device":"d","productId":"com.example.iapkit.premium","appAccountToken":"\#(token)"}"#)
        #expect(try bought.decoded(as: SimulatedPurchaseAnswer.self).status == "purchased")
        // The app never submits: ONE_TIME_CHARGE alone grants it.
        let (_, owned) = try await Self.request("http://127.0.0.1:\(server)/v1/entitlements", account: "dev-user", secret: secret)
        #expect(try owned.decoded(as: EntitlementsReply.self).entitlements.entitlements.map(\.name) == ["premium"])

        // The admin API and the dashboard are open, with the key iap dev made and printed.
        let adminKey = try String(contentsOf: data.appendingPathComponent("server/admin-key"), encoding: .utf8)
        #expect(try await Self.adminRequest("http://127.0.0.1:\(server)/admin/orders?state=granted", key: adminKey).0 == 200)
        #expect(try await Self.request("http://127.0.0.1:\(server)/dashboard/login").0 == 200)

        // The server judges on the simulator's clock: a plan bought after the store's clock moved on is owned.
        _ = try await Self.request("http://127.0.0.1:\(simulator)/sim/clock/advance", method: "POST", body: #"{"seconds": 864000}"#)
        let (_, monthlyOrder) = try await Self.request("http://127.0.0.1:\(server)/v1/orders", method: "POST",
                                                       body: #"{"productId":"com.example.iapkit.pro.monthly"}"#, account: "dev-user", secret: secret)
        let monthlyToken = try monthlyOrder.decoded(as: OrderReply.self).appAccountToken.lowercasedString
        let (_, subscribed) = try await Self.request("http://127.0.0.1:\(simulator)/sim/purchases", method: "POST",
                                                     body: #"{"account":"s","device":"d","productId":"com.example.iapkit.pro.monthly","appAccountToken":"\#(monthlyToken)"}"#)
        let signed = try #require(try subscribed.decoded(as: SimulatedPurchaseAnswer.self).signedTransaction)
        let (_, granted) = try await Self.request("http://127.0.0.1:\(server)/v1/purchases", method: "POST",
                                                  body: #"{"signedTransaction":"\#(signed)"}"#, account: "dev-user", secret: secret)
        #expect(try granted.decoded(as: PurchaseReply.self).entitlements.has("pro"), "\(granted.utf8Text)")
        let (_, later) = try await Self.request("http://127.0.0.1:\(server)/v1/entitlements", account: "dev-user", secret: secret)
        #expect(try later.decoded(as: EntitlementsReply.self).entitlements.has("pro"))
        try await Self.stop(process)
        #expect(!process.isRunning, "iap dev must exit on SIGTERM")
    }

    @Test("kill -9 in the middle of 50 concurrent purchases, restart on the same SQLite file, submit all again: each granted exactly once")
    func crashMidFlight() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-crash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let minted = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path,
                                              ["mint", "--data", root.appendingPathComponent("sim").path, "--count", "50"])
        let transactions = minted.stdout.split(separator: "\n").map(String.init)
        #expect(transactions.count == 50)
        let port = try FreePort.pick()
        let arguments = ["serve", "--port", String(port), "--data", root.appendingPathComponent("server").path,
                         "--root", root.appendingPathComponent("sim/jws-root.pem").path]
        var server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret])
        let url = "http://127.0.0.1:\(port)/v1/purchases"
        let inFlight = Task {
            await withTaskGroup(of: Void.self) { group in
                for jws in transactions {
                    group.addTask { _ = try? await Self.request(url, method: "POST", body: #"{"signedTransaction":"\#(jws)"}"#, account: "crashy") }
                }
            }
        }
        try await Task.sleep(for: .milliseconds(40))
        kill(server.processIdentifier, SIGKILL)
        await inFlight.value
        server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret])
        var outcomes: [String] = []
        for jws in transactions {
            let (status, reply) = try await Self.request(url, method: "POST", body: #"{"signedTransaction":"\#(jws)"}"#, account: "crashy")
            outcomes.append(status == 200 ? (try? reply.decoded(as: PurchaseReply.self))?.outcome?.rawValue ?? "?" : "HTTP \(status)")
        }
        #expect(outcomes.allSatisfy { $0 == "granted" || $0 == "alreadyGranted" }, "\(outcomes)")
        let (_, owned) = try await Self.request("http://127.0.0.1:\(port)/v1/entitlements", account: "crashy")
        #expect(try owned.decoded(as: EntitlementsReply.self).entitlements.balances["coins"] == 5000, "50 transactions × 100 coins, none twice, none lost")
        try await Self.stop(server)
    }

    @Test("kill -9 between the purchases and their webhooks: after a restart the backend gets each event once, signed")
    func webhooksAcrossKill() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-hooks-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let minted = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path,
                                              ["mint", "--data", root.appendingPathComponent("sim").path, "--count", "5"])
        let transactions = minted.stdout.split(separator: "\n").map(String.init)
        #expect(transactions.count == 5)
        let secret = "process-webhook-secret"
        let receiver = WebhookReceiver(secret: secret)
        try await receiver.serve { hooks in
            await receiver.setFailing(true)
            let port = try FreePort.pick()
            let arguments = ["serve", "--port", String(port), "--data", root.appendingPathComponent("server").path,
                             "--root", root.appendingPathComponent("sim/jws-root.pem").path]
            let environment = ["IAPKIT_AUTH_HS256_SECRET": Self.secret, "IAPKIT_WEBHOOK_URL": hooks, "IAPKIT_WEBHOOK_SECRET": secret]
            var server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: environment)
            for jws in transactions {
                let (status, _) = try await Self.request("http://127.0.0.1:\(port)/v1/purchases", method: "POST",
                                                         body: #"{"signedTransaction":"\#(jws)"}"#, account: "hooked")
                #expect(status == 200)
            }
            // The backend is down: the server tried, and the events wait in its ledger for their retry.
            for _ in 0..<200 where Set(await receiver.deliveries.map(\.eventId)).count < 5 { try await Task.sleep(for: .milliseconds(100)) }
            #expect(Set(await receiver.deliveries.map(\.eventId)).count == 5)
            try await Task.sleep(for: .milliseconds(500))
            kill(server.processIdentifier, SIGKILL)
            await receiver.setFailing(false)
            server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: environment)
            // The retry comes 10 s after the failed attempt (30 s, a claim's lease, if the kill fell between a send and its
            // record).
            for _ in 0..<600 where Set(await receiver.accepted.map(\.eventId)).count < 5 { try await Task.sleep(for: .milliseconds(100)) }
            try await Task.sleep(for: .seconds(2))
            let accepted = await receiver.accepted
            #expect(Set(accepted.map(\.eventId)).count == 5 && accepted.count == 5, "each once: \(accepted.map(\.eventId))")
            #expect(accepted.allSatisfy { $0.type == "CONSUMABLE_CREDIT" && $0.signatureValid && $0.body["accountId"] == "hooked" })
            try await Self.stop(server)
        }
    }

    @Test("kill -9 under a stream of purchases: after restart every purchase answered 200 is in the ledger, bound, credited once")
    func killUnderLoad() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-killload-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let minted = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path,
                                              ["mint", "--data", root.appendingPathComponent("sim").path, "--count", "600"])
        let transactions = minted.stdout.split(separator: "\n").map(String.init)
        #expect(transactions.count == 600)
        let port = try FreePort.pick()
        let arguments = ["serve", "--port", String(port), "--data", root.appendingPathComponent("server").path,
                         "--root", root.appendingPathComponent("sim/jws-root.pem").path]
        let environment = ["IAPKIT_AUTH_HS256_SECRET": Self.secret, "IAPKIT_ADMIN_KEY": "kill-load-admin-key-16"]
        var server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: environment)
        let url = "http://127.0.0.1:\(port)/v1/purchases"
        // Eight clients, each submitting its share one after another, until the server dies under them.
        let answered = Task {
            await withTaskGroup(of: [String].self) { group in
                for client in 0..<8 {
                    group.addTask {
                        var granted: [String] = []
                        for (index, jws) in transactions.enumerated() where index % 8 == client {
                            guard let (status, reply) = try? await Self.request(url, method: "POST", body: #"{"signedTransaction":"\#(jws)"}"#,
                                                                               account: "loaded-\(client)") else { break }
                            if status == 200, let reply = try? reply.decoded(as: PurchaseReply.self), reply.outcome == .granted, let id = reply.transactionId {
                                granted.append(id)
                            }
                        }
                        return granted
                    }
                }
                return await group.reduce(into: [String]()) { $0 += $1 }
            }
        }
        // Kill once a good part of the stream was answered (the server's own counter says so), with requests in flight.
        for _ in 0..<1500 {
            var scrape = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            scrape.setValue("Bearer kill-load-admin-key-16", forHTTPHeaderField: "Authorization")
            if let metrics = try? await URLSession.shared.data(for: scrape).0,
               let line = String(decoding: metrics, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix(#"iapkit_purchases_total{outcome="granted"}"#) }),
               let count = Double(line.split(separator: " ").last ?? ""), count >= 150 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(server.processIdentifier, SIGKILL)
        let granted = await answered.value
        #expect(granted.count > 20, "the kill came after purchases were answered (\(granted.count))")
        #expect(granted.count < 600, "the kill came while purchases were still coming (\(granted.count))")
        server = try await Self.start(arguments, probe: "http://127.0.0.1:\(port)/health", environment: environment)
        // Every purchase answered 200 is there, bound to the account that presented it.
        var byAccount: [String: Int] = [:]
        for id in granted {
            let (status, stored) = try await Self.adminRequest("http://127.0.0.1:\(port)/admin/transactions/\(id)", key: "kill-load-admin-key-16")
            #expect(status == 200, "transaction \(id) was answered 200 before the kill and is missing after it")
            if let account = (try? stored.decoded(as: TransactionRecord.self))?.accountId { byAccount[account, default: 0] += 1 }
        }
        #expect(byAccount.values.reduce(0, +) == granted.count)
        // None twice: each account's balance is 100 coins per transaction the ledger holds for it (answered or not).
        let (_, listed) = try await Self.adminRequest("http://127.0.0.1:\(port)/admin/transactions?limit=10000", key: "kill-load-admin-key-16")
        let stored = try listed.decoded(as: TransactionsReply.self).transactions
        #expect(stored.count >= granted.count)
        for client in 0..<8 {
            let account = "loaded-\(client)"
            let held = stored.filter { $0.accountId == account }.count
            let (_, owned) = try await Self.request("http://127.0.0.1:\(port)/v1/entitlements", account: account)
            #expect(try owned.decoded(as: EntitlementsReply.self).entitlements.balances["coins"] ?? 0 == Int64(held * 100), "\(account): \(held) transactions")
        }
        try await Self.stop(server)
    }

    static func adminRequest(_ url: String, key: String) async throws -> (Int, Data) {
        var request = URLRequest(url: URL(string: url)!)
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    @Test("iap orders lists open orders and settles one with a note, iap webhooks tests, lists and replays, through the admin API; a wrong key exits 1")
    func orders() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-orders-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let process = try await Self.start(["serve", "--port", String(port), "--data", data.path], probe: "http://127.0.0.1:\(port)/health",
                                           environment: ["IAPKIT_AUTH_HS256_SECRET": Self.secret, "IAPKIT_ADMIN_KEY": "orders-admin-key-16",
                                                         // A backend that refuses every connection: events wait, retried.
                                                         "IAPKIT_WEBHOOK_URL": "http://127.0.0.1:1/iapkit", "IAPKIT_WEBHOOK_SECRET": "orders-hook-secret-16+"])
        defer { process.terminate() }
        let (_, order) = try await Self.request("http://127.0.0.1:\(port)/v1/orders", method: "POST",
                                                body: #"{"productId":"com.example.iapkit.premium"}"#, account: "olga")
        let orderId = try order.decoded(as: OrderReply.self).orderId
        let binary = try IAPSimulatorProcessTests.binary().path
        let server = ["--server", "http://127.0.0.1:\(port)", "--admin-key", "orders-admin-key-16"]
        let listed = try await Subprocess.run(binary, ["orders", "list", "--state", "created"] + server)
        #expect(listed.status == 0 && listed.stdout.contains(orderId), "\(listed.stderr)")
        let settled = try await Subprocess.run(binary, ["orders", "settle", orderId, "--note", "refunded by support"] + server)
        #expect(settled.status == 0 && settled.stdout.contains("settled"), "\(settled.stderr)")
        let refused = try await Subprocess.run(binary, ["orders", "list", "--server", "http://127.0.0.1:\(port)", "--admin-key", "wrong"])
        #expect(refused.status == 1 && refused.stderr.contains("401"))

        // Webhooks: a TEST event queued (the backend refuses: it waits in the outbox), listed, replayed.
        let queued = try await Subprocess.run(binary, ["webhooks", "test"] + server)
        let eventId = try #require(try? queued.stdout.decoded(as: WebhookTestReply.self), "\(queued.stderr)").queued
        let pending = try await Subprocess.run(binary, ["webhooks", "list", "--state", "pending"] + server)
        #expect(pending.status == 0 && pending.stdout.contains(eventId) && pending.stdout.contains(#""configured":true"#), "\(pending.stdout)")
        let replayed = try await Subprocess.run(binary, ["webhooks", "replay", eventId] + server)
        #expect(replayed.status == 0 && replayed.stdout.contains(eventId), "\(replayed.stderr)")
        let unknown = try await Subprocess.run(binary, ["webhooks", "replay", "NOPE.1"] + server)
        #expect(unknown.status == 1 && unknown.stderr.contains("404"))
        try await Self.stop(process)
    }
}

/// Set once, read many times, across tasks.
actor Flag {
    private(set) var value = false
    func set() { value = true }
}
