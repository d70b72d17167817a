import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import Testing

/// The operator's dashboard over real HTTP, as a browser without script would use it: its sign-in, its session and
/// CSRF rules, its pages' escaping, its actions audited. (The headless-Chromium walk is in `DashboardBrowserTests`.)
@Suite("Dashboard: sign-in, sessions, CSRF, escaping and the operator's actions")
struct DashboardTests {
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"

    /// A browser's cookie jar, enough for one site.
    final class Browser: @unchecked Sendable {
        let server: any TestClientProtocol
        var cookies: [String: String] = [:]
        var setCookieLines: [String] = []

        init(_ server: any TestClientProtocol) { self.server = server }

        @discardableResult
        func go(_ method: HTTPRequest.Method, _ path: String, form: [String: String]? = nil) async throws -> (status: HTTPResponse.Status, headers: HTTPFields, html: String) {
            var headers = HTTPFields()
            if !cookies.isEmpty { headers[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            var body: ByteBuffer?
            if let form {
                headers[.contentType] = "application/x-www-form-urlencoded"
                body = ByteBuffer(string: form.map { "\(Self.encode($0.key))=\(Self.encode($0.value))" }.joined(separator: "&"))
            }
            let response = try await server.execute(uri: path, method: method, headers: headers, body: body)
            for line in response.headers[values: .setCookie] {
                setCookieLines.append(line)
                let pair = line.split(separator: ";")[0].split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let (name, value) = (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
                if value.isEmpty || line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
            return (response.status, response.headers, String(buffer: response.body))
        }

        static func encode(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
        }

        /// The value of the hidden field `name` on `html`.
        static func field(_ name: String, in html: String) -> String? {
            guard let range = html.range(of: "name=\"\(name)\" value=\"") else { return nil }
            return String(html[range.upperBound...].prefix { $0 != "\"" })
        }

        func signIn(key: String = System.adminKey) async throws -> (HTTPResponse.Status, String) {
            let page = try await go(.get, "/dashboard/login")
            let token = try #require(Self.field("login", in: page.html))
            let reply = try await go(.post, "/dashboard/login", form: ["login": token, "key": key])
            return (reply.status, reply.html)
        }
    }

    @Test("Signed out, every page sends to the sign-in and every action is refused; a wrong key is refused and audited; the session cookie is HttpOnly, SameSite=Strict, scoped to /dashboard")
    func signIn() async throws {
        try await System.run(.sqlite) { system in
            let browser = Browser(system.server)
            for page in ["/dashboard", "/dashboard/orders", "/dashboard/accounts/ada", "/dashboard/notifications", "/dashboard/search?q=x"] {
                let reply = try await browser.go(.get, page)
                #expect(reply.status == .seeOther && reply.headers[.location] == "/dashboard/login", "\(page)")
            }
            #expect(try await browser.go(.post, "/dashboard/reconcile", form: ["csrf": "x"]).status == .forbidden)
            // No login token (another site posting the form): refused before the key is even looked at.
            #expect(try await Browser(system.server).go(.post, "/dashboard/login", form: ["key": System.adminKey]).status == .forbidden)
            let (wrong, html) = try await browser.signIn(key: "not-the-key")
            #expect(wrong == .unauthorized && html.contains("not the admin key"))
            #expect(browser.cookies[DashboardSession.cookie] == nil)
            let (status, _) = try await browser.signIn()
            #expect(status == .seeOther)
            let line = try #require(browser.setCookieLines.first { $0.hasPrefix(DashboardSession.cookie + "=") && !$0.contains("Max-Age=0") })
            #expect(line.contains("HttpOnly") && line.contains("SameSite=Strict") && line.contains("Path=/dashboard"), "\(line)")
            let overview = try await browser.go(.get, "/dashboard")
            #expect(overview.status == .ok && overview.html.contains("lost orders waiting") && overview.html.contains("<svg"))
            #expect(overview.headers[.init("Content-Security-Policy")!]?.contains("default-src 'none'") == true)
            #expect(overview.headers[.init("X-Frame-Options")!] == "DENY" && overview.headers[.cacheControl] == "no-store")
            let audit = try await system.services.ledger.auditLog().map(\.action)
            #expect(audit.contains("sign-in") && audit.contains("sign-in-refused"))
            // A forged session (right shape, wrong MAC) and a session from another admin key are signed out.
            browser.cookies[DashboardSession.cookie] = "9999999999999.\(String(repeating: "a", count: 32)).\(String(repeating: "b", count: 64))"
            #expect(try await browser.go(.get, "/dashboard").status == .seeOther)
            browser.cookies[DashboardSession.cookie] = DashboardSession(adminKey: "another-key").issue(now: Date())
            #expect(try await browser.go(.get, "/dashboard").status == .seeOther)
            // Expired.
            browser.cookies[DashboardSession.cookie] = DashboardSession(adminKey: System.adminKey).issue(now: Date().addingTimeInterval(-13 * 3600))
            #expect(try await browser.go(.get, "/dashboard").status == .seeOther)
        }
    }

    @Test("Search by transaction id, original transaction id, order id or appAccountToken leads to the account; its page shows what it owns and its timeline, hostile account ids escaped")
    func searchAndTimeline() async throws {
        try await System.run(.sqlite) { system in
            let browser = Browser(system.server)
            _ = try await browser.signIn()
            let account = "<script>alert('x')</script>&\"ada\""
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-hostile"])
            let (order, purchase, reply) = try await system.buy(Self.premium, account: account, storeAccount: "store-hostile")
            #expect([.granted, .alreadyGranted].contains(reply?.outcome), "the notification may have granted it first")
            let transactionId = try #require(purchase.transactionId)
            let path = "/dashboard/account?id=" + Browser.encode(account)
            let original = try #require(try await system.services.ledger.transaction(transactionId)?.originalTransactionId)
            for query in [transactionId, original, order.orderId, order.appAccountToken.uuidString.uppercased(), account] {
                let found = try await browser.go(.get, "/dashboard/search?q=" + Browser.encode(query))
                #expect(!query.isEmpty && found.status == .seeOther && found.headers[.location] == path, "\(query)")
            }
            let page = try await browser.go(.get, path)
            #expect(page.status == .ok)
            #expect(!page.html.contains("<script>"), "the account id is escaped everywhere")
            #expect(page.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;ada&quot;"))
            #expect(page.html.contains(transactionId) && page.html.contains(Self.premium) && page.html.contains("id=\"timeline\""))
            // A GET form sends a space as '+'; an account id with spaces is found all the same.
            let spaced = " dee smith "
            _ = try await system.call(.post, "/v1/orders", as: spaced, ["productId": Self.premium])
            let plus = try await browser.go(.get, "/dashboard/search?q=+dee+smith+")
            #expect(plus.status == .seeOther && plus.headers[.location] == "/dashboard/account?id=" + Browser.encode(spaced))
            // Account ids a browser would resolve away in a path: `.` and `..` have their pages too.
            for dots in [".", ".."] {
                _ = try await system.call(.post, "/v1/orders", as: dots, ["productId": Self.premium])
                let found = try await browser.go(.get, "/dashboard/search?q=" + Browser.encode(dots))
                #expect(found.headers[.location] == "/dashboard/account?id=" + Browser.encode(dots))
                let page = try await browser.go(.get, "/dashboard/account?id=" + Browser.encode(dots))
                #expect(page.status == .ok && page.html.contains("Account \(dots)"), "\(dots)")
            }
            let nothing = try await browser.go(.get, "/dashboard/search?q=" + Browser.encode("<b>nothing</b>"))
            #expect(nothing.status == .ok && nothing.html.contains("&lt;b&gt;nothing&lt;/b&gt;") && !nothing.html.contains("<b>nothing"))
        }
    }

    @Test("Settling a lost order: refused without the session's CSRF token (nothing changes), done with it; the order is settled with its audit entry")
    func settleWithCSRF() async throws {
        try await System.run(.sqlite) { system in
            let browser = Browser(system.server)
            _ = try await browser.signIn()
            let (status, order) = try await system.call(.post, "/v1/orders", as: "bea", ["productId": Self.premium])
            #expect(status == .created)
            let orderId = try decode(OrderReply.self, order).orderId
            let page = try await browser.go(.get, "/dashboard/orders?state=created")
            #expect(page.html.contains(orderId))
            let csrf = try #require(Browser.field("csrf", in: page.html))
            #expect(try await browser.go(.post, "/dashboard/orders/\(orderId)/settle", form: ["note": "refunded by support"]).status == .forbidden)
            #expect(try await browser.go(.post, "/dashboard/orders/\(orderId)/settle", form: ["note": "x", "csrf": String(repeating: "0", count: 64)]).status
                    == .forbidden)
            #expect(try await system.services.ledger.order(orderId)?.state == .created, "a refused action changes nothing")
            // Another session's token does not fit this one.
            let other = Browser(system.server)
            _ = try await other.signIn()
            let otherToken = try #require(Browser.field("csrf", in: try await other.go(.get, "/dashboard/orders?state=created").html))
            #expect(otherToken != csrf)
            #expect(try await browser.go(.post, "/dashboard/orders/\(orderId)/settle", form: ["note": "x", "csrf": otherToken]).status == .forbidden)
            let done = try await browser.go(.post, "/dashboard/orders/\(orderId)/settle", form: ["note": "refunded by support", "csrf": csrf])
            #expect(done.status == .seeOther)
            let shown = try await browser.go(.get, try #require(done.headers[.location]))
            #expect(shown.html.contains("Order \(orderId) is settled"))
            #expect(try await system.services.ledger.order(orderId)?.state == .settled)
            let audit = try await system.services.ledger.auditLog()
            #expect(audit.contains { $0.actor == "dashboard" && $0.action == "settle" && $0.subject == orderId && $0.detail == "refunded by support" })
            // Signing out ends the session in this browser.
            let csrfNow = try #require(Browser.field("csrf", in: shown.html))
            #expect(try await browser.go(.post, "/dashboard/logout", form: ["csrf": csrfNow]).status == .seeOther)
            #expect(try await browser.go(.get, "/dashboard").status == .seeOther)
        }
    }

    @Test("The overview counts and charts what happened; the notifications log shows payloads decoded")
    func overviewAndNotifications() async throws {
        try await System.run(.sqlite) { system in
            let browser = Browser(system.server)
            _ = try await browser.signIn()
            let (account, store) = try await system.customer("chart")
            _ = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let overview = try await system.services.ledger.overview(now: system.services.now())
            #expect(overview.activeSubscriptions.contains { $0.productId == Self.monthly && $0.count == 1 })
            #expect(overview.days.count == 30 && overview.days.last?.purchases == 1)
            let page = try await browser.go(.get, "/dashboard")
            #expect(page.html.contains(Self.monthly) && page.html.contains("Purchases: 1"))
            let log = try await browser.go(.get, "/dashboard/notifications")
            #expect(log.html.contains("SUBSCRIBED") && log.html.contains("&quot;notificationType&quot;") && log.html.contains("&quot;productId&quot;"),
                    "the payload and its signed transaction are shown decoded")
        }
    }

    @Test("Without an admin key there is no dashboard")
    func closedWithoutKey() async throws {
        try await System.run(.sqlite) { system in
            var services = system.services
            services.adminKey = nil
            try await buildApplication(services, port: 0).test(.router) { client in
                let login = try await client.execute(uri: "/dashboard/login", method: .get)
                let overview = try await client.execute(uri: "/dashboard", method: .get)
                #expect(login.status == .notFound && overview.status == .notFound)
            }
        }
    }
}
