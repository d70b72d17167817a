import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
@testable import PurchaseServer
import Testing

/// Issue 33's revenue page: the dashboard shows the admin API's business view, as figures, inline SVG charts, the
/// cohort table and the same CSV, to a dashboard session only. The money is made through the simulator, so every
/// amount below is what Apple's signed prices add up to.
@Suite("Dashboard: the revenue page and its CSV", .timeLimit(.minutes(3)))
struct DashboardRevenueTests {
    typealias Browser = DashboardTests.Browser

    /// The yearly plan (39.99) and Premium (9.99, then refunded) for one customer, the monthly plan's free week for another:
    /// one paying subscription, one trial, MRR 39.99 / 12, gross 49.98, refunded 9.99, net 39.99 (all USD).
    static func sell(_ system: System) async throws {
        let (yearly, yearlyStore) = try await system.customer("yara")
        _ = try await system.buy(PurchaseFlowTests.yearly, account: yearly, storeAccount: yearlyStore)
        let (_, premium, _) = try await system.buy(PurchaseFlowTests.premium, account: yearly, storeAccount: yearlyStore)
        _ = try await system.device(.post, "/sim/transactions/\(try #require(premium.transactionId))/refund")
        let (trial, trialStore) = try await system.customer("tess")
        _ = try await system.buy(PurchaseFlowTests.monthly, account: trial, storeAccount: trialStore)
        // The refund reaches the server as Apple's notification: the premium is gone once it has.
        #expect(try await !system.entitlements(yearly).entitlementNames.contains("premium"), "the refund was delivered")
    }

    /// Runs `body` with the system's services served in process, a rate table set (EUR, 1 USD = 0.9 EUR).
    static func withRates(_ system: System, _ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        var services = system.services
        services.metricsRates = MetricsRates(currency: "EUR", rates: ["USD": 0.9])
        try await buildApplication(services, port: 0).test(.router) { client in try await body(client) }
    }

    @Test("The page shows the admin API's figures in money an operator reads (3.33 USD MRR, 49.98 / 9.99 / 39.99 USD), the approximate total labelled, every chart as inline SVG, the cohort table")
    func page() async throws {
        try await System.run(.sqlite) { system in
            try await Self.sell(system)
            let (status, answer) = try await system.admin(.get, "/admin/metrics/overview")
            #expect(status == .ok)
            let overview = try decode(MetricsOverviewReply.self, answer)
            #expect(overview.activeSubscriptions == 1 && overview.activeTrials == 1, "\(overview)")
            #expect(overview.mrr.map(\.currency) == ["USD"] && abs(Double(overview.mrr.first?.amount ?? 0) - 39_990.0 / 12) <= 1, "\(overview.mrr)")
            let usd = try #require(overview.revenue.first { $0.currency == "USD" })
            #expect(usd.gross == 49_980 && usd.refunded == 9_990 && usd.net == 39_990, "\(usd)")

            try await Self.withRates(system) { client in
                let browser = Browser(client)
                _ = try await browser.signIn()
                let page = try await browser.go(.get, "/dashboard/revenue")
                #expect(page.status == .ok && page.headers[.contentType] == "text/html; charset=utf-8")
                let html = page.html
                #expect(html.contains("<a href=\"/dashboard/revenue\">Revenue</a>"), "linked from the nav")
                #expect(html.contains("id=\"active-subscriptions\"><b>1</b>") && html.contains("id=\"active-trials\"><b>1</b>"))
                #expect(html.contains("id=\"grace-period\"><b>0</b>") && html.contains("id=\"billing-retry\"><b>0</b>"))
                #expect(html.contains("<b>3.33 USD</b> MRR"), "39.99 / 12")
                let row = "<td>USD</td><td class=\"n\">49.98 USD</td><td class=\"n\">9.99 USD</td><td class=\"n\">39.99 USD</td>"
                for table in ["revenue-all", "revenue-recent"] {
                    let section = try #require(Self.element(table, in: html), "\(table)")
                    #expect(section.contains(row) && section.contains("<td class=\"n\">\(usd.transactions)</td><td class=\"n\">1</td>"), "\(section)")
                }
                // 39.99 / 12 × 0.9 and 39.99 × 0.9, rounded to the cent.
                let approximate = try #require(Self.element("approximate", in: html))
                #expect(approximate.contains("Approximate total in EUR") && approximate.contains("MRR ≈ 3.00 EUR") && approximate.contains("≈ 35.99 EUR all time"),
                        "\(approximate)")
                for chart in ["mrr", "actives", "revenue-USD", "trials", "churn"] {
                    let figure = try #require(Self.element("chart-\(chart)", in: html), "chart-\(chart)")
                    #expect(figure.contains("<svg") && figure.contains("<polyline") && figure.contains("/dashboard/revenue.csv?what=series&amp;metric="),
                            "\(chart)")
                }
                // The MRR line ends at today's figure; the actives chart's last paid and trial points are the counts above.
                #expect(try #require(Self.element("chart-mrr", in: html)).contains(": 3.33</title>"))
                let actives = try #require(Self.element("chart-actives", in: html))
                #expect(Self.lastTitle("paid", in: actives)?.hasSuffix("paid: 1") == true && Self.lastTitle("trials", in: actives)?.hasSuffix("trials: 1") == true,
                        "\(actives)")
                #expect(!html.contains("<script"), "no script: the policy forbids it")
                // The cohort table: this month's two subscriptions (the yearly plan and the trial), as the admin API counts them.
                let cohorts = try decode(CohortsReply.self, await system.admin(.get, "/admin/metrics/cohorts").1)
                let month = try #require(cohorts.cohorts.last)
                #expect(month.size == 2, "\(cohorts)")
                let table = try #require(Self.element("cohorts", in: html))
                #expect(table.contains("<td>\(String(CSVReply.instant(month.month).prefix(7)))</td><td class=\"n\">2</td>"), "\(table)")

                for interval in ["week", "month"] {
                    let other = try await browser.go(.get, "/dashboard/revenue?interval=\(interval)")
                    #expect(other.status == .ok && other.html.contains("class=\"current\">by \(interval)</a>") && other.html.contains("<b>3.33 USD</b> MRR"))
                    #expect(other.html.contains("metric=mrr&amp;interval=\(interval)"), "the charts' CSV follow the interval")
                }
                #expect(try await browser.go(.get, "/dashboard/revenue?interval=year").status == .badRequest)
            }
        }
    }

    @Test("The CSV routes answer the admin API's CSV, byte for byte, to a dashboard session; signed out, the page and the CSV send to the sign-in")
    func csv() async throws {
        try await System.run(.sqlite) { system in
            try await Self.sell(system)
            try await Self.withRates(system) { client in
                let signedOut = Browser(client)
                for path in ["/dashboard/revenue", "/dashboard/revenue.csv?what=overview", "/dashboard/revenue.csv?what=cohorts"] {
                    let refused = try await signedOut.go(.get, path)
                    #expect(refused.status == .seeOther && refused.headers[.location] == "/dashboard/login" && refused.html.isEmpty, "\(path)")
                }
                let browser = Browser(client)
                _ = try await browser.signIn()
                var admin = HTTPFields()
                admin[.authorization] = "Bearer \(System.adminKey)"
                admin[.accept] = "text/csv"
                for (query, admitted) in [("what=overview", "/admin/metrics/overview"),
                                          ("what=series&metric=mrr&interval=day", "/admin/metrics/series?metric=mrr&interval=day"),
                                          ("what=series&metric=revenue&interval=week", "/admin/metrics/series?metric=revenue&interval=week"),
                                          ("what=cohorts", "/admin/metrics/cohorts")] {
                    let mine = try await browser.go(.get, "/dashboard/revenue.csv?" + query)
                    let theirs = try await client.execute(uri: admitted, method: .get, headers: admin)
                    #expect(mine.status == .ok && mine.headers[.contentType] == "text/csv; charset=utf-8", "\(query)")
                    #expect(mine.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"iapkit-") == true && mine.headers[.cacheControl] == "no-store")
                    #expect(theirs.status == .ok && mine.html == String(buffer: theirs.body), "\(query)\n\(mine.html)")
                }
                let overview = try await browser.go(.get, "/dashboard/revenue.csv?what=overview").html.components(separatedBy: "\r\n")
                #expect(overview.first == "figure,currency,value")
                for line in ["activeSubscriptions,,1", "activeTrials,,1", "mrr,USD,3333", "gross,USD,49980", "refunded,USD,9990", "net,USD,39990"] {
                    #expect(overview.contains(line), "\(line) in \(overview)")
                }
                let series = try await browser.go(.get, "/dashboard/revenue.csv?what=series&metric=revenue&interval=day").html.components(separatedBy: "\r\n")
                #expect(series.first == "start,end,name,currency,value")
                let gross = series.filter { $0.contains(",gross,USD,") }.compactMap { Int64($0.split(separator: ",").last ?? "") }
                #expect(gross.reduce(0, +) == 49_980, "\(series)")
                // The page's 30-day link: the same bounds as its table.
                let page = try await browser.go(.get, "/dashboard/revenue").html
                let link = try #require(page.range(of: "/dashboard/revenue.csv?what=overview&amp;to=").map { page[$0.lowerBound...].prefix { $0 != "\"" } })
                let recent = try await browser.go(.get, link.replacingOccurrences(of: "&amp;", with: "&")).html
                #expect(recent.contains("net,USD,39990\r\n"), "\(recent)")
                #expect(try await browser.go(.get, "/dashboard/revenue.csv?what=everything").status == .badRequest)
                #expect(try await browser.go(.get, "/dashboard/revenue.csv?what=series&metric=nothing").status == .badRequest)
            }
        }
    }

    @Test("Money reads as an operator writes it: cents, thousands grouped, half away from zero, whole currencies without decimals")
    func money() {
        #expect(DashboardMoney.text(39_990, "USD") == "39.99 USD")
        #expect(DashboardMoney.text(3_333, "USD") == "3.33 USD")
        #expect(DashboardMoney.text(3_335, "EUR") == "3.34 EUR")
        #expect(DashboardMoney.text(-9_990, "USD") == "-9.99 USD")
        #expect(DashboardMoney.text(-4, "USD") == "0.00 USD")
        #expect(DashboardMoney.text(50, "USD") == "0.05 USD")
        #expect(DashboardMoney.text(1_234_567_890, "USD") == "1,234,567.89 USD")
        #expect(DashboardMoney.text(120_000, "JPY") == "120 JPY")
        #expect(DashboardMoney.text(1_200_500, "JPY") == "1,201 JPY")
    }

    /// The element whose `id` is `id`, up to the end of its enclosing tag's kind (enough for a table, a figure, a paragraph).
    static func element(_ id: String, in html: String) -> String? {
        guard let start = html.range(of: "id=\"\(id)\"") else { return nil }
        let tag = html[..<start.lowerBound].split(separator: "<").last?.split(separator: " ").first.map(String.init) ?? ""
        guard !tag.isEmpty, let end = html.range(of: "</\(tag)>", range: start.upperBound..<html.endIndex) else { return nil }
        return String(html[start.lowerBound..<end.upperBound])
    }

    /// The last point title of the line `name` in a chart.
    static func lastTitle(_ name: String, in svg: String) -> String? {
        svg.components(separatedBy: "<title>").dropFirst().map { $0.components(separatedBy: "</title>")[0] }.last { $0.contains(" \(name): ") }
    }
}
