import ArgumentParser
import Foundation
import PurchaseAPI

/// `iap metrics overview|series|cohorts`: the business view (docs/METRICS.md) from a running server's admin API, as a
/// table a person reads or, with `--json`, as the server answered.
struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Subscriptions, MRR, revenue and cohorts on a running purchase server (admin API).",
        discussion: """
        The server counts one App Store environment, named in every answer: Production once its ledger holds a Production \
        purchase, Sandbox before that (`iap dev`'s purchases are Sandbox); --environment chooses. Money is shown in each \
        currency as Apple signed it.
        """,
        subcommands: [Overview.self, Series.self, Cohorts.self])

    /// What every metrics request may narrow: the product and the environment.
    struct Scope: ParsableArguments {
        @Option(help: "One product only.") var product: String?
        @Option(help: "Production, Sandbox, Xcode or LocalTesting (default: the server's choice, Production once the ledger holds one, else Sandbox).")
        var environment: String?
        @Flag(help: "Print the server's JSON answer instead of a table.") var json = false

        var query: [(String, String?)] { [("productId", product), ("environment", environment)] }
    }

    struct Overview: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Active subscriptions, trials, grace period, billing retry and MRR at an instant; revenue over [from, to), all time by default.")
        @OptionGroup var connection: OrdersCommand.Connection
        @OptionGroup var scope: Scope
        @Option(help: "The instant judged (default now): YYYY-MM-DD (00:00 UTC) or milliseconds since 1970.") var at: MetricsInstant?
        @Option(help: "Revenue from (inclusive): YYYY-MM-DD (00:00 UTC) or milliseconds.") var from: MetricsInstant?
        @Option(help: "Revenue to (exclusive): YYYY-MM-DD (00:00 UTC) or milliseconds.") var to: MetricsInstant?

        func run() async throws {
            let data = try await connection.fetch("GET", MetricsCommand.path("overview", [("at", at?.text), ("from", from?.text), ("to", to?.text)] + scope.query))
            guard !scope.json else { return Output.print(String(decoding: data, as: UTF8.self)) }
            Output.print(MetricsCommand.render(try APIJSON.decoder().decode(MetricsOverviewReply.self, from: data)))
        }
    }

    struct Series: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One metric per day, week or month over [from, to): the last 30 days, 12 weeks or 12 months by default.")
        @OptionGroup var connection: OrdersCommand.Connection
        @OptionGroup var scope: Scope
        @Option(help: "One of \(MetricsQuery.metrics.joined(separator: ", ")).") var metric: String
        @Option(help: "day, week or month.") var interval: String = "day"
        @Option(help: "From (inclusive): YYYY-MM-DD (00:00 UTC) or milliseconds since 1970.") var from: MetricsInstant?
        @Option(help: "To (exclusive, default now): YYYY-MM-DD (00:00 UTC) or milliseconds.") var to: MetricsInstant?

        func run() async throws {
            let data = try await connection.fetch("GET", MetricsCommand.path("series", [("metric", metric), ("interval", interval),
                                                                                        ("from", from?.text), ("to", to?.text)] + scope.query))
            guard !scope.json else { return Output.print(String(decoding: data, as: UTF8.self)) }
            Output.print(MetricsCommand.render(try APIJSON.decoder().decode(MetricSeriesReply.self, from: data)))
        }
    }

    struct Cohorts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Subscriptions by the month they began, and how many still ran at the end of each month after.")
        @OptionGroup var connection: OrdersCommand.Connection
        @OptionGroup var scope: Scope
        @Option(help: "How many months of cohorts (1 to 60; default 12).") var months: Int?

        func run() async throws {
            let data = try await connection.fetch("GET", MetricsCommand.path("cohorts", [("months", months.map(String.init))] + scope.query))
            guard !scope.json else { return Output.print(String(decoding: data, as: UTF8.self)) }
            Output.print(MetricsCommand.render(try APIJSON.decoder().decode(CohortsReply.self, from: data)))
        }
    }

    static func path(_ operation: String, _ parameters: [(String, String?)]) -> String {
        var components = URLComponents()
        components.path = "/admin/metrics/\(operation)"
        let items = parameters.compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
        components.queryItems = items.isEmpty ? nil : items
        // URLComponents leaves `+` as it is, which a server reads as a space.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? components.path
    }

    static func scopeLine(environment: String, productId: String?) -> String {
        "\(environment), \(productId.map { "product \($0)" } ?? "all products")"
    }

    static func render(_ reply: MetricsOverviewReply) -> String {
        var lines = ["at \(TextTable.day(reply.at)) (\(scopeLine(environment: reply.environment, productId: reply.productId)))", ""]
        lines += TextTable(rows: [
            ["active subscriptions", String(reply.activeSubscriptions)],
            ["active trials", String(reply.activeTrials)],
            ["in grace period", String(reply.inGracePeriod)],
            ["in billing retry", String(reply.inBillingRetry)],
        ]).lines
        let span = switch (reply.from, reply.to) {
        case let (from?, to?): "from \(TextTable.day(from)) to \(TextTable.day(to)), exclusive"
        case let (from?, nil): "from \(TextTable.day(from))"
        case let (nil, to?): "until \(TextTable.day(to)), exclusive"
        case (nil, nil): "all time"
        }
        lines += ["", "MRR at \(TextTable.day(reply.at)); revenue \(span):"]
        // One row a currency: MRR and revenue are never added across currencies.
        let currencies = (reply.mrr.map(\.currency) + reply.revenue.map(\.currency)).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        if currencies.isEmpty {
            lines.append("  nothing paid")
        } else {
            var table = TextTable(header: ["currency", "MRR", "gross", "refunded", "net", "transactions", "refunds"])
            for currency in currencies {
                let mrr = reply.mrr.first { $0.currency == currency }.map { Money.text($0.amount, currency) } ?? "-"
                if let revenue = reply.revenue.first(where: { $0.currency == currency }) {
                    table.rows.append([currency, mrr, Money.text(revenue.gross, currency), Money.text(revenue.refunded, currency),
                                       Money.text(revenue.net, currency), String(revenue.transactions), String(revenue.refunds)])
                } else {
                    table.rows.append([currency, mrr, "-", "-", "-", "0", "0"])
                }
            }
            lines += table.lines
        }
        if reply.unpricedSubscriptions > 0 || reply.unpricedTransactions > 0 {
            lines += ["", "without a signed price (not in the money above): \(reply.unpricedSubscriptions) subscriptions, \(reply.unpricedTransactions) transactions"]
        }
        if let total = reply.approximateTotal {
            lines += ["", "approximately, at the configured rates: MRR \(Money.text(total.mrr, total.currency)), net \(Money.text(total.net, total.currency))"
                      + (total.unconverted.isEmpty ? "" : " (without \(total.unconverted.joined(separator: ", ")): no rate)")]
        }
        return lines.joined(separator: "\n")
    }

    static func render(_ reply: MetricSeriesReply) -> String {
        var lines = ["\(reply.metric) by \(reply.interval) (\(scopeLine(environment: reply.environment, productId: reply.productId)))", ""]
        // A column per name and currency, in the order the server names them. A count may be a currency's too (revenue's
        // transactions): its header names the currency, where an amount's cells do.
        var columns: [MetricSeriesReply.Value] = []
        for value in reply.points.flatMap(\.values) where !columns.contains(where: { $0.name == value.name && $0.currency == value.currency }) {
            columns.append(value)
        }
        guard !columns.isEmpty else {
            let span = reply.points.first.map { "from \(TextTable.day($0.start)) to \(TextTable.day(reply.points.last?.end ?? $0.end))" } ?? "in this span"
            return (lines + ["  nothing counted \(span)"]).joined(separator: "\n")
        }
        func isMoney(_ value: MetricSeriesReply.Value) -> Bool { value.currency != nil && Money.names.contains(value.name) }
        var table = TextTable(header: ["start", "end"] + columns.map { column in
            isMoney(column) ? column.name : column.name + (column.currency.map { " (\($0))" } ?? "")
        })
        for point in reply.points {
            table.rows.append([TextTable.day(point.start), TextTable.day(point.end)] + columns.map { column in
                guard let value = point.values.first(where: { $0.name == column.name && $0.currency == column.currency }) else { return "-" }
                return isMoney(value) ? Money.text(value.value, value.currency ?? "") : String(value.value)
            })
        }
        lines += table.lines
        return lines.joined(separator: "\n")
    }

    static func render(_ reply: CohortsReply) -> String {
        var lines = ["cohorts by the month their first period began (\(scopeLine(environment: reply.environment, productId: reply.productId)))", ""]
        guard !reply.cohorts.isEmpty else { return (lines + ["  no subscriptions began"]).joined(separator: "\n") }
        let width = reply.cohorts.map(\.retained.count).max() ?? 0
        var table = TextTable(header: ["month", "size"] + (0..<width).map { "+\($0)" })
        for cohort in reply.cohorts {
            table.rows.append([TextTable.day(cohort.month), String(cohort.size)] + (0..<width).map { index in
                guard index < cohort.retained.count else { return "" }
                let kept = cohort.retained[index]
                return cohort.size > 0 ? "\(kept) (\(kept * 100 / cohort.size)%)" : String(kept)
            })
        }
        lines += table.lines
        lines += ["", "+k: still running at the end of the k-th month after the cohort's own"]
        return lines.joined(separator: "\n")
    }
}

/// An instant as an operator types it: a UTC day or the API's milliseconds.
struct MetricsInstant: ExpressibleByArgument {
    let milliseconds: Int64

    var text: String { String(milliseconds) }

    init?(argument: String) {
        if argument.allSatisfy(\.isASCII), let milliseconds = Int64(argument), milliseconds >= 0 {
            self.milliseconds = milliseconds
            return
        }
        let parts = argument.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: year, month: month, day: day)),
              calendar.dateComponents([.year, .month, .day], from: date) == DateComponents(year: year, month: month, day: day) else {
            // 2026-02-31 would otherwise be taken as 3 March.
            return nil
        }
        milliseconds = Int64(date.timeIntervalSince1970) * 1000
    }
}

/// Milliunits as a person reads money: `39.99 USD`; a third decimal only when the amount has one (an MRR share).
enum Money {
    /// The series' values that are amounts; the others (`transactions`, `refunds`, churn's reasons…) are counts.
    static let names: Set<String> = ["gross", "refunded", "net", "mrr"]

    static func text(_ milliunits: Int64, _ currency: String) -> String {
        let sign = milliunits < 0 ? "-" : ""
        let magnitude = milliunits.magnitude
        let units = magnitude / 1000, fraction = magnitude % 1000
        let decimals = fraction % 10 == 0 ? String(fraction / 10).leftPadded(to: 2) : String(fraction).leftPadded(to: 3)
        return "\(sign)\(units).\(decimals) \(currency)"
    }
}

/// Columns aligned with two spaces between them; numbers and money to the right.
struct TextTable {
    var header: [String]?
    var rows: [[String]]

    init(header: [String]? = nil, rows: [[String]] = []) {
        self.header = header
        self.rows = rows
    }

    var lines: [String] {
        let all = (header.map { [$0] } ?? []) + rows
        let count = all.map(\.count).max() ?? 0
        let widths = (0..<count).map { column in all.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        let numeric = (0..<count).map { column in
            rows.contains { column < $0.count && !$0[column].isEmpty } && rows.allSatisfy { column >= $0.count || Self.isNumeric($0[column]) }
        }
        return all.map { row in
            (0..<count).map { column in
                let cell = column < row.count ? row[column] : ""
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return numeric[column] ? pad + cell : cell + pad
            }
            .joined(separator: "  ")
            .replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
    }

    /// A count, an amount with its currency, a count with its share, or nothing: what lines up by its last digit. Not a
    /// day, nor an id, which read from their start.
    static func isNumeric(_ cell: String) -> Bool {
        cell.isEmpty || cell == "-" || Int64(cell) != nil
            || cell.wholeMatch(of: /-?[0-9]+\.[0-9]{2,3} [A-Z]{3}/) != nil || cell.wholeMatch(of: /[0-9]+ \([0-9]+%\)/) != nil
    }

    /// A UTC day, as the API's days are.
    static func day(_ date: Date) -> String { date.formatted(.iso8601.year().month().day()) }

    /// A UTC instant to the minute.
    static func minute(_ date: Date) -> String {
        day(date) + " " + date.formatted(.iso8601.time(includingFractionalSeconds: false).timeSeparator(.colon)).prefix(5)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
