import Foundation

/// The business view's query words (docs/METRICS.md).
public enum MetricsQuery {
    /// The metrics `GET /admin/metrics/series` answers.
    public static let metrics = ["activeSubscriptions", "activeTrials", "mrr", "revenue", "newSubscriptions", "trialStarts",
                                 "trialConversions", "renewals", "churn", "refunds", "billingIssues", "purchases"]
    /// Every metrics operation: one product only; the App Store environment counted (`Production` by default, or the
    /// server's only one).
    public static let common = [APIEndpoint.QueryParameter("productId", .string),
                                APIEndpoint.QueryParameter("environment", .oneOf(["Production", "Sandbox", "Xcode", "LocalTesting"]))]
}

extension APIEndpoint.QueryParameter {
    /// An instant in milliseconds since 1970.
    static func millis(_ name: String) -> Self { Self(name, .integer(0...253_402_300_799_999)) }
}

/// An amount in one currency, in milliunits (10.99 USD → 10990).
public struct MoneyAmount: Codable, Hashable, Sendable {
    public var currency: String
    public var amount: Int64

    public init(currency: String, amount: Int64) {
        self.currency = currency
        self.amount = amount
    }
}

/// Money over a span in one currency, in milliunits.
public struct RevenueSummary: Codable, Hashable, Sendable {
    public var currency: String
    public var gross: Int64
    public var refunded: Int64
    public var net: Int64
    public var transactions: Int
    public var refunds: Int

    public init(currency: String, gross: Int64, refunded: Int64, net: Int64, transactions: Int, refunds: Int) {
        self.currency = currency
        self.gross = gross
        self.refunded = refunded
        self.net = net
        self.transactions = transactions
        self.refunds = refunds
    }
}

/// An approximate total in one currency from the configured rates (`metrics.rates`): labelled approximate, never mixed
/// with the exact per-currency figures.
public struct ApproximateTotal: Codable, Hashable, Sendable {
    public var currency: String
    public var mrr: Int64
    public var net: Int64
    /// Currencies the rate table does not name, left out of the total.
    public var unconverted: [String]
    public var approximate: Bool

    public init(currency: String, mrr: Int64, net: Int64, unconverted: [String]) {
        self.currency = currency
        self.mrr = mrr
        self.net = net
        self.unconverted = unconverted
        approximate = true
    }
}

/// `GET /admin/metrics/overview`.
public struct MetricsOverviewReply: Codable, Hashable, Sendable {
    public var at: Date
    public var environment: String
    public var productId: String?
    public var activeSubscriptions: Int
    public var activeTrials: Int
    public var inGracePeriod: Int
    public var inBillingRetry: Int
    public var mrr: [MoneyAmount]
    /// Paying series whose price Apple did not sign (a receipt-only purchase): counted, not in `mrr`.
    public var unpricedSubscriptions: Int
    /// Over `[from, to)` (whole UTC days; all time when absent).
    public var revenue: [RevenueSummary]
    public var unpricedTransactions: Int
    /// Refunds in the span of transactions with no signed price: refunds, no money known.
    public var unpricedRefunds: Int
    public var from: Date?
    public var to: Date?
    public var approximateTotal: ApproximateTotal?

    public init(at: Date, environment: String, productId: String?, activeSubscriptions: Int, activeTrials: Int, inGracePeriod: Int,
                inBillingRetry: Int, mrr: [MoneyAmount], unpricedSubscriptions: Int, revenue: [RevenueSummary], unpricedTransactions: Int,
                unpricedRefunds: Int = 0, from: Date?, to: Date?, approximateTotal: ApproximateTotal?) {
        self.at = at
        self.environment = environment
        self.productId = productId
        self.activeSubscriptions = activeSubscriptions
        self.activeTrials = activeTrials
        self.inGracePeriod = inGracePeriod
        self.inBillingRetry = inBillingRetry
        self.mrr = mrr
        self.unpricedSubscriptions = unpricedSubscriptions
        self.revenue = revenue
        self.unpricedTransactions = unpricedTransactions
        self.unpricedRefunds = unpricedRefunds
        self.from = from
        self.to = to
        self.approximateTotal = approximateTotal
    }
}

/// `GET /admin/metrics/series`.
public struct MetricSeriesReply: Codable, Hashable, Sendable {
    public struct Value: Codable, Hashable, Sendable {
        /// The metric's own name for a count, or a part of it: `gross`, `refunded`, `net`, `transactions`, `refunds`
        /// (revenue, refunds), `voluntary`, `billing`, `other` (churn), `mrr`.
        public var name: String
        /// Money's currency (amounts in milliunits); absent for counts.
        public var currency: String?
        public var value: Int64

        public init(name: String, currency: String?, value: Int64) {
            self.name = name
            self.currency = currency
            self.value = value
        }
    }

    public struct Point: Codable, Hashable, Sendable {
        /// `[start, end)`, UTC.
        public var start: Date
        public var end: Date
        public var values: [Value]

        public init(start: Date, end: Date, values: [Value]) {
            self.start = start
            self.end = end
            self.values = values
        }
    }

    public var metric: String
    public var interval: String
    public var environment: String
    public var productId: String?
    public var points: [Point]

    public init(metric: String, interval: String, environment: String, productId: String?, points: [Point]) {
        self.metric = metric
        self.interval = interval
        self.environment = environment
        self.productId = productId
        self.points = points
    }
}

/// `GET /admin/metrics/cohorts`.
public struct CohortsReply: Codable, Hashable, Sendable {
    public struct Cohort: Codable, Hashable, Sendable {
        /// The first instant of the month (UTC).
        public var month: Date
        public var size: Int
        /// `retained[k]`: still running at the end of the k-th month after `month` (0: the month itself).
        public var retained: [Int]

        public init(month: Date, size: Int, retained: [Int]) {
            self.month = month
            self.size = size
            self.retained = retained
        }
    }

    public var environment: String
    public var productId: String?
    public var cohorts: [Cohort]

    public init(environment: String, productId: String?, cohorts: [Cohort]) {
        self.environment = environment
        self.productId = productId
        self.cohorts = cohorts
    }
}
