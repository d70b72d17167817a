import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import Mustache
import PurchaseAPI
import PurchaseLedger

/// `/dashboard`: the operator's pages over the ledger — overview, search, an account's timeline, lost orders with
/// settle and reconcile, the notifications log, the webhooks' outbox. Server-rendered HTML, no script.
///
/// Sign-in takes the admin key once and sets a session cookie (`HttpOnly`, `SameSite=Strict`, `Path=/dashboard`,
/// `Secure` behind HTTPS); every action is a POST carrying the session's CSRF token; every page forbids framing,
/// scripts and caching; signing out ends the session on every replica (``DashboardSession``). Wrong keys are throttled
/// per client and their audit rows capped server-wide; the right key is never refused (``SignInThrottle``). Closed
/// (404) when no admin key is configured.
struct DashboardRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices
    let throttle = SignInThrottle()
    /// Whose `X-Forwarded-For` names the client the throttle counts (the configuration was checked at start).
    let proxies: TrustedProxies
    static var formLimit: Int { 16 * 1024 }

    init(services: PurchaseServices) {
        self.services = services
        proxies = (try? TrustedProxies.parse(services.trustedProxies).get()) ?? .none
    }

    /// Into the `/dashboard` group: its pages link and redirect to `/dashboard/...`.
    func add(to dashboard: some RouterMethods<Context>) {
        dashboard.get("style.css", use: style)
        dashboard.get("login", use: loginPage)
        dashboard.post("login", use: login)
        dashboard.post("logout", use: logout)
        dashboard.get(use: overview)
        dashboard.get("search", use: search)
        dashboard.get("account", use: accountByQuery)
        dashboard.get("accounts/:id", use: account)
        dashboard.get("orders", use: orders)
        dashboard.post("orders/:id/settle", use: settle)
        dashboard.post("reconcile", use: reconcile)
        dashboard.get("notifications", use: notifications)
        dashboard.get("webhooks", use: webhooks)
        dashboard.post("webhooks/:id/replay", use: replay)
        addRevenueRoutes(to: dashboard)
    }

    /// The sign-in form.
    struct LoginForm: Decodable { var login: String?; var key: String? }
    struct PlainAction: DashboardActionForm { var csrf: String? }
    struct SettleAction: DashboardActionForm { var csrf: String?; var note: String?; var transactionId: String? }

    /// What every page's header needs.
    struct Frame {
        var title: String
        var signedIn = true
        var csrf = ""
        var query = ""
        var flash: String?
        var problem: String?
    }

    // MARK: Sign-in

    @Sendable func style(_ request: Request, context: Context) async throws -> Response {
        Response(status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=3600"],
                 body: .init(byteBuffer: ByteBuffer(string: DashboardTemplates.style)))
    }

    @Sendable func loginPage(_ request: Request, context: Context) async throws -> Response {
        _ = try keys()
        return loginForm(request, problem: nil, status: .ok)
    }

    @Sendable func login(_ request: Request, context: Context) async throws -> Response {
        let session = try keys()
        let form = try await Self.form(LoginForm.self, request)
        let expected = request.cookies[DashboardSession.loginCookie]?.value ?? ""
        guard !expected.isEmpty, DashboardSession.equal(form.login ?? "", expected) else {
            return loginForm(request, problem: "The sign-in form expired: sign in again.", status: .forbidden)
        }
        let now = Date()
        // The key first, in constant time: the right one is never throttled (``SignInThrottle``).
        let correct = services.adminKey.map { DashboardSession.equal(DashboardSession.digest(form.key ?? ""), DashboardSession.digest($0)) } ?? false
        let client = ClientAddress.bucket(of: request, peer: context.peerAddress, trusting: proxies)
        guard throttle.admit(client: client, correct: correct, now: now) else {
            services.metrics.dashboardSignInRefused(.throttled)
            return loginForm(request, problem: "Too many wrong keys: wait a minute.", status: .tooManyRequests)
        }
        guard correct else {
            if let unaudited = throttle.auditRefusal(now: now) {
                services.metrics.dashboardSignInRefused(.audited)
                let detail = "from \(client)" + (unaudited > 0 ? "; \(unaudited) more refused unaudited before this one" : "")
                try? await services.ledger.audit(actor: "dashboard", action: .signInRefused, subject: "-", detail: detail, now: services.now())
            } else {
                services.metrics.dashboardSignInRefused(.unaudited)
            }
            return loginForm(request, problem: "That is not the admin key.", status: .unauthorized)
        }
        let issued = session.issue(now: now)
        let nonce = session.verify(issued, now: now) ?? ""
        try await services.ledger.audit(actor: "dashboard", action: .signIn, subject: DashboardSession.sessionId(nonce: nonce), detail: "from \(client)",
                                        now: services.now())
        var response = Self.redirect("/dashboard")
        response.setCookie(cookie(DashboardSession.cookie, issued, request: request, maxAge: Int(DashboardSession.lifetime)))
        response.setCookie(cookie(DashboardSession.loginCookie, "", request: request, maxAge: 0))
        return response
    }

    /// Ends the session for every replica (the cookie alone would stay valid until its expiry wherever it was copied).
    @Sendable func logout(_ request: Request, context: Context) async throws -> Response {
        let (_, nonce) = try await actionSession(PlainAction.self, request)
        try await services.ledger.audit(actor: "dashboard", action: .signOut, subject: DashboardSession.sessionId(nonce: nonce), detail: "",
                                        now: services.now())
        var response = Self.redirect("/dashboard/login")
        response.setCookie(cookie(DashboardSession.cookie, "", request: request, maxAge: 0))
        return response
    }

    // MARK: Pages

    struct OverviewChart { var title: String; var total: Int; var svg: String }
    struct OverviewPage {
        var frame: Frame
        var lostOrders, notificationsStored, notificationsLastDay, notificationsRefused, unboundTransactions, webhookEventsFailed: Int
        var hasActive: Bool
        var active: [LedgerOverview.ProductCount]
        var activeChart: String
        var dayCount: Int
        var charts: [OverviewChart]
    }

    @Sendable func overview(_ request: Request, context: Context) async throws -> Response {
        guard let frame = try await signedIn(request, title: "Overview") else { return Self.redirect("/dashboard/login") }
        let overview = try await services.ledger.overview(now: services.now(), days: 30)
        func chart(_ title: String, _ value: (LedgerOverview.Day) -> Int) -> OverviewChart {
            let bars = overview.days.map { BarChart.Bar(label: Self.day($0.day), value: value($0)) }
            return OverviewChart(title: title, total: bars.reduce(0) { $0 + $1.value }, svg: BarChart(bars: bars).svg)
        }
        let active = BarChart(bars: overview.activeSubscriptions.map { BarChart.Bar(label: $0.productId, value: $0.count) }, labelEvery: 1).svg
        return render("overview", OverviewPage(
            frame: frame, lostOrders: overview.lostOrders, notificationsStored: overview.notificationsStored,
            notificationsLastDay: overview.notificationsLastDay, notificationsRefused: services.metrics.notifications("refused"),
            unboundTransactions: overview.unboundTransactions, webhookEventsFailed: overview.webhookEventsFailed,
            hasActive: !overview.activeSubscriptions.isEmpty, active: overview.activeSubscriptions, activeChart: active, dayCount: overview.days.count,
            charts: [chart("Purchases", \.purchases), chart("Renewals", \.renewals), chart("Refunds", \.refunds),
                     chart("Billing issues", \.billingIssues)]))
    }

    struct SearchMatch { var via: String; var subject: String; var accountId: String?; var accountPath: String }
    struct SearchUnbound { var transactionId, originalTransactionId, productId, purchaseDate: String }
    struct SearchPage { var frame: Frame; var query: String; var hasMatches: Bool; var matches: [SearchMatch]; var hasUnbound: Bool; var unbound: [SearchUnbound] }

    /// One match leads straight to its account; several, or none, are listed. An empty query lists the transactions
    /// no account holds.
    @Sendable func search(_ request: Request, context: Context) async throws -> Response {
        // A GET form writes a space as `+`, which Hummingbird's query decoding leaves as it is.
        let query = String((request.uri.queryParameters["q"].map { $0.replacingOccurrences(of: "+", with: " ") } ?? "").prefix(200))
        guard var frame = try await signedIn(request, title: "Search") else { return Self.redirect("/dashboard/login") }
        frame.query = query
        let matches = query.isEmpty ? [] : try await services.ledger.search(query)
        let accounts = Set(matches.compactMap(\.accountId))
        if accounts.count == 1, let only = accounts.first {
            return Self.redirect("/dashboard/account?id=\(Self.queryValue(only))")
        }
        let unbound = query.isEmpty ? try await services.ledger.transactions(unboundOnly: true, limit: 200) : []
        return render("search", SearchPage(
            frame: frame, query: query, hasMatches: !matches.isEmpty,
            matches: matches.map { SearchMatch(via: $0.via.rawValue, subject: $0.subject, accountId: $0.accountId, accountPath: Self.pathComponent($0.accountId ?? "")) },
            hasUnbound: !unbound.isEmpty,
            unbound: unbound.map { SearchUnbound(transactionId: $0.transactionId, originalTransactionId: $0.originalTransactionId, productId: $0.productId,
                                                 purchaseDate: Self.time($0.purchaseDate)) }))
    }

    /// An account's page by `?id=`: every link goes here, since a path segment of `.` or `..` (an account id is any
    /// text) is resolved away by browsers however it is encoded.
    @Sendable func accountByQuery(_ request: Request, context: Context) async throws -> Response {
        guard let id = request.uri.queryParameters["id"], !id.isEmpty else { throw APIError.badRequest("id is required") }
        return try await accountPage(request, accountId: String(id))
    }

    @Sendable func account(_ request: Request, context: Context) async throws -> Response {
        try await accountPage(request, accountId: try context.parameters.decoded("id"))
    }

    struct AccountOwned { var name, productId, transactionId, state, expires: String }
    struct AccountBalance { var currency: String; var amount: Int64 }
    struct AccountLine { var at, kind, subject, subjectQuery, detail: String }
    struct AccountPage { var frame: Frame; var accountId: String; var hasOwned: Bool; var entitlements: [AccountOwned]; var balances: [AccountBalance]; var timeline: [AccountLine] }

    private func accountPage(_ request: Request, accountId: String) async throws -> Response {
        guard let frame = try await signedIn(request, title: "Account \(accountId)") else { return Self.redirect("/dashboard/login") }
        let now = services.now()
        let owned = try await services.ledger.entitlements(accountId: accountId, now: now)
        let timeline = try await services.ledger.timeline(accountId: accountId)
        return render("account", AccountPage(
            frame: frame, accountId: accountId, hasOwned: !owned.entitlements.isEmpty || !owned.balances.isEmpty,
            entitlements: owned.entitlements.map {
                AccountOwned(name: $0.name, productId: $0.productId, transactionId: $0.transactionId, state: $0.state.rawValue,
                             expires: $0.expiresAt.map(Self.time) ?? "never")
            },
            balances: owned.balances.sorted { $0.key < $1.key }.map { AccountBalance(currency: $0.key, amount: $0.value) },
            timeline: timeline.reversed().map {
                AccountLine(at: Self.time($0.at), kind: $0.kind.rawValue, subject: $0.subject, subjectQuery: Self.queryValue($0.subject), detail: $0.detail)
            }))
    }

    struct OrderState { var name, title: String; var current: Bool }
    struct OrderItem { var orderId, accountId, accountPath, productId, state, createdAt: String; var transactionId: String; var open: Bool }
    struct OrdersPage { var frame: Frame; var stateTitle: String; var states: [OrderState]; var hasOrders: Bool; var orders: [OrderItem] }

    @Sendable func orders(_ request: Request, context: Context) async throws -> Response {
        let name = request.uri.queryParameters["state"].map(String.init) ?? Ledger.OrderFilter.paidUnfulfilled.rawValue
        guard var frame = try await signedIn(request, title: "Orders") else { return Self.redirect("/dashboard/login") }
        let filter = Ledger.OrderFilter(rawValue: name) ?? .paidUnfulfilled
        frame.flash = request.uri.queryParameters["done"].map { String($0.prefix(300)) }
        frame.problem = request.uri.queryParameters["problem"].map { String($0.prefix(300)) }
        let orders = try await services.ledger.orders(filter, now: services.now())
        return render("orders", OrdersPage(
            frame: frame, stateTitle: Self.title(filter),
            states: Ledger.OrderFilter.allCases.map { OrderState(name: $0.rawValue, title: Self.title($0), current: $0 == filter) },
            hasOrders: !orders.isEmpty,
            orders: orders.map { order in
                // The app's word on how its payment ended, when it gave one (it changes nothing else).
                let said = order.abandonReason.map { ", \($0) (said the app at \(Self.time(order.abandonedAt ?? order.createdAt)))" } ?? ""
                return OrderItem(orderId: order.orderId, accountId: order.accountId, accountPath: Self.pathComponent(order.accountId),
                                 productId: order.productId, state: order.state.rawValue + said, createdAt: Self.time(order.createdAt),
                                 transactionId: order.transactionId ?? "", open: order.state == .created)
            }))
    }

    /// Grants a transaction to the order (found through Apple's Server API), or closes it with the note. Audited in the
    /// same transaction, as `dashboard`.
    @Sendable func settle(_ request: Request, context: Context) async throws -> Response {
        let form = try await action(SettleAction.self, request)
        let orderId = try context.parameters.decoded("id")
        let note = (form.note ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let transactionId = (form.transactionId ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !note.isEmpty else { return Self.redirect("/dashboard/orders?state=created&problem=" + Self.queryValue("A settle needs a note.")) }
        do {
            let transaction = transactionId.isEmpty ? nil : try await ProofIntake.verify(.transactionId(transactionId), with: services).first
            let order = try await services.ledger.settle(orderId: orderId, transaction: transaction, note: String(note.prefix(2000)), actor: "dashboard",
                                                         now: services.now())
            let done = "Order \(order.orderId) is \(order.state.rawValue)" + (order.transactionId.map { " with transaction \($0)" } ?? "") + "."
            return Self.redirect("/dashboard/orders?state=\(order.state.rawValue)&done=" + Self.queryValue(done))
        } catch let error as LedgerError where error.code != .storage {
            // A refusal is the operator's to read; a storage failure is answered as on every route (503 `storage`).
            return Self.redirect("/dashboard/orders?state=created&problem=" + Self.queryValue("Not settled: \(error.message)"))
        } catch let error as AppStoreClientError {
            return Self.redirect("/dashboard/orders?state=created&problem=" + Self.queryValue("Apple did not confirm the transaction: \(error)"))
        } catch let error as AppStoreError {
            return Self.redirect("/dashboard/orders?state=created&problem=" + Self.queryValue("Apple did not confirm the transaction: \(error)"))
        }
    }

    @Sendable func reconcile(_ request: Request, context: Context) async throws -> Response {
        _ = try await action(PlainAction.self, request)
        do {
            let report = try await Reconciler(services: services).runOnce()
            try await services.ledger.audit(actor: "dashboard", action: .reconcile, subject: "-", detail: "\(report)", now: services.now())
            return Self.redirect("/dashboard/orders?done=" + Self.queryValue("Reconciled: \(report)"))
        } catch let error as LedgerError where error.code == .storage {
            // Answered as on every route (503 `storage`), not with the database's words in the page.
            throw error
        } catch {
            return Self.redirect("/dashboard/orders?problem=" + Self.queryValue("Reconciliation failed: \(error)"))
        }
    }

    struct NotificationItem { var signedDate, type, uuid, payload: String; var transactionId: String?; var transactionQuery: String }
    struct NotificationsPage { var frame: Frame; var notifications: [NotificationItem] }

    @Sendable func notifications(_ request: Request, context: Context) async throws -> Response {
        guard let frame = try await signedIn(request, title: "Notifications") else { return Self.redirect("/dashboard/login") }
        let logged = try await services.ledger.notifications(limit: 100, withPayload: true)
        return render("notifications", NotificationsPage(frame: frame, notifications: logged.map {
            NotificationItem(signedDate: Self.time($0.signedDate), type: $0.notificationType + ($0.subtype.map { " / \($0)" } ?? ""), uuid: $0.notificationUUID,
                             payload: $0.signedPayload.map(Self.decoded) ?? "", transactionId: $0.transactionId, transactionQuery: Self.queryValue($0.transactionId ?? ""))
        }))
    }

    struct WebhookItem { var createdAt, eventId, eventPath, accountId, state, lastError: String; var attempts: Int }
    struct WebhooksPage { var frame: Frame; var stateTitle: String?; var configured: String; var events: [WebhookItem] }

    @Sendable func webhooks(_ request: Request, context: Context) async throws -> Response {
        guard var frame = try await signedIn(request, title: "Webhooks") else { return Self.redirect("/dashboard/login") }
        frame.flash = request.uri.queryParameters["done"].map { String($0.prefix(300)) }
        let state = request.uri.queryParameters["state"].flatMap { StoredWebhookEvent.State(rawValue: String($0)) }
        let events = try await services.ledger.webhookEvents(state: state, limit: 200)
        return render("webhooks", WebhooksPage(
            frame: frame, stateTitle: state?.rawValue,
            configured: services.webhooks.map { "Sent to \(Self.shown($0.url))." } ?? "No receiver URL is configured: no event is recorded.",
            events: events.map {
                WebhookItem(createdAt: Self.time($0.createdAt), eventId: $0.eventId, eventPath: Self.pathComponent($0.eventId), accountId: $0.accountId ?? "",
                            state: $0.state.rawValue, lastError: $0.lastError ?? "", attempts: $0.attempts)
            }))
    }

    @Sendable func replay(_ request: Request, context: Context) async throws -> Response {
        _ = try await action(PlainAction.self, request)
        let id = try context.parameters.decoded("id")
        let replayed = try await services.ledger.replayWebhookEvent(id, actor: "dashboard", now: services.now())
        return Self.redirect("/dashboard/webhooks?done=" + Self.queryValue(replayed ? "Event \(id) is sent again." : "No event \(id)."))
    }

    // MARK: Sessions

    /// The session key; 404 (the dashboard does not exist) without an admin key.
    func keys() throws -> DashboardSession {
        guard let key = services.adminKey, !key.isEmpty else { throw APIError(.notFound, code: .dashboardDisabled, "no admin key is configured") }
        return DashboardSession(adminKey: key)
    }

    /// The nonce of the request's session when it is one this key issued, unexpired and not signed out.
    func liveSession(_ request: Request, _ session: DashboardSession) async throws -> String? {
        guard let value = request.cookies[DashboardSession.cookie]?.value, let nonce = session.verify(value, now: Date()) else { return nil }
        let ended = try await services.ledger.auditEntries(subject: DashboardSession.sessionId(nonce: nonce), action: .signOut)
        return ended.isEmpty ? nonce : nil
    }

    /// The page's frame when the request carries a live session; nil: sign in first.
    func signedIn(_ request: Request, title: String) async throws -> Frame? {
        let session = try keys()
        guard let nonce = try await liveSession(request, session) else { return nil }
        return Frame(title: title, csrf: session.csrfToken(nonce: nonce))
    }

    /// An action's form, once its session and CSRF token hold; otherwise 403 and nothing done.
    func action<Form: DashboardActionForm>(_ type: Form.Type, _ request: Request) async throws -> Form {
        try await actionSession(type, request).form
    }

    /// An action's form and its session's nonce.
    func actionSession<Form: DashboardActionForm>(_ type: Form.Type, _ request: Request) async throws -> (form: Form, nonce: String) {
        let session = try keys()
        let form = try await Self.form(type, request)
        guard let nonce = try await liveSession(request, session) else {
            throw APIError(.forbidden, code: .dashboardSignedOut, "sign in to the dashboard first")
        }
        guard DashboardSession.equal(form.csrf ?? "", session.csrfToken(nonce: nonce)) else {
            throw APIError(.forbidden, code: .csrfTokenInvalid, "the form's CSRF token does not match this session")
        }
        return (form, nonce)
    }

    struct LoginPage { var frame: Frame; var loginToken: String }

    func loginForm(_ request: Request, problem: String?, status: HTTPResponse.Status) -> Response {
        let token = DashboardSession.randomHex()
        var response = render("login", LoginPage(frame: Frame(title: "Sign in", signedIn: false, problem: problem), loginToken: token), status: status)
        response.setCookie(cookie(DashboardSession.loginCookie, token, request: request, maxAge: 1800))
        return response
    }

    func cookie(_ name: String, _ value: String, request: Request, maxAge: Int) -> Cookie {
        let secure = request.headers[.init("X-Forwarded-Proto")!]?.lowercased() == "https" || request.uri.scheme == .https
        return Cookie(name: name, value: value, maxAge: maxAge, path: "/dashboard", secure: secure, httpOnly: true, sameSite: .strict)
    }

    // MARK: Rendering

    static var securityHeaders: HTTPFields { dashboardSecurityHeaders }

    func render(_ template: String, _ page: Any, status: HTTPResponse.Status = .ok) -> Response {
        let html = DashboardTemplates.library.render(page, withTemplate: template) ?? ""
        return Response(status: status, headers: Self.securityHeaders, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String) -> Response {
        var headers = securityHeaders
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }

    /// A form's body (at most ``formLimit`` bytes) decoded as `Form`; fields it does not name are ignored.
    static func form<Form: Decodable>(_ type: Form.Type, _ request: Request) async throws -> Form {
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: formLimit) } catch {
            throw APIError(.contentTooLarge, code: .tooLarge, "the form is over \(formLimit) bytes")
        }
        do { return try URLEncodedFormDecoder().decode(type, from: String(buffer: buffer)) } catch {
            throw APIError.badRequest("the form is not URL-encoded fields of the expected names")
        }
    }

    static func title(_ filter: Ledger.OrderFilter) -> String {
        switch filter {
        case .paidUnfulfilled: "paid, not granted"
        case .stuck: "stuck (expired, no payment seen)"
        case .abandoned: "abandoned (the app said nothing was charged)"
        case .created: "open"
        case .granted: "granted"
        case .settled: "settled"
        }
    }

    static func time(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day().dateTimeSeparator(.space).time(includingFractionalSeconds: false))
    }

    static func day(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).month().day())
    }

    /// A URL as an operator may see it: no user, password or query (where tokens hide).
    static func shown(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "(a URL)" }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? "(a URL)"
    }

    static func pathComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }

    static func queryValue(_ text: String) -> String { pathComponent(text) }

    /// A notification's payload as JSON, its signed transaction, renewal and app transaction decoded in place (each
    /// was verified when the notification was received).
    static func decoded(_ signedPayload: String) -> String {
        func object(_ jws: String) -> Any? {
            guard let payload = try? CompactJWS(jws).payload() else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(payload))
        }
        guard var outer = object(signedPayload) as? [String: Any] else { return signedPayload }
        for key in ["data", "summary", "externalPurchaseToken"] {
            guard var inner = outer[key] as? [String: Any] else { continue }
            for signed in ["signedTransactionInfo", "signedRenewalInfo"] {
                if let jws = inner[signed] as? String, let decoded = object(jws) { inner[signed] = decoded }
            }
            outer[key] = inner
        }
        if var appData = outer["appData"] as? [String: Any], let jws = appData["signedAppTransactionInfo"] as? String, let decoded = object(jws) {
            appData["signedAppTransactionInfo"] = decoded
            outer["appData"] = appData
        }
        guard let data = try? JSONSerialization.data(withJSONObject: outer, options: [.prettyPrinted, .sortedKeys]) else { return signedPayload }
        return String(decoding: data, as: UTF8.self)
    }
}

/// An action's form: its CSRF token, and what the action takes.
protocol DashboardActionForm: Decodable { var csrf: String? { get } }

/// Every dashboard answer's headers (outside the generic ``DashboardRoutes``, which cannot hold a stored static).
private let dashboardSecurityHeaders: HTTPFields = [
    .contentType: "text/html; charset=utf-8",
    .cacheControl: "no-store",
    .init("Content-Security-Policy")!: "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    .init("X-Frame-Options")!: "DENY",
    .init("X-Content-Type-Options")!: "nosniff",
    .init("Referrer-Policy")!: "same-origin",
]
