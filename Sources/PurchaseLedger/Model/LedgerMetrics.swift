import AppStoreFormats
import Foundation

/// An amount of money in one currency: milliunits (10.99 USD → 10990).
public struct CurrencyAmount: Sendable, Hashable {
    public var currency: String
    public var amount: Int64

    public init(currency: String, amount: Int64) {
        self.currency = currency
        self.amount = amount
    }
}

/// Money taken over a span, in one currency (milliunits).
public struct RevenueTotal: Sendable, Hashable {
    public var currency: String
    /// Every transaction charged in the span, at its signed price.
    public var gross: Int64
    /// Refunded in the span (by the refund's date), prorated refunds at Apple's percentage.
    public var refunded: Int64
    public var net: Int64 { gross - refunded }
    public var transactions: Int
    public var refunds: Int

    public init(currency: String, gross: Int64 = 0, refunded: Int64 = 0, transactions: Int = 0, refunds: Int = 0) {
        self.currency = currency
        self.gross = gross
        self.refunded = refunded
        self.transactions = transactions
        self.refunds = refunds
    }
}

/// The business at an instant, and the money over a span (docs/METRICS.md defines each figure).
public struct MetricsOverview: Sendable, Hashable {
    public var at: Date
    /// The App Store environment counted.
    public var environment: AppStoreEnvironment
    /// Series entitled and paying at `at` (``MetricRules/SeriesState/paid``).
    public var activeSubscriptions: Int
    public var activeTrials: Int
    public var inGracePeriod: Int
    public var inBillingRetry: Int
    /// Monthly recurring revenue per currency: each paying series' price normalised to a month, rounded once.
    public var mrr: [CurrencyAmount]
    /// Paying series whose price Apple did not sign (receipt-only): counted above, not in `mrr`.
    public var unpricedSubscriptions: Int
    /// Over `[from, to)`.
    public var revenue: [RevenueTotal]
    /// Transactions in `[from, to)` with no signed price.
    public var unpricedTransactions: Int
    /// Refunds in `[from, to)` of transactions with no signed price (no money known).
    public var unpricedRefunds: Int
    public var from: Date?
    public var to: Date?
    /// Entitled series (paid, trial or grace) per product of their latest period.
    public var activeByProduct: [String: Int]
}

/// One metric over time.
public struct MetricSeries: Sendable, Hashable {
    public enum Metric: String, CaseIterable, Sendable {
        case activeSubscriptions, activeTrials, mrr, revenue, newSubscriptions, trialStarts, trialConversions, renewals,
             churn, refunds, billingIssues, purchases
    }

    public enum Interval: String, CaseIterable, Sendable {
        case day, week, month
    }

    /// One value of a point: a name (`count`, `gross`, `voluntary`, …) and, for money, its currency.
    public struct Value: Sendable, Hashable {
        public var name: String
        public var currency: String?
        public var value: Int64
    }

    public struct Point: Sendable, Hashable {
        /// `[start, end)`, UTC: a day, a week from Monday, a calendar month.
        public var start: Date
        public var end: Date
        public var values: [Value]
    }

    public var metric: Metric
    public var interval: Interval
    public var environment: AppStoreEnvironment
    public var points: [Point]
}

/// Subscription series by the month they began, and how many were still covered at the end of each month after.
public struct CohortTable: Sendable, Hashable {
    public struct Cohort: Sendable, Hashable {
        /// The first day of the month (UTC) the series' first period began in.
        public var month: Date
        public var size: Int
        /// `retained[k]`: series with a period (paid or trial, not refunded away) running at the end of the k-th month
        /// after `month` (0: the month itself); months not yet ended are left out.
        public var retained: [Int]
    }

    public var environment: AppStoreEnvironment
    public var cohorts: [Cohort]
}
