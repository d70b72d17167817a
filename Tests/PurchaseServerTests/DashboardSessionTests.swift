import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import PurchaseServer
import Testing

/// The dashboard's sessions end when the operator signs out, on every replica; wrong keys are throttled per sender and the right
/// key is never refused; refusals fill the audit log no faster than 10 a minute.
@Suite("Dashboard: sign-out ends the session on every replica; the sign-in throttle counts per client", .timeLimit(.minutes(3)))
struct DashboardSessionTests {
    /// A browser without script, its cookies, and the address a proxy in front of the server would say it has.
    final class Browser: @unchecked Sendable {
        var server: any TestClientProtocol
        var cookies: [String: String] = [:]
        let forwardedFor: String?

        init(_ server: any TestClientProtocol, forwardedFor: String? = nil) {
            self.server = server
            self.forwardedFor = forwardedFor
        }

        @discardableResult
        func go(_ method: HTTPRequest.Method, _ path: String, form: [String: String]? = nil) async throws -> (status: HTTPResponse.Status, html: String) {
            var headers = HTTPFields()
            if !cookies.isEmpty { headers[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            if let forwardedFor { headers[.init("X-Forwarded-For")!] = forwardedFor }
            var body: ByteBuffer?
            if let form {
                headers[.contentType] = "application/x-www-form-urlencoded"
                body = ByteBuffer(string: form.map { "\(DashboardTests.Browser.encode($0.key))=\(DashboardTests.Browser.encode($0.value))" }.joined(separator: "&"))
            }
            let response = try await server.execute(uri: path, method: method, headers: headers, body: body)
            for line in response.headers[values: .setCookie] {
                let pair = line.split(separator: ";")[0].split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let (name, value) = (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
                if value.isEmpty || line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
            return (response.status, String(buffer: response.body))
        }

        func signIn(key: String = LoneServer.adminKey) async throws -> HTTPResponse.Status {
            let page = try await go(.get, "/dashboard/login")
            let token = try #require(DashboardTests.Browser.field("login", in: page.html))
            return try await go(.post, "/dashboard/login", form: ["login": token, "key": key]).status
        }
    }

    @Test("Signed out, the old session cookie is refused — by this server and by a second one over the same ledger — though it has not expired",
          arguments: LedgerKind.allCases)
    func signOutEndsTheSession(_ kind: LedgerKind) async throws {
        let configuration = try LoneServer.configuration(kind)
        try await LoneServer.run(configuration) { first async throws in
            try await LoneServer.run(configuration) { second async throws in
                let browser = Browser(first)
                #expect(try await browser.signIn() == .seeOther)
                let cookie = try #require(browser.cookies[DashboardSession.cookie])
                let overview = try await browser.go(.get, "/dashboard")
                #expect(overview.status == .ok)
                let csrf = try #require(DashboardTests.Browser.field("csrf", in: overview.html))
                // The other replica takes the same session while it lasts.
                let copy = Browser(second)
                copy.cookies[DashboardSession.cookie] = cookie
                #expect(try await copy.go(.get, "/dashboard").status == .ok)

                #expect(try await browser.go(.post, "/dashboard/logout", form: ["csrf": csrf]).status == .seeOther)
                #expect(browser.cookies[DashboardSession.cookie] == nil, "the browser forgets it")
                // Whoever kept the cookie (a copy, a stolen one) holds nothing now, on either replica.
                for server in [first, second] {
                    let kept = Browser(server)
                    kept.cookies[DashboardSession.cookie] = cookie
                    let page = try await kept.go(.get, "/dashboard")
                    #expect(page.status == .seeOther, "pages send to the sign-in")
                    #expect(try await kept.go(.post, "/dashboard/reconcile", form: ["csrf": csrf]).status == .forbidden, "actions are refused")
                }
                // Signing in again makes a new session, which works.
                #expect(try await browser.signIn() == .seeOther)
                #expect(try await browser.go(.get, "/dashboard").status == .ok)
            }
        }
    }

    @Test("Behind a trusted proxy, one address's wrong keys throttle that address's wrong keys (429; the right key still signs in) while an operator from another signs in; an untrusted peer's X-Forwarded-For is not believed")
    func throttlePerClient() async throws {
        var trusting = try LoneServer.configuration()
        trusting.trustedProxies = ["127.0.0.0/8", "::1"]
        try await LoneServer.run(trusting) { server async throws in
            let attacker = Browser(server, forwardedFor: "203.0.113.9")
            for _ in 0..<10 { #expect(try await attacker.signIn(key: "guess-guess-guess") == .unauthorized) }
            #expect(try await attacker.signIn(key: "guess-guess-guess") == .tooManyRequests)
            // A proxy chain: the client is the address the trusted proxies received the request from.
            #expect(try await Browser(server, forwardedFor: "198.51.100.1, 203.0.113.9").signIn(key: "guess-guess-guess") == .tooManyRequests)
            // The right key is never refused: refusing it would slow no guesser (the admin API takes it unthrottled).
            #expect(try await Browser(server, forwardedFor: "203.0.113.9").signIn() == .seeOther, "the right key from the throttled address")
            let operator_ = Browser(server, forwardedFor: "198.51.100.7")
            #expect(try await operator_.signIn() == .seeOther)
            #expect(try await operator_.go(.get, "/dashboard").status == .ok)
            // The admin API is not throttled at all.
            let admin = try await server.execute(uri: "/admin/audit", method: .get, headers: [.authorization: "Bearer \(LoneServer.adminKey)",
                                                                                         .init("X-Forwarded-For")!: "203.0.113.9"])
            #expect(admin.status == .ok)
        }
        // Not trusted, the header is anyone's to write: naming a new address for each guess escapes nothing.
        try await LoneServer.run(try LoneServer.configuration()) { server async throws in
            for index in 0..<10 {
                #expect(try await Browser(server, forwardedFor: "203.0.113.\(index)").signIn(key: "guess-guess-guess") == .unauthorized)
            }
            #expect(try await Browser(server, forwardedFor: "203.0.113.200").signIn(key: "guess-guess-guess") == .tooManyRequests)
        }
    }

    @Test("The client behind proxies: the first address from the right that is not a trusted proxy's; IPv6 clients counted by their /64")
    func clientAddress() throws {
        let proxies = try TrustedProxies.parse(["10.0.0.0/8", "2001:db8::1"]).get()
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["1.1.1.1", "192.0.2.5", "10.9.9.9"]) == "192.0.2.5")
        #expect(proxies.client(peer: "192.0.2.8", forwardedFor: ["1.1.1.1"]) == "192.0.2.8", "an untrusted peer's header is ignored")
        #expect(proxies.client(peer: "::ffff:10.0.0.1", forwardedFor: ["192.0.2.5"]) == "192.0.2.5", "an IPv4-mapped peer is IPv4")
        #expect(proxies.client(peer: "2001:db8::1", forwardedFor: []) == "2001:db8::1")
        #expect(proxies.client(peer: nil, forwardedFor: ["192.0.2.5"]) == nil)
        #expect(ClientAddress.bucket(forClient: "2001:db8:1:2:aaaa::1") == ClientAddress.bucket(forClient: "2001:db8:1:2:bbbb::9"))
        #expect(ClientAddress.bucket(forClient: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(ClientAddress.bucket(forClient: "2001:db8:1:3::1") != ClientAddress.bucket(forClient: "2001:db8:1:2::1"))
        #expect(ClientAddress.bucket(forClient: "192.0.2.5") == "192.0.2.5" && ClientAddress.bucket(forClient: nil) == "unknown")
        // Behind a NAT64 translator every IPv4 client shares one /64: each is its own IPv4 address.
        #expect(ClientAddress.bucket(forClient: "64:ff9b::c000:205") == "192.0.2.5")
        #expect(ClientAddress.bucket(forClient: "64:ff9b::c000:206") != ClientAddress.bucket(forClient: "64:ff9b::c000:205"))
        #expect(proxies.contains("11.0.0.1") == false && proxies.contains("10.255.0.1"))
        for bad in ["10.0.0.0/33", "example.com", "10.0.0.0/x"] {
            #expect(throws: ConfigurationError.self) { try TrustedProxies.parse([bad]).get() }
        }
        var configuration = ServerConfiguration()
        configuration.trustedProxies = ["not-an-address"]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        let throttle = SignInThrottle(limit: 2, capacity: 2)
        let now = Date()
        #expect(throttle.admit(client: "a", correct: false, now: now) && throttle.admit(client: "a", correct: false, now: now))
        #expect(!throttle.admit(client: "a", correct: false, now: now))
        #expect(throttle.admit(client: "b", correct: false, now: now), "another client is not held by a's failures")
        #expect(throttle.admit(client: "a", correct: false, now: now.addingTimeInterval(61)), "a minute later a may try again")
    }

    @Test("An attacker who fills the throttle's table (10,000 IPv6 /64s of one /48, one wrong key each) and spends the shared count locks no operator out: the right key signs in from a new address, while wrong keys from new addresses are still refused")
    func fullTableLocksNoOneOut() {
        let throttle = SignInThrottle()
        let now = Date()
        for index in 0..<throttle.capacity {
            let client = ClientAddress.bucket(forClient: "2001:db8:7:\(String(index, radix: 16))::1")
            #expect(throttle.admit(client: client, correct: false, now: now))
        }
        // Every new client now shares one count, which the attacker spends too.
        for index in 0..<throttle.limit {
            #expect(throttle.admit(client: "198.51.100.\(index)", correct: false, now: now), "the shared count takes \(throttle.limit) wrong keys")
        }
        #expect(!throttle.admit(client: "198.51.100.200", correct: false, now: now), "a wrong key from a new address is still throttled")
        #expect(!throttle.admit(client: "2001:db8:9::1", correct: false, now: now), "and from a new network")
        #expect(throttle.admit(client: "192.0.2.77", correct: true, now: now), "the operator, from a new address, with the right key")
        #expect(throttle.admit(client: ClientAddress.bucket(forClient: "2001:db8:7:5::1"), correct: true, now: now),
                "the right key even from an address the attacker uses")
        // A small table behaves the same.
        let small = SignInThrottle(limit: 2, capacity: 3)
        for client in ["a", "b", "c", "x", "y"] { #expect(small.admit(client: client, correct: false, now: now)) }
        #expect(!small.admit(client: "z", correct: false, now: now))
        #expect(small.admit(client: "operator", correct: true, now: now))
        #expect(small.admit(client: "z", correct: false, now: now.addingTimeInterval(61)), "a minute later the shared count is free again")
    }

    @Test("A flood of wrong keys from many addresses writes at most 10 sign-in-refused audit rows a minute; the rest are counted in /metrics; an operator still signs in")
    func refusalsAuditedUpToACeiling() async throws {
        var trusting = try LoneServer.configuration()
        trusting.trustedProxies = ["127.0.0.0/8", "::1"]
        try await LoneServer.run(trusting) { server async throws in
            for index in 0..<25 {
                #expect(try await Browser(server, forwardedFor: "203.0.113.\(index)").signIn(key: "guess-guess-guess") == .unauthorized)
            }
            #expect(try await Browser(server, forwardedFor: "198.51.100.7").signIn() == .seeOther)
            let bearer: HTTPFields = [.authorization: "Bearer \(LoneServer.adminKey)"]
            let audit = String(buffer: try await server.execute(uri: "/admin/audit", method: .get, headers: bearer).body)
            #expect(audit.components(separatedBy: "\"sign-in-refused\"").count - 1 == 10, "\(audit)")
            #expect(audit.contains("\"sign-in\""))
            let metrics = String(buffer: try await server.execute(uri: "/metrics", method: .get, headers: bearer).body)
            #expect(metrics.contains("iapkit_dashboard_sign_in_refused_total{result=\"audited\"} 10"), "\(metrics)")
            #expect(metrics.contains("iapkit_dashboard_sign_in_refused_total{result=\"unaudited\"} 15"), "\(metrics)")
        }
    }

    @Test("The audit ceiling is per minute, and the next audited refusal says how many went unaudited")
    func auditCeilingWindow() {
        let throttle = SignInThrottle(auditLimit: 2)
        let now = Date()
        #expect(throttle.auditRefusal(now: now) == 0 && throttle.auditRefusal(now: now) == 0)
        #expect(throttle.auditRefusal(now: now) == nil && throttle.auditRefusal(now: now.addingTimeInterval(59)) == nil)
        #expect(throttle.auditRefusal(now: now.addingTimeInterval(61)) == 2)
        #expect(throttle.auditRefusal(now: now.addingTimeInterval(62)) == 0)
    }
}
