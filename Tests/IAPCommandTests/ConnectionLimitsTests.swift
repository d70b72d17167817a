import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IAPTestSupport
import PurchaseAPI
@testable import PurchaseServer
import Testing

/// `iap serve` as a process, spoken to over raw sockets on loopback: what a client that sends nothing, too little too
/// slowly, or too much gets (issue 29, finding 3). Each test configures short limits through the environment, as an
/// operator would, so that it takes a few seconds.
@Suite("iap serve's connection limits, over raw sockets", .timeLimit(.minutes(3)))
struct ConnectionLimitsTests {
    static let secret = IAPServeProcessTests.secret

    /// A running `iap serve` with `environment` (its data directory removed by ``stop()``).
    struct Server {
        let process: Process
        let port: Int
        let data: URL

        static func start(_ environment: [String: String] = [:]) async throws -> Server {
            // A port picked free can be taken by another test's process before this one binds it; the server then exits
            // and the probe may reach the other one. So the process must still be running once answered; else again.
            for _ in 0..<3 {
                let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-connections-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
                let port = try FreePort.pick()
                var environment = environment
                environment["IAPKIT_AUTH_HS256_SECRET"] = ConnectionLimitsTests.secret
                let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path,
                                                   ["serve", "--port", String(port), "--data", data.path, "--log-level", "warning"],
                                                   environment: environment, stderrFile: data.appendingPathComponent("stderr.log"))
                let server = Server(process: process, port: port, data: data)
                // Up to 30 s: with the whole suite on two cores, a start can be slow. Probed with a connection that
                // closes, so that no probe holds a place under the cap.
                var answered = false
                for _ in 0..<300 where process.isRunning && !answered {
                    if let probe = try? RawConnection(port: port), probe.send("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
                       await probe.readUntilClosed(within: .seconds(5)).text.hasPrefix("HTTP/1.1 200") {
                        answered = true
                    } else {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                }
                try await Task.sleep(for: .milliseconds(50))
                if answered && process.isRunning { return server }
                try await server.stop()
                guard answered else { break }
            }
            throw CocoaError(.fileReadUnknown)
        }

        /// Runs `body` with a server started with `environment`, stopping it however `body` ends. A failure says whether
        /// the server was still running, and what it last wrote to stderr.
        static func run(_ environment: [String: String] = [:], _ body: (Server) async throws -> Void) async throws {
            let server = try await start(environment)
            do {
                try await body(server)
            } catch {
                let stderr = (try? String(contentsOf: server.data.appendingPathComponent("stderr.log"), encoding: .utf8)) ?? ""
                Issue.record("the server \(server.process.isRunning ? "was running" : "had exited (\(server.process.terminationStatus))"); its stderr ends: \(stderr.suffix(2_000))")
                try await server.stop()
                throw error
            }
            try await server.stop()
        }

        func stop() async throws {
            try await IAPServeProcessTests.stop(process)
            try? FileManager.default.removeItem(at: data)
        }

        func connect(from source: String? = nil) throws -> RawConnection { try RawConnection(port: port, from: source) }

        /// A connection from `source` whose `GET /health` was answered 200 (so it was admitted), keep-alive; retried a
        /// while, since a place the server freed may not be counted free yet.
        func served(from source: String? = nil) async throws -> RawConnection? {
            for _ in 0..<50 {
                let connection = try connect(from: source)
                if connection.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"),
                   await connection.read(within: .seconds(5), until: { $0.contains("\"status\":\"ok\"") || $0.contains("too_many") })
                    .text.hasPrefix("HTTP/1.1 200") {
                    return connection
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return nil
        }
    }

    /// Begins a request on `connection` without finishing its head: from then on it has a request under way.
    static func begin(_ connection: RawConnection) -> Bool {
        connection.send("GET /health HTTP/1.1\r\nHost: t\r\n")
    }

    static func token(_ account: String) async throws -> String {
        try await AccountAuthenticator.issueToken(account: account, secret: secret)
    }

    /// The JSON error body's code of an answer.
    static func errorCode(_ answer: String) -> String? {
        guard let start = answer.range(of: "\r\n\r\n")?.upperBound,
              let body = try? String(answer[start...]).decoded(as: ErrorBody.self) else { return nil }
        return body.error.code.rawValue
    }

    @Test("The defaults are safe: idle ≤ 30 s, a header and a body timeout, a cap under the usual 1,024 descriptors")
    func defaults() throws {
        let limits = ServerConfiguration().connections
        #expect(limits.idleTimeoutSeconds <= 30 && limits.idleTimeoutSeconds > 0)
        #expect(limits.headerTimeoutSeconds <= 10 && limits.bodyTimeoutSeconds <= 30)
        #expect(limits.maxConnections + ConnectionLimits.descriptorReserve <= 1_024)
        #expect(limits.maxConnectionsPerClient <= limits.maxConnections / 2 && limits.maxConnectionsPerClient >= 128)
        // A 300 KB receipt at 20 kbit/s (EDGE) is read: it makes progress well inside the timeout, and ends in time.
        let edgeBytesPerSecond = 20_000.0 / 8
        #expect(Double(limits.bodyProgressBytes) / edgeBytesPerSecond < limits.bodyTimeoutSeconds / 4)
        #expect(300_000 / edgeBytesPerSecond < limits.bodyMaxSeconds && limits.bodyMaxSeconds <= 600)
    }

    @Test("The limits come from the file and from IAPKIT_* variables; impossible values are refused naming the key")
    func configuration() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-connections-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"connections": {"idleTimeoutSeconds": 5, "maxConnections": 100}}"#.utf8).write(to: file)
        let fromFile = try ServerConfiguration.load(file: file.path, environment: [:]).connections
        #expect(fromFile.idleTimeoutSeconds == 5 && fromFile.maxConnections == 100 && fromFile.headerTimeoutSeconds == 10)
        let layered = try ServerConfiguration.load(file: file.path, environment: [
            "IAPKIT_IDLE_TIMEOUT_SECONDS": "2.5", "IAPKIT_HEADER_TIMEOUT_SECONDS": "3", "IAPKIT_BODY_TIMEOUT_SECONDS": "4",
            "IAPKIT_MAX_CONNECTIONS": "64", "IAPKIT_MAX_CONNECTIONS_PER_CLIENT": "8", "IAPKIT_BODY_PROGRESS_BYTES": "512",
            "IAPKIT_BODY_MAX_SECONDS": "60",
        ]).connections
        #expect(layered.idleTimeoutSeconds == 2.5 && layered.headerTimeoutSeconds == 3 && layered.bodyTimeoutSeconds == 4 && layered.maxConnections == 64)
        #expect(layered.maxConnectionsPerClient == 8 && layered.bodyProgressBytes == 512 && layered.bodyMaxSeconds == 60)
        for (name, value, says) in [("IAPKIT_IDLE_TIMEOUT_SECONDS", "soon", "IAPKIT_IDLE_TIMEOUT_SECONDS must be a number"),
                                    ("IAPKIT_MAX_CONNECTIONS", "0", "connections.maxConnections"),
                                    ("IAPKIT_BODY_TIMEOUT_SECONDS", "0", "connections.bodyTimeoutSeconds"),
                                    ("IAPKIT_BODY_TIMEOUT_SECONDS", "0.5", "connections.bodyTimeoutSeconds must be 1 to 3600"),
                                    ("IAPKIT_HEADER_TIMEOUT_SECONDS", "0.9", "connections.headerTimeoutSeconds must be 1 to 3600"),
                                    ("IAPKIT_MAX_CONNECTIONS", "100001", "connections.maxConnections must be 1 to 100000"),
                                    ("IAPKIT_HEADER_TIMEOUT_SECONDS", "86400", "connections.headerTimeoutSeconds"),
                                    ("IAPKIT_MAX_CONNECTIONS_PER_CLIENT", "0", "connections.maxConnectionsPerClient"),
                                    ("IAPKIT_BODY_PROGRESS_BYTES", "0", "connections.bodyProgressBytes"),
                                    ("IAPKIT_BODY_MAX_SECONDS", "0", "connections.bodyMaxSeconds")] {
            let error = #expect(throws: ConfigurationError.self) { try ServerConfiguration.load(file: nil, environment: [name: value]) }
            #expect(error?.description.contains(says) == true, "\(name)=\(value): \(String(describing: error))")
        }
        // Each valid, together asking more than 64 KiB/s of a body: refused, both keys named.
        let greedy = #expect(throws: ConfigurationError.self) {
            try ServerConfiguration.load(file: nil, environment: ["IAPKIT_BODY_PROGRESS_BYTES": "1048576", "IAPKIT_BODY_TIMEOUT_SECONDS": "10"])
        }
        #expect(greedy?.description.contains("connections.bodyProgressBytes") == true
                && greedy?.description.contains("connections.bodyTimeoutSeconds") == true, "\(String(describing: greedy))")
        // Exactly 64 KiB/s, and the 1 s floors, are accepted.
        let edge = try ServerConfiguration.load(file: nil, environment: ["IAPKIT_BODY_PROGRESS_BYTES": "65536", "IAPKIT_BODY_TIMEOUT_SECONDS": "1",
                                                                         "IAPKIT_HEADER_TIMEOUT_SECONDS": "1"]).connections
        #expect(edge.bodyProgressBytes == 65_536 && edge.bodyTimeoutSeconds == 1 && edge.headerTimeoutSeconds == 1)
        try Data(#"{"connections": {"idleTimeout": 5}}"#.utf8).write(to: file)
        let unknown = #expect(throws: ConfigurationError.self) { try ServerConfiguration.load(file: file.path, environment: [:]) }
        #expect(unknown?.description.contains("connections.idleTimeout") == true, "\(String(describing: unknown))")
    }

    @Test("A connection that sends nothing is closed after the idle timeout, and so is one idle after its answer")
    func idleConnectionClosed() async throws {
        try await Server.run(["IAPKIT_IDLE_TIMEOUT_SECONDS": "1"]) { server in
            let silent = try server.connect()
            let nothing = await silent.readUntilClosed(within: .seconds(10))
            let took = nothing.at - silent.connectedAt
            #expect(nothing.closed && nothing.text.isEmpty, "closed without a word: \(nothing)")
            #expect(took >= .milliseconds(800) && took < .seconds(4), "closed after \(took), configured 1 s")

            let served = try server.connect()
            #expect(served.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"))
            let answered = await served.readUntilClosed(within: .seconds(10))
            #expect(answered.closed && answered.text.hasPrefix("HTTP/1.1 200"), "answered, then closed when idle: \(answered)")
        }
    }

    @Test("A body declared 99,999,999,999 bytes on POST /v1/purchases is answered 413 within 3 s, token or not, and the connection closed")
    func declaredBodyOverLimit() async throws {
        // The default limits: the answer owes nothing to a short timeout.
        try await Server.run { server in
            for authorization in ["", "Authorization: Bearer \(try await Self.token("al"))\r\n"] {
                let connection = try server.connect()
                let sent = ContinuousClock.now
                #expect(connection.send("POST /v1/purchases HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\(authorization)"
                                        + "Content-Length: 99999999999\r\n\r\n{\"signedTransaction\":\""))
                let answer = await connection.readUntilClosed(within: .seconds(10))
                let took = answer.at - sent
                #expect(answer.text.hasPrefix("HTTP/1.1 413"), "\(answer)")
                #expect(Self.errorCode(answer.text) == "too_large" && answer.text.lowercased().contains("connection: close"), "\(answer)")
                #expect(answer.closed && took < .seconds(3), "answered and closed after \(took)")
            }
            // Under the server's largest body but over the route's own (64 KiB for an order): refused from the header too.
            let order = try server.connect()
            let sent = ContinuousClock.now
            #expect(order.send("POST /v1/orders HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(try await Self.token("al"))\r\n"
                               + "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"))
            let answer = await order.readUntilClosed(within: .seconds(10))
            #expect(answer.text.hasPrefix("HTTP/1.1 413") && Self.errorCode(answer.text) == "too_large" && answer.closed, "\(answer)")
            #expect(answer.at - sent < .seconds(3))
        }
    }

    @Test("At the cap with every connection busy, one more is answered 503 too_many_connections and closed; the open ones are still served")
    func connectionCap() async throws {
        try await Server.run(["IAPKIT_MAX_CONNECTIONS": "4", "IAPKIT_HEADER_TIMEOUT_SECONDS": "30"]) { server in
            var open: [RawConnection] = []
            for index in 0..<4 {
                let connection = try await server.served()
                #expect(connection != nil, "connection \(index) is under the cap")
                if let connection { open.append(connection) }
            }
            try #require(open.count == 4)
            // Each has a request under way: none may be evicted.
            for connection in open { #expect(Self.begin(connection)) }
            try await Task.sleep(for: .milliseconds(300))  // for the server to read them
            let refused = try server.connect()
            _ = refused.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            let answer = await refused.readUntilClosed(within: .seconds(5))
            #expect(answer.text.hasPrefix("HTTP/1.1 503") && Self.errorCode(answer.text) == "too_many_connections", "\(answer)")
            #expect(answer.text.lowercased().contains("connection: close") && answer.closed && answer.at - refused.connectedAt < .seconds(3))

            #expect(open[0].send("\r\n"))
            let again = await open[0].read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") }
            #expect(again.text.hasPrefix("HTTP/1.1 200") && !again.closed, "an open connection is still served: \(again)")

            // A place freed is taken again.
            open.removeLast().close()
            var admitted = false
            for _ in 0..<30 where !admitted {
                try await Task.sleep(for: .milliseconds(100))
                let connection = try server.connect()
                _ = connection.send("GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                admitted = await connection.readUntilClosed(within: .seconds(5)).text.hasPrefix("HTTP/1.1 200")
            }
            #expect(admitted, "a connection is admitted once another closed")
        }
    }

    @Test("At the cap a new connection takes the place of the one idle longest, and is served; busy ones are kept")
    func capEvictsIdle() async throws {
        try await Server.run(["IAPKIT_MAX_CONNECTIONS": "4", "IAPKIT_HEADER_TIMEOUT_SECONDS": "30"]) { server in
            var open: [RawConnection] = []
            for index in 0..<4 {
                let connection = try await server.served()
                #expect(connection != nil, "connection \(index) is under the cap")
                if let connection { open.append(connection) }
                try await Task.sleep(for: .milliseconds(50))
            }
            try #require(open.count == 4)
            // open[1] has a request under way; open[0] is idle longest, then open[2], then open[3].
            #expect(Self.begin(open[1]))
            try await Task.sleep(for: .milliseconds(300))  // for the server to read it
            for round in 0..<2 {
                let newcomer = try server.connect()
                #expect(newcomer.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"))
                let answer = await newcomer.read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") || $0.contains("too_many") }
                #expect(answer.text.hasPrefix("HTTP/1.1 200") && !answer.closed, "newcomer \(round) is served: \(answer)")
                let victim = open[round == 0 ? 0 : 2]
                let closed = await victim.readUntilClosed(within: .seconds(5))
                #expect(closed.closed && closed.text.isEmpty, "the connection idle longest is closed for newcomer \(round): \(closed)")
                open.append(newcomer)
            }
            // The busy one was kept, and its request is answered.
            #expect(open[1].send("\r\n"))
            let busy = await open[1].read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") }
            #expect(busy.text.hasPrefix("HTTP/1.1 200") && !busy.closed, "\(busy)")
        }
    }

    /// Whether `text` holds a whole HTTP answer: its head, and as many bytes of body as its `Content-Length` says.
    static func whole(_ text: String) -> Bool {
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let length = text[..<end.lowerBound].split(separator: "\r\n").lazy
            .compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        return text[end.upperBound...].utf8.count >= length
    }

    static let adminKey = "connection-limits-admin"

    @Test("A request on a connection evicted at the same instant is answered whole once applied: no order is created without its answer")
    func evictionRacesRequest() async throws {
        let cap = 16
        try await Server.run(["IAPKIT_MAX_CONNECTIONS": String(cap), "IAPKIT_HEADER_TIMEOUT_SECONDS": "30", "IAPKIT_ADMIN_KEY": Self.adminKey]) { server in
            let json = #"{"productId":"com.example.iapkit.premium"}"#
            // Sent as one segment: read whole at once, so its connection is busy from then on (no 503 for a request
            // still arriving can explain an order without its answer).
            let order = "POST /v1/orders HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(try await Self.token("racer"))\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)"
            var (answered, unanswered, evictedAfterAnswer) = (0, 0, 0)
            for round in 0..<6 {
                // An order on each idle connection, and at the same moment a newcomer, which takes the place of the one
                // idle longest: the one whose order was just sent, or the next. Each order races an eviction.
                let (victims, newcomers) = try await Self.race(server, cap: cap, round: round, sending: order,
                                                               newcomer: "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                for (index, victim) in victims.enumerated() {
                    let reply = await victim.read(within: .seconds(10)) { Self.whole($0) }
                    if reply.text.isEmpty {
                        // Evicted before its order was read: closed without a word, and nothing applied (counted below).
                        #expect(reply.closed, "round \(round), connection \(index): neither answered nor closed")
                        unanswered += 1
                    } else {
                        #expect(reply.text.hasPrefix("HTTP/1.1 201") && Self.whole(reply.text), "round \(round), connection \(index): \(reply)")
                        if reply.text.hasPrefix("HTTP/1.1 201") { answered += 1 }
                        if await victim.readUntilClosed(within: .milliseconds(100)).closed { evictedAfterAnswer += 1 }
                    }
                }
                for newcomer in newcomers { _ = await newcomer.readUntilClosed(within: .seconds(5)) }
                for connection in victims + newcomers { connection.close() }
            }
            // Every order the server created was answered: none applied with its answer lost.
            let admin = try server.connect()
            #expect(admin.send("GET /admin/orders?state=created HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(Self.adminKey)\r\n"
                               + "Connection: close\r\n\r\n"))
            let listed = await admin.readUntilClosed(within: .seconds(10))
            let body = listed.text.range(of: "\r\n\r\n").map { String(listed.text[$0.upperBound...]) } ?? ""
            let orders = (try? body.decoded(as: AdminOrdersReply.self))?.orders
            let created = orders?.filter { $0.accountId == "racer" }.count
            let tally = "answered: \(answered), of which \(evictedAfterAnswer) then closed for a newcomer; \(unanswered) closed without a word"
            #expect(created == answered, "orders created: \(String(describing: created)); \(tally)")
        }
    }

    /// The cap filled with idle connections (oldest first); then `sending` on each, each followed at once by a
    /// newcomer sending `newcomer`, whose admission evicts the connection idle longest.
    static func race(_ server: Server, cap: Int, round: Int, sending: String, newcomer request: String) async throws
        -> (victims: [RawConnection], newcomers: [RawConnection]) {
        var victims: [RawConnection] = []
        for _ in 0..<cap {
            if let connection = try await server.served() { victims.append(connection) }
        }
        try #require(victims.count == cap, "round \(round): the cap filled")
        var newcomers: [RawConnection] = []
        for victim in victims {
            #expect(victim.send(sending))
            let newcomer = try server.connect()
            _ = newcomer.send(request)
            newcomers.append(newcomer)
        }
        return (victims, newcomers)
    }

    @Test("A connection evicted while its request is still arriving is answered 503 and closed: open connections never exceed the cap")
    func evictionRacesArrivingRequest() async throws {
        let cap = 16
        try await Server.run(["IAPKIT_MAX_CONNECTIONS": String(cap), "IAPKIT_HEADER_TIMEOUT_SECONDS": "30"]) { server in
            // A head and the first byte of a body that never comes (until the test ends).
            let begun = "POST /v1/orders HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(try await Self.token("slow"))\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            var told = 0
            for round in 0..<3 {
                // Each begun request races a newcomer's eviction of the connection idle longest.
                let (victims, newcomers) = try await Self.race(server, cap: cap, round: round, sending: begun,
                                                               newcomer: "GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
                try await Task.sleep(for: .seconds(1))
                var open = 0
                for (index, victim) in victims.enumerated() {
                    let reply = await victim.read(within: .milliseconds(20)) { Self.whole($0) }
                    if !reply.text.isEmpty {
                        // Evicted with its request still arriving: told at once, and closed.
                        #expect(reply.text.hasPrefix("HTTP/1.1 503") && Self.errorCode(reply.text) == "too_many_connections"
                                && Self.whole(reply.text), "round \(round), connection \(index): \(reply)")
                        told += 1
                    }
                    if !reply.closed, !(await victim.readUntilClosed(within: .milliseconds(20)).closed) { open += 1 }
                }
                for newcomer in newcomers where !(await newcomer.readUntilClosed(within: .milliseconds(20)).closed) { open += 1 }
                // Those still open, a request under way or served and idle: the cap holds them all.
                #expect(open <= cap, "round \(round): \(open) connections open, over the cap of \(cap)")
                for connection in victims + newcomers { connection.close() }
                try await Task.sleep(for: .milliseconds(200))  // for the server to see them closed
            }
            _ = told  // how many raced (0 to all): the bound holds whichever way each race went
        }
    }

    @Test("A client at its own cap with every connection busy is refused (503) while another client is served; a trusted proxy is exempt")
    func perClientCap() async throws {
        try await Server.run(["IAPKIT_MAX_CONNECTIONS_PER_CLIENT": "3", "IAPKIT_HEADER_TIMEOUT_SECONDS": "30",
                                             "IAPKIT_TRUSTED_PROXIES": "127.0.0.3"]) { server in
            var mine: [RawConnection] = []
            for index in 0..<3 {
                let connection = try await server.served(from: "127.0.0.1")
                #expect(connection != nil, "connection \(index) is under the client's cap")
                if let connection { mine.append(connection) }
            }
            try #require(mine.count == 3)
            for connection in mine { #expect(Self.begin(connection)) }
            try await Task.sleep(for: .milliseconds(300))  // for the server to read them
            let refused = try server.connect(from: "127.0.0.1")
            _ = refused.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            let answer = await refused.readUntilClosed(within: .seconds(5))
            #expect(answer.text.hasPrefix("HTTP/1.1 503") && Self.errorCode(answer.text) == "too_many_connections" && answer.closed,
                    "the fourth from one client: \(answer)")

            let other = try server.connect(from: "127.0.0.2")
            #expect(other.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"))
            let served = await other.read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") || $0.contains("too_many") }
            #expect(served.text.hasPrefix("HTTP/1.1 200"), "another client is served: \(served)")

            var proxied: [RawConnection] = []
            for _ in 0..<5 {
                let connection = try server.connect(from: "127.0.0.3")
                #expect(connection.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"))
                let reply = await connection.read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") || $0.contains("too_many") }
                #expect(reply.text.hasPrefix("HTTP/1.1 200"), "a trusted proxy is not held to the client's cap: \(reply)")
                #expect(Self.begin(connection))
                proxied.append(connection)
            }

            // One of the client's connections idle again: a new one from the client takes its place.
            #expect(mine[0].send("\r\n"))
            #expect(await mine[0].read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") }.text.hasPrefix("HTTP/1.1 200"))
            try await Task.sleep(for: .milliseconds(100))
            let replacing = try server.connect(from: "127.0.0.1")
            #expect(replacing.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n"))
            let replaced = await replacing.read(within: .seconds(5)) { $0.contains("\"status\":\"ok\"") || $0.contains("too_many") }
            #expect(replaced.text.hasPrefix("HTTP/1.1 200"), "the client's idle connection makes room: \(replaced)")
            #expect(await mine[0].readUntilClosed(within: .seconds(5)).closed)
        }
    }

    @Test("Headers trickled a line at a time are cut off after the header timeout (408), long before the idle one")
    func headerTrickleCutOff() async throws {
        try await Server.run(["IAPKIT_HEADER_TIMEOUT_SECONDS": "1", "IAPKIT_IDLE_TIMEOUT_SECONDS": "20"]) { server in
            let connection = try server.connect()
            let (answer, took) = await offThePool {
                let began = ContinuousClock.now
                var answer = RawConnection.Reply(text: "", closed: !connection.send("GET /health HTTP/1.1\r\n"))
                for index in 0..<50 where answer.text.isEmpty && !answer.closed {
                    answer = connection.readNow(within: .milliseconds(200)) { !$0.isEmpty }
                    if answer.text.isEmpty && !answer.closed { _ = connection.send("X-Slow-\(index): 1\r\n") }
                }
                return (answer, answer.at - began)
            }
            #expect(answer.text.hasPrefix("HTTP/1.1 408") && Self.errorCode(answer.text) == "request_timeout", "\(answer)")
            #expect(took >= .milliseconds(800) && took < .seconds(4), "cut off after \(took), configured 1 s")
            #expect(await connection.readUntilClosed(within: .seconds(5)).closed)
        }
    }

    @Test("A body trickled a byte at a time is cut off after the body timeout (408)")
    func bodyTrickleCutOff() async throws {
        try await Server.run(["IAPKIT_BODY_TIMEOUT_SECONDS": "1", "IAPKIT_IDLE_TIMEOUT_SECONDS": "20"]) { server in
            let connection = try server.connect()
            let head = "POST /v1/orders HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(try await Self.token("al"))\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            let (answer, took) = await offThePool {
                let began = ContinuousClock.now
                var answer = RawConnection.Reply(text: "", closed: !connection.send(head))
                for _ in 0..<50 where answer.text.isEmpty && !answer.closed {
                    answer = connection.readNow(within: .milliseconds(200)) { !$0.isEmpty }
                    if answer.text.isEmpty && !answer.closed { _ = connection.send(" ") }
                }
                return (answer, answer.at - began)
            }
            #expect(answer.text.hasPrefix("HTTP/1.1 408") && Self.errorCode(answer.text) == "request_timeout", "\(answer)")
            #expect(took >= .milliseconds(800) && took < .seconds(4), "cut off after \(took), configured 1 s")
        }
    }

    /// Sends a `POST /v1/orders` whose body is `length` bytes (spaces, then `{}`), `step` bytes every `every` for
    /// `steps` steps (then stops, unless that was all of it), and what came back once the server answered or closed.
    static func trickle(_ connection: RawConnection, length: Int, step: Int, every interval: Duration, steps: Int) async throws -> (RawConnection.Reply, Duration) {
        #expect(connection.send("POST /v1/orders HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(try await token("al"))\r\n"
                                + "Content-Type: application/json\r\nContent-Length: \(length)\r\n\r\n"))
        let body = Array(repeating: " ", count: length - 2).joined() + "{}"
        // The steps keep their pace on a thread of their own: a starved test pool must not look like a stalled client.
        return await offThePool {
            var sent = 0
            let began = ContinuousClock.now
            var answer = RawConnection.Reply(text: "", closed: false)
            for _ in 0..<steps where answer.text.isEmpty && !answer.closed && sent < length {
                let next = min(sent + step, length)
                let start = body.index(body.startIndex, offsetBy: sent)
                _ = connection.send(String(body[start..<body.index(start, offsetBy: next - sent)]))
                sent = next
                answer = connection.readNow(within: interval) { !$0.isEmpty }
            }
            if answer.text.isEmpty && !answer.closed {
                answer = connection.readNow(within: .seconds(10)) { $0.contains("\r\n\r\n") }
            }
            return (answer, answer.at - began)
        }
    }

    @Test("A body arriving slowly but steadily is read past the no-progress timeout; a stalled one is cut; none past the total")
    func bodyProgress() async throws {
        // Progress: 100 bytes at least every 3 s, or it is a stall. The margins are wide, and no case depends on the
        // sender keeping time: a loaded machine delays its steps (a full run stretched 4 s of them past 8).
        try await Server.run(["IAPKIT_BODY_TIMEOUT_SECONDS": "3", "IAPKIT_BODY_PROGRESS_BYTES": "100",
                              "IAPKIT_BODY_MAX_SECONDS": "60", "IAPKIT_IDLE_TIMEOUT_SECONDS": "20"]) { server in
            // 900 bytes, 100 every 500 ms (6 times the minimum): about 4.5 s, longer than the no-progress timeout.
            // Read, then answered by the route (the body is no order: 400), not 408.
            let (steady, took) = try await Self.trickle(try server.connect(), length: 900, step: 100, every: .milliseconds(500), steps: 20)
            #expect(steady.text.hasPrefix("HTTP/1.1 4") && !steady.text.hasPrefix("HTTP/1.1 408"), "the steady body is read: \(steady)")
            #expect(took > .milliseconds(3_500), "the body took \(took), more than the 3 s timeout")

            // 300 bytes of 900, then nothing: cut off about 3 s later.
            let stalled = try server.connect()
            let (cut, stalledFor) = try await Self.trickle(stalled, length: 900, step: 100, every: .milliseconds(100), steps: 3)
            #expect(cut.text.hasPrefix("HTTP/1.1 408") && Self.errorCode(cut.text) == "request_timeout", "\(cut)")
            #expect(stalledFor >= .milliseconds(3_000) && stalledFor < .seconds(9), "cut off after \(stalledFor): 0.3 s sending, then 3 s stalled")
            #expect(await stalled.readUntilClosed(within: .seconds(5)).closed)
        }
        // Steady, but 10,000 bytes at 200 bytes/s would take 50 s: cut at 5 s in all.
        try await Server.run(["IAPKIT_BODY_TIMEOUT_SECONDS": "3", "IAPKIT_BODY_PROGRESS_BYTES": "100",
                              "IAPKIT_BODY_MAX_SECONDS": "5", "IAPKIT_IDLE_TIMEOUT_SECONDS": "20"]) { server in
            let (long, longTook) = try await Self.trickle(try server.connect(), length: 10_000, step: 100, every: .milliseconds(500), steps: 100)
            #expect(long.text.hasPrefix("HTTP/1.1 408") && Self.errorCode(long.text) == "request_timeout", "\(long)")
            #expect(longTook >= .milliseconds(4_500) && longTook < .seconds(20), "cut off after \(longTook), 5 s in all")
        }
    }
}

/// A TCP connection to loopback, written and read byte for byte; a read waits on a thread of its own, never the pool's.
final class RawConnection: @unchecked Sendable {
    private var descriptor: Int32
    private var received: [UInt8] = []
    /// When the connection was made: where a server's idle timer starts.
    private(set) var connectedAt = ContinuousClock.now

    struct Reply: CustomStringConvertible {
        var text: String
        /// The server closed (or reset) the connection.
        var closed: Bool
        /// When the read ended: the close, the awaited bytes, or the limit, seen on the reading thread.
        var at: ContinuousClock.Instant = .now
        var description: String { "\(closed ? "closed" : "open"): \(text.prefix(400).debugDescription)" }
    }

    /// To loopback's `port`, from `source` (another loopback address, as a second client) when given.
    init(port: Int, from source: String? = nil) throws {
        #if canImport(Glibc)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                // Through close(), which forgets the number: a thrown init still runs deinit, and a second close of
                // the same number would close whatever socket the process opened under it meanwhile (NIO traps on
                // such an EBADF — seen crashing the whole suite).
                close()
                throw POSIXError(.EADDRNOTAVAIL)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            // The call's own reason (refused, interrupted, out of ports…): a CI failure once said "refused" for all of them.
            let reason = POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED
            close()
            throw POSIXError(reason)
        }
        connectedAt = .now
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 { closeDescriptor(descriptor) }
        descriptor = -1
    }

    /// Whether all of `text` was written (false once the server closed).
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            #if canImport(Glibc)
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            #else
            let sent = bytes[offset...].withUnsafeBytes { Darwin.send(descriptor, $0.baseAddress, $0.count, 0) }
            #endif
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// What arrived since the last read, until `done` holds for it, the server closed, or `within` passed. The wait is a
    /// blocking `poll` on a thread of its own, and `Reply.at` is taken there: a full suite that keeps the test pool's
    /// threads busy for seconds delays when the test resumes, never what it measures.
    func read(within limit: Duration, until done: @escaping @Sendable (String) -> Bool) async -> Reply {
        await offThePool { self.readNow(within: limit, until: done) }
    }

    /// What arrived until the server closed, or `within` passed.
    func readUntilClosed(within limit: Duration) async -> Reply {
        await read(within: limit) { _ in false }
    }

    /// ``read(within:until:)``, blocking the calling thread: for loops run whole by ``offThePool(_:)``.
    func readNow(within limit: Duration, until done: (String) -> Bool) -> Reply {
        received = []
        let deadline = ContinuousClock.now + limit
        while true {
            let left = deadline - ContinuousClock.now
            let milliseconds = max(0, Int32(clamping: left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000))
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, min(milliseconds, 10)) > 0 {
                var chunk = [UInt8](repeating: 0, count: 65_536)
                let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return Reply(text: String(decoding: received, as: UTF8.self), closed: true) }
                received += chunk.prefix(count)
                continue
            }
            let text = String(decoding: received, as: UTF8.self)
            if done(text) || ContinuousClock.now >= deadline { return Reply(text: text, closed: false) }
        }
    }
}

/// Runs `body` on a thread of its own and hands back what it returned: timing loops that must keep their pace while
/// the rest of the suite occupies the cooperative pool.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

private func closeDescriptor(_ descriptor: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(descriptor)
    #else
    _ = Darwin.close(descriptor)
    #endif
}
