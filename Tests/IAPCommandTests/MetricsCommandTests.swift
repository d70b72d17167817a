import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import StoreSimulator
import Testing

/// The operator's shell over a running `iap dev`: `iap metrics`, `iap orders list` as tables, `iap dev token`.
@Suite("iap metrics, iap orders list and iap dev token against iap dev", .timeLimit(.minutes(3)))
struct MetricsCommandTests {
    /// An `iap dev` world with its data directory, its ports and the secrets it made there.
    struct Dev {
        let data: URL
        let server: Int
        let simulator: Int
        let process: Process
        let secret: String
        let adminKey: String
        /// What `iap dev` printed on stderr while starting.
        let log: URL

        static func start() async throws -> Dev {
            let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-metrics-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            let (server, simulator) = (try FreePort.pick(), try FreePort.pick())
            let log = data.appendingPathComponent("dev-stderr.log")
            let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path,
                                               ["dev", "--data", data.appendingPathComponent("world").path, "--server-port", String(server),
                                                "--simulator-port", String(simulator)], stderrFile: log)
            // Up to 2 minutes while it runs: `iap dev` starts a simulator and a server, and at the start of a full run on
            // two cores (every suite starting at once) it once took more than 30 s.
            var up = false
            for _ in 0..<1_200 where process.isRunning {
                if (try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(server)/health")!)) != nil { up = true; break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let serverData = data.appendingPathComponent("world/server")
            guard up, let secret = try? String(contentsOf: serverData.appendingPathComponent("auth-hs256-secret"), encoding: .utf8),
                  let adminKey = try? String(contentsOf: serverData.appendingPathComponent("admin-key"), encoding: .utf8) else {
                let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                let exited = !process.isRunning
                try await IAPServeProcessTests.stop(process)
                try? FileManager.default.removeItem(at: data)
                throw DevDidNotStart(up: up, exited: exited, stderr: said)
            }
            return Dev(data: data, server: server, simulator: simulator, process: process, secret: secret, adminKey: adminKey, log: log)
        }

        struct DevDidNotStart: Error, CustomStringConvertible {
            var up: Bool
            /// Whether `iap dev` had exited by the time the wait ended (it never answered, or it answered and then ended).
            var exited: Bool
            var stderr: String
            var description: String {
                let what = switch (up, exited) {
                case (true, _): "iap dev answered, but its server wrote no secret or admin key"
                case (false, true): "iap dev exited before its server answered /health"
                case (false, false): "iap dev did not answer /health within 2 minutes"
                }
                return what + "; it said: " + stderr.suffix(2_000)
            }
        }

        var serverURL: String { "http://127.0.0.1:\(server)" }
        var admin: [String] { ["--server", serverURL, "--admin-key", adminKey] }

        /// What an app does: an order for `account`, paid in the simulator by a store account of the same name, the
        /// signed transaction submitted.
        func buy(_ product: String, for account: String) async throws {
            let (_, order) = try await IAPServeProcessTests.request("\(serverURL)/v1/orders", method: "POST", body: #"{"productId":"\#(product)"}"#,
                                                                    account: account, secret: secret)
            let token = try order.decoded(as: OrderReply.self).appAccountToken.lowercasedString
            _ = try await IAPServeProcessTests.request("http://127.0.0.1:\(simulator)/sim/accounts", method: "POST", body: #"{"id":"\#(account)"}"#)
            let (_, bought) = try await IAPServeProcessTests.request(
                "http://127.0.0.1:\(simulator)/sim/purchases", method: "POST",
                body: #"{"account":"\#(account)","device":"d","productId":"\#(product)","appAccountToken":"\#(token)"}"#)
            let signed = try #require(try bought.decoded(as: SimulatedPurchaseAnswer.self).signedTransaction, "\(bought.utf8Text)")
            let (status, granted) = try await IAPServeProcessTests.request("\(serverURL)/v1/purchases", method: "POST",
                                                                           body: #"{"signedTransaction":"\#(signed)"}"#, account: account, secret: secret)
            #expect(status == 200, "\(granted.utf8Text)")
        }

        func stop() async throws {
            try await IAPServeProcessTests.stop(process)
            try? FileManager.default.removeItem(at: data)
        }
    }

    static func iap(_ arguments: [String]) async throws -> IAPCommandTests.Run {
        try await IAPCommandTests.iap(arguments)
    }

    /// The table's line that begins with `label`, cut into its cells (two spaces or more apart).
    static func row(_ label: String, in text: String) -> [String]? {
        text.split(separator: "\n").map(String.init).first { $0.hasPrefix(label) }.map {
            $0.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    static func today() -> String { Date().formatted(.iso8601.year().month().day()) }

    @Test("iap metrics overview, series and cohorts print tables with what was bought (and the JSON with --json); a refused request says why")
    func metrics() async throws {
        let dev = try await Dev.start()
        do {
            // 39.99 USD a year for ann, 9.99 USD once for bea: one subscription, two transactions, 49.98 USD.
            try await dev.buy("com.example.iapkit.pro.yearly", for: "ann")
            try await dev.buy("com.example.iapkit.premium", for: "bea")
            // iap dev's purchases are Sandbox; the server counts Production unless asked.
            let sandbox = dev.admin + ["--environment", "Sandbox"]

            let overview = try await Self.iap(["metrics", "overview"] + sandbox)
            #expect(overview.status == 0, "\(overview.stderr)")
            #expect(overview.stdout.hasPrefix("at \(Self.today()) (Sandbox, all products)"), "\(overview.stdout)")
            #expect(Self.row("active subscriptions", in: overview.stdout) == ["active subscriptions", "1"], "\(overview.stdout)")
            #expect(Self.row("active trials", in: overview.stdout) == ["active trials", "0"], "\(overview.stdout)")
            let usd = try #require(Self.row("USD", in: overview.stdout), "\(overview.stdout)")
            // currency, MRR, gross, refunded, net, transactions, refunds.
            #expect(usd.count == 7 && usd[2] == "49.98 USD" && usd[3] == "0.00 USD" && usd[4] == "49.98 USD" && usd[5] == "2" && usd[6] == "0", "\(usd)")

            let json = try await Self.iap(["metrics", "overview", "--json"] + sandbox)
            #expect(json.status == 0, "\(json.stderr)")
            let reply = try json.stdout.decoded(as: MetricsOverviewReply.self)
            #expect(reply.activeSubscriptions == 1 && reply.environment == "Sandbox")
            #expect(reply.revenue == [RevenueSummary(currency: "USD", gross: 49_980, refunded: 0, net: 49_980, transactions: 2, refunds: 0)])
            let mrr = try #require(reply.mrr.first { $0.currency == "USD" })
            // A year's 39.99 spread over twelve months, as the table shows it.
            #expect((3332...3333).contains(mrr.amount) && usd[1] == "\(mrr.amount / 1000).\(mrr.amount % 1000) USD", "\(usd[1]) for \(mrr.amount)")

            // Production holds nothing: the same command says so rather than printing an empty table.
            let production = try await Self.iap(["metrics", "overview", "--environment", "Production"] + dev.admin)
            #expect(production.status == 0 && Self.row("active subscriptions", in: production.stdout)?.last == "0", "\(production.stdout)")
            #expect(production.stdout.contains("nothing paid"), "\(production.stdout)")

            // Revenue by day: today's row holds both purchases; a day before it nothing.
            let series = try await Self.iap(["metrics", "series", "--metric", "revenue"] + sandbox)
            #expect(series.status == 0, "\(series.stderr)")
            #expect(series.stdout.hasPrefix("revenue by day (Sandbox, all products)"), "\(series.stdout)")
            let header = try #require(Self.row("start", in: series.stdout), "\(series.stdout)")
            let todayRow = try #require(Self.row(Self.today(), in: series.stdout), "\(series.stdout)")
            #expect(header.count == todayRow.count, "\(header) \(todayRow)")
            let gross = try #require(header.firstIndex(of: "gross"), "\(header)")
            #expect(todayRow[gross] == "49.98 USD", "\(todayRow)")
            #expect(series.stdout.split(separator: "\n").count >= 30, "the last 30 days, a row each: \(series.stdout)")

            // --from and --to as days: one day, today, to tomorrow (exclusive).
            let tomorrow = Date().addingTimeInterval(86_400).formatted(.iso8601.year().month().day())
            let oneDay = try await Self.iap(["metrics", "series", "--metric", "purchases", "--from", Self.today(), "--to", tomorrow] + sandbox)
            #expect(oneDay.status == 0, "\(oneDay.stderr)")
            #expect(Self.row(Self.today(), in: oneDay.stdout) == [Self.today(), tomorrow, "1"], "the one-time purchase: \(oneDay.stdout)")

            // Nobody left: no column to show, said so.
            let churn = try await Self.iap(["metrics", "series", "--metric", "churn", "--interval", "week"] + sandbox)
            #expect(churn.status == 0 && churn.stdout.contains("churn by week (Sandbox, all products)\n\n  nothing counted from "), "\(churn.stdout)")

            let cohorts = try await Self.iap(["metrics", "cohorts", "--months", "2"] + sandbox)
            #expect(cohorts.status == 0, "\(cohorts.stderr)")
            let month = String(Self.today().prefix(8)) + "01"
            // This month has not ended: no retention figure yet, ann's year alone in its size (bea's purchase is no subscription).
            #expect(Self.row("month", in: cohorts.stdout) == ["month", "size"], "\(cohorts.stdout)")
            #expect(Self.row(month, in: cohorts.stdout) == [month, "1"], "\(cohorts.stdout)")

            // Refused: the server's code and message, exit 1.
            let unknown = try await Self.iap(["metrics", "series", "--metric", "happiness"] + sandbox)
            #expect(unknown.status == 1 && unknown.stdout.isEmpty)
            #expect(unknown.stderr.contains("error: HTTP 400") && unknown.stderr.contains("metric is one of"), "\(unknown.stderr)")
            let locked = try await Self.iap(["metrics", "overview", "--server", dev.serverURL, "--admin-key", "not-the-key"])
            #expect(locked.status == 1 && locked.stderr.contains("error: HTTP 401"), "\(locked.stderr)")
            let badDay = try await Self.iap(["metrics", "overview", "--from", "2026-02-31"] + sandbox)
            #expect(badDay.status != 0 && badDay.stderr.contains("2026-02-31"), "\(badDay.stderr)")
        } catch {
            try await dev.stop()
            throw error
        }
        try await dev.stop()
    }

    @Test("iap dev token signs in any account of the dev world; iap dev says how; iap orders list prints a table, --json the answer")
    func tokenAndOrders() async throws {
        let dev = try await Dev.start()
        do {
            let world = dev.data.appendingPathComponent("world").path
            let started = try String(contentsOf: dev.log, encoding: .utf8)
            #expect(started.contains("a token for another account: iap dev token <accountId> --data \(world)"), "\(started)")

            let minted = try await Self.iap(["dev", "token", "other-account", "--data", world])
            #expect(minted.status == 0, "\(minted.stderr)")
            let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            var request = URLRequest(url: URL(string: "\(dev.serverURL)/v1/entitlements")!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (body, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(body.utf8Text)")
            #expect(try body.decoded(as: EntitlementsReply.self).entitlements.accountId == "other-account")
            let nowhere = try await Self.iap(["dev", "token", "other-account", "--data", dev.data.appendingPathComponent("no-world").path])
            #expect(nowhere.status != 0 && nowhere.stdout.isEmpty && nowhere.stderr.contains("no iap dev world"), "\(nowhere.stderr)")

            try await dev.buy("com.example.iapkit.premium", for: "other-account")
            let listed = try await Self.iap(["orders", "list", "--state", "granted"] + dev.admin)
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(Self.row("order", in: listed.stdout)?.prefix(5) == ["order", "account", "product", "state", "transaction"], "\(listed.stdout)")
            let orders = try await Self.iap(["orders", "list", "--state", "granted", "--json"] + dev.admin)
            let order = try #require(try orders.stdout.decoded(as: AdminOrdersReply.self).orders.first, "\(orders.stdout)")
            let row = try #require(Self.row(order.orderId, in: listed.stdout), "\(listed.stdout)")
            #expect(row.prefix(5) == [order.orderId, "other-account", "com.example.iapkit.premium", "granted", order.transactionId ?? "?"], "\(row)")
            let none = try await Self.iap(["orders", "list", "--state", "stuck"] + dev.admin)
            #expect(none.status == 0 && none.stdout == "no orders stuck\n", "\(none.stdout)")
        } catch {
            try await dev.stop()
            throw error
        }
        try await dev.stop()
    }
}
