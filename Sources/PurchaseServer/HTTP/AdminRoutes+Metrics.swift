import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `/admin/metrics/…`: the business view (docs/METRICS.md), as JSON or, with `Accept: text/csv`, as CSV rows.
extension AdminRoutes {
    func addMetricRoutes(to admin: some RouterMethods<Context>) {
        admin.get("metrics/overview", use: metricsOverview)
        admin.get("metrics/series", use: metricSeries)
        admin.get("metrics/cohorts", use: metricCohorts)
    }

    /// `GET /admin/metrics/overview[?at=MS][&from=MS&to=MS][&productId=…][&environment=…]`.
    @Sendable func metricsOverview(_ request: Request, context: Context) async throws -> Response {
        let query = try MetricsRequest(request, services: services)
        let reply = try await query.overview(services)
        return query.wantsCSV ? CSVReply.encode(reply.csvRows) : try JSONReply.encode(reply)
    }

    /// `GET /admin/metrics/series?metric=…&interval=day|week|month[&from=MS&to=MS]`: the last 30 days, 12 weeks or 12
    /// months by default.
    @Sendable func metricSeries(_ request: Request, context: Context) async throws -> Response {
        let query = try MetricsRequest(request, services: services)
        let reply = try await query.series(services)
        return query.wantsCSV ? CSVReply.encode(reply.csvRows) : try JSONReply.encode(reply)
    }

    /// `GET /admin/metrics/cohorts[?months=12]`.
    @Sendable func metricCohorts(_ request: Request, context: Context) async throws -> Response {
        let query = try MetricsRequest(request, services: services)
        let reply = try await query.cohorts(services)
        return query.wantsCSV ? CSVReply.encode(reply.csvRows) : try JSONReply.encode(reply)
    }
}

/// The figures each metrics request answers, shared by the admin API and the dashboard (which shows them, and serves
/// the same CSV to its session): one reading of the parameters, one CSV per figure.
extension MetricsRequest {
    func overview(_ services: PurchaseServices) async throws -> MetricsOverviewReply {
        let at = try millis("at"), from = try millis("from"), to = try millis("to")
        if let from, let to, from >= to { throw APIError.badRequest("from must be before to") }
        let overview = try await services.ledger.metricsOverview(at: at, now: services.now(), from: from, to: to,
                                                                 environment: environment, productId: productId)
        return MetricsOverviewReply(overview, productId: productId, rates: services.metricsRates)
    }

    /// How far back a series reaches by default: 30 days, 12 weeks or 12 months.
    static func defaultSpan(_ interval: MetricSeries.Interval) -> TimeInterval {
        switch interval {
        case .day: 30 * 86_400
        case .week: 12 * 7 * 86_400
        case .month: 365 * 86_400
        }
    }

    func series(_ services: PurchaseServices) async throws -> MetricSeriesReply {
        guard let metricName = text("metric"), let metric = MetricSeries.Metric(rawValue: metricName) else {
            throw APIError.badRequest("metric is one of \(MetricsQuery.metrics.joined(separator: ", "))")
        }
        let intervalName = text("interval") ?? "day"
        guard let interval = MetricSeries.Interval(rawValue: intervalName) else { throw APIError.badRequest("interval is day, week or month") }
        let now = services.now()
        let to = try millis("to") ?? now
        let from = try millis("from") ?? to.addingTimeInterval(-Self.defaultSpan(interval))
        guard from < to else { throw APIError.badRequest("from must be before to") }
        // At most a thousand points: ten years of weeks, under three of days.
        let intervalSeconds: Double = interval == .day ? 86_400 : interval == .week ? 7 * 86_400 : 28 * 86_400
        guard to.timeIntervalSince(from) / intervalSeconds <= 1_000 else { throw APIError.badRequest("at most 1000 \(interval.rawValue)s per series") }
        let series = try await services.ledger.metricSeries(metric, interval: interval, from: from, to: to, now: now,
                                                            environment: environment, productId: productId)
        return MetricSeriesReply(metric: metric.rawValue, interval: interval.rawValue, environment: series.environment.rawValue,
                                 productId: productId, points: series.points.map {
            .init(start: $0.start, end: $0.end, values: $0.values.map { .init(name: $0.name, currency: $0.currency, value: $0.value) })
        })
    }

    func cohorts(_ services: PurchaseServices) async throws -> CohortsReply {
        let months = try integer("months", in: 1...60) ?? 12
        let table = try await services.ledger.metricCohorts(months: months, now: services.now(), environment: environment,
                                                            productId: productId)
        return CohortsReply(environment: table.environment.rawValue, productId: productId,
                            cohorts: table.cohorts.map { .init(month: $0.month, size: $0.size, retained: $0.retained) })
    }
}

extension MetricsOverviewReply {
    var csvRows: [[String]] {
        var rows = [["figure", "currency", "value"]]
        for (name, value) in [("activeSubscriptions", activeSubscriptions), ("activeTrials", activeTrials),
                              ("inGracePeriod", inGracePeriod), ("inBillingRetry", inBillingRetry),
                              ("unpricedSubscriptions", unpricedSubscriptions), ("unpricedTransactions", unpricedTransactions),
                              ("unpricedRefunds", unpricedRefunds)] {
            rows.append([name, "", String(value)])
        }
        for item in mrr { rows.append(["mrr", item.currency, String(item.amount)]) }
        for item in revenue {
            for (name, value) in [("gross", item.gross), ("refunded", item.refunded), ("net", item.net),
                                  ("transactions", Int64(item.transactions)), ("refunds", Int64(item.refunds))] {
                rows.append([name, item.currency, String(value)])
            }
        }
        return rows
    }
}

extension MetricSeriesReply {
    var csvRows: [[String]] {
        var rows = [["start", "end", "name", "currency", "value"]]
        for point in points {
            for value in point.values {
                rows.append([CSVReply.instant(point.start), CSVReply.instant(point.end), value.name, value.currency ?? "", String(value.value)])
            }
        }
        return rows
    }
}

extension CohortsReply {
    var csvRows: [[String]] {
        let width = cohorts.map(\.retained.count).max() ?? 0
        var rows = [["month", "size"] + (0..<width).map { "month\($0)" }]
        for cohort in cohorts {
            rows.append([String(CSVReply.instant(cohort.month).prefix(7)), String(cohort.size)]
                        + (0..<width).map { $0 < cohort.retained.count ? String(cohort.retained[$0]) : "" })
        }
        return rows
    }
}

/// A metrics request's common words: the environment, the product, CSV or JSON.
struct MetricsRequest {
    let parameters: [String: String]
    /// Nil: the ledger's choice (``Ledger/metricsEnvironment()``).
    let environment: AppStoreEnvironment?
    let productId: String?
    let wantsCSV: Bool

    init(_ request: Request, services: PurchaseServices) throws {
        var parameters: [String: String] = [:]
        for (name, value) in request.uri.queryParameters { parameters[String(name)] = String(value) }
        try self.init(parameters, wantsCSV: request.headers[.accept].map { $0.lowercased().contains("text/csv") } ?? false, services: services)
    }

    init(_ parameters: [String: String], wantsCSV: Bool, services: PurchaseServices) throws {
        self.parameters = parameters
        if let name = parameters["environment"] {
            guard ["Production", "Sandbox", "Xcode", "LocalTesting"].contains(name) else {
                throw APIError.badRequest("environment is Production, Sandbox, Xcode or LocalTesting")
            }
            environment = AppStoreEnvironment(rawValue: name)
        } else {
            environment = nil
        }
        productId = try parameters["productId"].map { try InputCheck.storable($0, "productId") }
        if let productId, productId.utf8.count > 200 { throw APIError.badRequest("productId is at most 200 bytes") }
        self.wantsCSV = wantsCSV
    }

    func text(_ name: String) -> String? { parameters[name] }

    func millis(_ name: String) throws -> Date? {
        guard let text = parameters[name] else { return nil }
        guard let value = Int64(text), (0...253_402_300_799_999).contains(value) else {
            throw APIError.badRequest("\(name) is milliseconds since 1970")
        }
        return Date(timeIntervalSince1970: Double(value) / 1000)
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = parameters[name] else { return nil }
        guard let value = Int(text), range.contains(value) else { throw APIError.badRequest("\(name) is an integer in \(range)") }
        return value
    }
}

/// CSV as RFC 4180 writes it: a header row, fields quoted where they hold a comma, a quote or a line break.
enum CSVReply {
    static func encode(_ rows: [[String]]) -> Response {
        let text = rows.map { $0.map(field).joined(separator: ",") }.joined(separator: "\r\n") + "\r\n"
        return Response(status: .ok, headers: [.contentType: "text/csv; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func field(_ value: String) -> String {
        // A leading =, +, - or @ would be a formula to a spreadsheet: product ids are the operator's, but kept inert.
        var value = value
        if let first = value.first, "=+@".contains(first) || (first == "-" && Int64(value) == nil) { value = "'" + value }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// ISO 8601, UTC, to the second: what a spreadsheet reads as a time.
    static func instant(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false).timeSeparator(.colon))
    }
}

extension MetricsOverviewReply {
    init(_ overview: MetricsOverview, productId: String?, rates: MetricsRates?) {
        let revenue = overview.revenue.map {
            RevenueSummary(currency: $0.currency, gross: $0.gross, refunded: $0.refunded, net: $0.net, transactions: $0.transactions, refunds: $0.refunds)
        }
        let mrr = overview.mrr.map { MoneyAmount(currency: $0.currency, amount: $0.amount) }
        self.init(at: overview.at, environment: overview.environment.rawValue, productId: productId, activeSubscriptions: overview.activeSubscriptions,
                  activeTrials: overview.activeTrials, inGracePeriod: overview.inGracePeriod, inBillingRetry: overview.inBillingRetry,
                  mrr: mrr, unpricedSubscriptions: overview.unpricedSubscriptions, revenue: revenue,
                  unpricedTransactions: overview.unpricedTransactions, unpricedRefunds: overview.unpricedRefunds, from: overview.from, to: overview.to,
                  approximateTotal: rates.map { $0.total(mrr: mrr, revenue: revenue) })
    }
}

/// An operator's rate table (`metrics.currency`, `metrics.rates`): how many of `currency` one unit of each other
/// currency is worth. For an approximate total only; every exact figure stays in its own currency.
public struct MetricsRates: Codable, Sendable, Hashable {
    public var currency: String
    public var rates: [String: Double]

    public init(currency: String, rates: [String: Double]) {
        self.currency = currency
        self.rates = rates
    }

    func total(mrr: [MoneyAmount], revenue: [RevenueSummary]) -> ApproximateTotal {
        var unconverted: Set<String> = []
        func convert(_ amount: Int64, _ from: String) -> Double {
            if from == currency { return Double(amount) }
            guard let rate = rates[from], rate.isFinite, rate > 0 else { unconverted.insert(from); return 0 }
            return Double(amount) * rate
        }
        let mrrTotal = mrr.reduce(0.0) { $0 + convert($1.amount, $1.currency) }
        let netTotal = revenue.reduce(0.0) { $0 + convert($1.net, $1.currency) }
        return ApproximateTotal(currency: currency, mrr: Int64(mrrTotal.rounded()), net: Int64(netTotal.rounded()), unconverted: unconverted.sorted())
    }
}
