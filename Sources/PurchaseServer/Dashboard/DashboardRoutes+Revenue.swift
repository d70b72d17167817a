import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `/dashboard/revenue`: the business view (docs/METRICS.md) for the signed-in operator — the figures now, charts over
/// days, weeks or months, the cohort table — and `/dashboard/revenue.csv`, the admin API's CSV of each figure for a
/// dashboard session (the admin API wants the bearer key, which a browser does not send). Both read the figures
/// through ``MetricsRequest``, as the admin API does, so the page, its CSV and the API never disagree.
extension DashboardRoutes {
    func addRevenueRoutes(to dashboard: some RouterMethods<Context>) {
        dashboard.get("revenue", use: revenue)
        dashboard.get("revenue.csv", use: revenueCSV)
    }

    struct RevenueInterval { var name, title: String; var current: Bool }
    struct RevenueMoney { var currency, gross, refunded, net: String; var transactions, refunds: Int }
    struct RevenueSpan { var id, title, csv: String; var rows: [RevenueMoney]; var hasRows: Bool }
    struct RevenueApproximate { var currency, mrr, net, netLastDays: String; var unconverted: String? }
    struct RevenueLink { var name, href: String }
    struct RevenueAmount { var amount: String }
    struct RevenueChart { var id, title, svg: String; var csv: [RevenueLink] }
    struct CohortMonth { var name: String }
    struct CohortCell { var known: Bool; var count: Int; var percent: String }
    struct CohortRow { var month: String; var size: Int; var cells: [CohortCell] }
    struct RevenuePage {
        var frame: Frame
        var at, environment, overviewCSV: String
        var activeSubscriptions, activeTrials, inGracePeriod, inBillingRetry: Int
        var hasMrr: Bool
        var mrr: [RevenueAmount]
        var unpriced: String?
        var spans: [RevenueSpan]
        var approximate: [RevenueApproximate]
        var intervals: [RevenueInterval]
        var intervalTitle: String
        var charts: [RevenueChart]
        var cohortsCSV: String
        var hasCohorts: Bool
        var cohortMonths: [CohortMonth]
        var cohorts: [CohortRow]
    }

    /// The days the page's "recent" revenue covers.
    static var recentDays: Int { 30 }

    /// `GET /dashboard/revenue[?interval=day|week|month]`: day by default, over 30 days; 12 weeks; 12 months.
    @Sendable func revenue(_ request: Request, context: Context) async throws -> Response {
        guard let frame = try await signedIn(request, title: "Revenue") else { return Self.redirect("/dashboard/login") }
        let intervalName = request.uri.queryParameters["interval"].map(String.init) ?? "day"
        guard let interval = MetricSeries.Interval(rawValue: intervalName) else { throw APIError.badRequest("interval is day, week or month") }
        func query(_ parameters: [String: String]) throws -> MetricsRequest {
            try MetricsRequest(parameters, wantsCSV: false, services: services)
        }
        let now = services.now()
        // One pair of bounds for the figure and its CSV link, so the file holds what the page shows.
        func millis(_ date: Date) -> String { String(Int64((date.timeIntervalSince1970 * 1000).rounded(.down))) }
        let recent = ["from": millis(now.addingTimeInterval(-Double(Self.recentDays) * 86_400)), "to": millis(now)]
        let overview = try await query([:]).overview(services)
        let lastDays = try await query(recent).overview(services)
        func series(_ metric: MetricSeries.Metric) async throws -> MetricSeriesReply {
            try await query(["metric": metric.rawValue, "interval": interval.rawValue]).series(services)
        }
        let cohorts = try await query([:]).cohorts(services)

        let mrr = try await series(.mrr)
        let labels = mrr.points.map { Self.intervalLabel($0.start, interval) }
        var charts = [RevenueChart]()
        func chart(_ id: String, _ title: String, _ metrics: [MetricSeries.Metric], _ lines: [LineChart.Line], money: Bool) -> RevenueChart {
            var drawn = LineChart(labels: labels, lines: lines, labelEvery: interval == .day ? 7 : 3)
            if money { drawn.format = { DashboardMoney.amount(Int64(($0 * 1000).rounded())) } }
            return RevenueChart(id: id, title: title, svg: drawn.svg, csv: metrics.map {
                RevenueLink(name: $0.rawValue, href: "/dashboard/revenue.csv?what=series&metric=\($0.rawValue)&interval=\(interval.rawValue)")
            })
        }
        // Money is drawn in whole units of its currency (the ledger keeps milliunits): the axis reads 39.99, not 39990.
        let mrrLines = Self.currencies(mrr).map { currency in
            LineChart.Line(name: currency, values: mrr.points.map { Double(Self.value($0, "mrr", currency)) / 1000 })
        }
        charts.append(chart("mrr", "MRR per currency", [.mrr], mrrLines.isEmpty ? [LineChart.Line(name: "MRR", values: labels.map { _ in 0 })] : mrrLines,
                            money: true))
        let paid = try await series(.activeSubscriptions), trials = try await series(.activeTrials)
        charts.append(chart("actives", "Active subscriptions and trials", [.activeSubscriptions, .activeTrials], [
            LineChart.Line(name: "paid", values: paid.points.map { Double(Self.value($0, MetricSeries.Metric.activeSubscriptions.rawValue, nil)) }),
            LineChart.Line(name: "trials", values: trials.points.map { Double(Self.value($0, MetricSeries.Metric.activeTrials.rawValue, nil)) }),
        ], money: false))
        let money = try await series(.revenue)
        let moneyCurrencies = Self.currencies(money)
        for currency in moneyCurrencies.isEmpty ? [""] : moneyCurrencies {
            let lines = ["gross", "refunded", "net"].map { name in
                LineChart.Line(name: name, values: money.points.map { Double(Self.value($0, name, currency)) / 1000 })
            }
            charts.append(chart("revenue-\(currency.isEmpty ? "none" : currency)", currency.isEmpty ? "Revenue (none yet)" : "Revenue in \(currency)",
                                [.revenue], lines, money: true))
        }
        let starts = try await series(.trialStarts), conversions = try await series(.trialConversions)
        charts.append(chart("trials", "Trial starts and conversions", [.trialStarts, .trialConversions], [
            LineChart.Line(name: "trial starts", values: starts.points.map { Double(Self.value($0, MetricSeries.Metric.trialStarts.rawValue, nil)) }),
            LineChart.Line(name: "conversions", values: conversions.points.map { Double(Self.value($0, MetricSeries.Metric.trialConversions.rawValue, nil)) }),
        ], money: false))
        let churn = try await series(.churn)
        var churnLines = ["voluntary", "billing"].map { name in LineChart.Line(name: name, values: churn.points.map { Double(Self.value($0, name, nil)) }) }
        // Neither voluntary nor billing (Apple's other expiration reasons): drawn only when there is some, to keep the pair readable.
        let other = churn.points.map { Double(Self.value($0, "other", nil)) }
        if other.contains(where: { $0 != 0 }) { churnLines.append(LineChart.Line(name: "other", values: other)) }
        charts.append(chart("churn", "Churn: voluntary and billing", [.churn], churnLines, money: false))

        let width = cohorts.cohorts.map(\.retained.count).max() ?? 0
        let unpriced = overview.unpricedSubscriptions + overview.unpricedTransactions > 0
            ? "\(overview.unpricedSubscriptions) paying subscriptions and \(overview.unpricedTransactions) transactions have no price Apple signed "
                + "(receipt-only): counted above, left out of the money."
            : nil
        let approximate = overview.approximateTotal.map { total in
            RevenueApproximate(currency: total.currency, mrr: DashboardMoney.text(total.mrr, total.currency), net: DashboardMoney.text(total.net, total.currency),
                               netLastDays: lastDays.approximateTotal.map { DashboardMoney.text($0.net, total.currency) } ?? "",
                               unconverted: total.unconverted.isEmpty ? nil : total.unconverted.joined(separator: ", "))
        }
        func span(_ id: String, _ title: String, _ reply: MetricsOverviewReply, _ parameters: [String: String]) -> RevenueSpan {
            let rows = reply.revenue.map {
                RevenueMoney(currency: $0.currency, gross: DashboardMoney.text($0.gross, $0.currency), refunded: DashboardMoney.text($0.refunded, $0.currency),
                             net: DashboardMoney.text($0.net, $0.currency), transactions: $0.transactions, refunds: $0.refunds)
            }
            let csv = (["what": "overview"].merging(parameters) { $1 }).sorted { $0.key > $1.key }.map { "\($0.key)=\($0.value)" }
            return RevenueSpan(id: id, title: title, csv: "/dashboard/revenue.csv?" + csv.joined(separator: "&"), rows: rows, hasRows: !rows.isEmpty)
        }
        return render("revenue", RevenuePage(
            frame: frame, at: Self.time(overview.at), environment: overview.environment, overviewCSV: "/dashboard/revenue.csv?what=overview",
            activeSubscriptions: overview.activeSubscriptions, activeTrials: overview.activeTrials, inGracePeriod: overview.inGracePeriod,
            inBillingRetry: overview.inBillingRetry, hasMrr: !overview.mrr.isEmpty,
            mrr: overview.mrr.map { RevenueAmount(amount: DashboardMoney.text($0.amount, $0.currency)) }, unpriced: unpriced,
            spans: [span("revenue-all", "All time", overview, [:]), span("revenue-recent", "The last \(Self.recentDays) days (whole UTC days)", lastDays, recent)],
            approximate: approximate.map { [$0] } ?? [],
            intervals: MetricSeries.Interval.allCases.map {
                RevenueInterval(name: $0.rawValue, title: Self.intervalTitle($0), current: $0 == interval)
            },
            intervalTitle: Self.intervalTitle(interval), charts: charts, cohortsCSV: "/dashboard/revenue.csv?what=cohorts",
            hasCohorts: !cohorts.cohorts.isEmpty, cohortMonths: (0..<width).map { CohortMonth(name: "M\($0)") },
            cohorts: cohorts.cohorts.map { cohort in
                CohortRow(month: Self.monthLabel(cohort.month), size: cohort.size, cells: (0..<width).map { index in
                    guard index < cohort.retained.count else { return CohortCell(known: false, count: 0, percent: "") }
                    let count = cohort.retained[index]
                    let percent = cohort.size > 0 ? Int((Double(count) * 100 / Double(cohort.size)).rounded()) : 0
                    return CohortCell(known: true, count: count, percent: "\(percent)%")
                })
            }))
    }

    /// `GET /dashboard/revenue.csv?what=overview|series|cohorts&…`: the admin API's CSV, its parameters the admin API's.
    @Sendable func revenueCSV(_ request: Request, context: Context) async throws -> Response {
        guard try await signedIn(request, title: "Revenue") != nil else { return Self.redirect("/dashboard/login") }
        let query = try MetricsRequest(request, services: services)
        let rows: [[String]]
        let name: String
        switch query.text("what") {
        case "overview":
            rows = try await query.overview(services).csvRows
            name = "overview"
        case "series":
            let reply = try await query.series(services)
            rows = reply.csvRows
            name = "\(reply.metric)-\(reply.interval)"
        case "cohorts":
            rows = try await query.cohorts(services).csvRows
            name = "cohorts"
        default:
            throw APIError.badRequest("what is overview, series or cohorts")
        }
        var response = CSVReply.encode(rows)
        // A file to keep, named for what it holds; never cached, like every dashboard answer (the figures are the business's).
        response.headers[.contentDisposition] = "attachment; filename=\"iapkit-\(name).csv\""
        response.headers[.cacheControl] = "no-store"
        response.headers[.init("X-Content-Type-Options")!] = "nosniff"
        return response
    }

    /// The currencies a series' values name, in order.
    static func currencies(_ series: MetricSeriesReply) -> [String] {
        Set(series.points.flatMap { $0.values.compactMap(\.currency) }).sorted()
    }

    /// A point's value of `name` in `currency` (nil: a count); 0 when the point has none.
    static func value(_ point: MetricSeriesReply.Point, _ name: String, _ currency: String?) -> Int64 {
        point.values.first { $0.name == name && $0.currency == currency }?.value ?? 0
    }

    static func intervalTitle(_ interval: MetricSeries.Interval) -> String {
        switch interval {
        case .day: "30 days"
        case .week: "12 weeks"
        case .month: "12 months"
        }
    }

    static func intervalLabel(_ start: Date, _ interval: MetricSeries.Interval) -> String {
        interval == .month ? monthLabel(start) : day(start)
    }

    static func monthLabel(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month())
    }
}

/// Money as an operator reads it (outside the generic ``DashboardRoutes``, which cannot hold a stored static).
enum DashboardMoney {
    /// ISO 4217 currencies with no minor unit among those the App Store sells in.
    static let wholeCurrencies: Set<String> = ["CLP", "ISK", "JPY", "KRW", "PYG", "UGX", "VND", "XAF", "XOF"]

    /// Milliunits as `39.99 USD`: grouped by thousands, no decimals for a currency without minor units.
    static func text(_ milliunits: Int64, _ currency: String) -> String {
        "\(amount(milliunits, decimals: wholeCurrencies.contains(currency) ? 0 : 2)) \(currency)"
    }

    static func amount(_ milliunits: Int64, decimals: Int = 2) -> String {
        let scale: UInt64 = decimals == 0 ? 1000 : 10
        // Half away from zero, on the magnitude: -0.005 is -0.01, as 0.005 is 0.01.
        let magnitude = (milliunits.magnitude + scale / 2) / scale
        var digits = String(decimals == 0 ? magnitude : magnitude / 100)
        var grouped = ""
        while digits.count > 3 {
            grouped = "," + digits.suffix(3) + grouped
            digits.removeLast(3)
        }
        grouped = digits + grouped
        if decimals > 0 {
            let cents = magnitude % 100
            grouped += (cents < 10 ? ".0" : ".") + String(cents)
        }
        return (milliunits < 0 && magnitude > 0 ? "-" : "") + grouped
    }
}
