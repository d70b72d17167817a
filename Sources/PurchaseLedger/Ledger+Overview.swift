import AppStoreFormats
import Foundation

/// The ledger at a glance, for an operator: what is active, what happened per day, what waits for a person.
public struct LedgerOverview: Sendable, Hashable {
    /// One UTC day's counts.
    public struct Day: Sendable, Hashable {
        public var day: Date
        /// First purchases: a one-time product, or the first period of a subscription series (a Family Sharing copy is
        /// the purchaser's, counted once).
        public var purchases: Int
        /// Later periods of subscription series.
        public var renewals: Int
        /// Refunds that day (money went back: not an upgrade's or a Family Sharing revocation; docs/METRICS.md).
        public var refunds: Int
        /// `DID_FAIL_TO_RENEW` notifications signed that day.
        public var billingIssues: Int
    }

    public struct ProductCount: Sendable, Hashable {
        public var productId: String
        public var count: Int
    }

    /// Subscription series entitled now (paid, trial or grace period; a Family Sharing copy is its purchaser's series),
    /// by the product of their latest period.
    public var activeSubscriptions: [ProductCount]
    /// The last `days` UTC days, oldest first, today included.
    public var days: [Day]
    /// Open orders with evidence of payment (``Ledger/OrderFilter/paidUnfulfilled``).
    public var lostOrders: Int
    public var notificationsStored: Int
    public var notificationsLastDay: Int
    /// Transactions only notifications told of, which no account has claimed.
    public var unboundTransactions: Int
    public var webhookEventsFailed: Int
}

/// What an operator's search matched: the account it leads to, and how.
public struct LedgerSearchMatch: Sendable, Hashable {
    public enum Via: String, Sendable, Hashable {
        case account, transactionId, originalTransactionId, orderId, appAccountToken
    }

    /// Nil when the match (a transaction only notifications told of) belongs to no account yet.
    public var accountId: String?
    public var via: Via
    public var subject: String
}

extension Ledger {
    static let dayMillis: Int64 = 86_400_000

    /// Counts for the operator's overview over the last `days` UTC days.
    public func overview(now: Date = Date(), days: Int = 30) async throws -> LedgerOverview {
        let days = max(1, min(days, 366))
        let today = Millis.of(now) / Self.dayMillis
        let first = today - Int64(days - 1)
        let since = first * Self.dayMillis
        let nowMillis = Millis.of(now)
        let catalog = catalog
        try await rollUpMetrics(now: now)
        return try await read { session in
            // The business view's own judgement (``MetricRules``), so that this count and the accounts' pages agree.
            var byProduct: [String: Int] = [:]
            try await Self.seriesStates(session, at: now, allowance: EntitlementRules.clockLagAllowance, environment: nil, productId: nil,
                                        catalog: catalog) { latest, state in
                if state != .billingRetry { byProduct[latest.productId, default: 0] += 1 }
            }
            let active = byProduct.keys.sorted().map { LedgerOverview.ProductCount(productId: $0, count: byProduct[$0]!) }
            var counts: [Int64: LedgerOverview.Day] = [:]
            for day in first...today {
                counts[day] = LedgerOverview.Day(day: Millis.date(day * Self.dayMillis), purchases: 0, renewals: 0, refunds: 0, billingIssues: 0)
            }
            // From the business view's daily rollup (``rollUpMetrics(now:)`` ran first), over every environment: the
            // purchases table has no index by date, and a ledger of a million purchases would be read whole.
            for item in try await Self.metricDays(session, environment: nil, productId: nil,
                                                  kinds: [.oneTime, .newSubscription, .newTrial, .renewal, .billingIssue],
                                                  fromDay: first, toDay: today + 1, catalog: catalog) {
                switch item.kind {
                case .renewal: counts[item.day]?.renewals += Int(item.count)
                case .billingIssue: counts[item.day]?.billingIssues += Int(item.count)
                default: counts[item.day]?.purchases += Int(item.count)
                }
            }
            for refund in try await Self.refunds(session, environment: nil, productId: nil, from: since, to: nowMillis + 1) {
                counts[MetricRules.day(refund.date)]?.refunds += 1
            }
            let lost = try await session.sql.first("SELECT COUNT(*) FROM orders o WHERE \(Self.paidUnfulfilled)", [])?.int(0) ?? 0
            let stored = try await session.sql.first("SELECT COUNT(*) FROM notifications", [])?.int(0) ?? 0
            let lastDay = try await session.sql.first("SELECT COUNT(*) FROM notifications WHERE received_at > $1",
                                                      [.int(nowMillis - Self.dayMillis)])?.int(0) ?? 0
            let unbound = try await session.sql.first("SELECT COUNT(*) FROM purchases WHERE account_id IS NULL", [])?.int(0) ?? 0
            let failed = try await session.sql.first("SELECT COUNT(*) FROM webhook_events WHERE state = 'failed'", [])?.int(0) ?? 0
            return LedgerOverview(activeSubscriptions: active, days: (first...today).compactMap { counts[$0] }, lostOrders: Int(lost),
                                  notificationsStored: Int(stored), notificationsLastDay: Int(lastDay), unboundTransactions: Int(unbound),
                                  webhookEventsFailed: Int(failed))
        }
    }

    /// What `query` names: a transaction id, an original transaction id, an order id, an `appAccountToken`, or an
    /// account with anything in the ledger. Exact matches only (ids are not words).
    public func search(_ query: String) async throws -> [LedgerSearchMatch] {
        // Not trimmed: an account id may begin or end with a space, and must be findable.
        guard !query.isEmpty, query.utf8.count <= 200 else { return [] }
        let token = UUID(uuidString: query)?.lowercasedString
        return try await read { session in
            var matches: [LedgerSearchMatch] = []
            if let purchase = try await session.purchase(query) {
                matches.append(.init(accountId: purchase.accountId, via: .transactionId, subject: query))
            }
            if let row = try await session.sql.first("""
                SELECT account_id FROM purchases WHERE original_transaction_id = $1 ORDER BY account_id IS NULL, purchase_date LIMIT 1
                """, [.text(query)]) {
                matches.append(.init(accountId: row.optionalText(0), via: .originalTransactionId, subject: query))
            }
            if let order = try await session.order(id: query) {
                matches.append(.init(accountId: order.accountId, via: .orderId, subject: query))
            }
            if let token {
                if let order = try await session.order(appAccountToken: UUID(uuidString: token)!) {
                    matches.append(.init(accountId: order.accountId, via: .appAccountToken, subject: token))
                }
                for row in try await session.sql.rows("SELECT DISTINCT account_id FROM purchases WHERE app_account_token = $1 LIMIT 20", [.text(token)]) {
                    let account = row.optionalText(0)
                    if !matches.contains(where: { $0.via == .appAccountToken && $0.accountId == account }) {
                        matches.append(.init(accountId: account, via: .appAccountToken, subject: token))
                    }
                }
            }
            if try await session.sql.first("""
                SELECT 1 FROM orders WHERE account_id = $1 UNION ALL SELECT 1 FROM purchases WHERE account_id = $1
                UNION ALL SELECT 1 FROM balances WHERE account_id = $1 LIMIT 1
                """, [.text(query)]) != nil {
                matches.append(.init(accountId: query, via: .account, subject: query))
            }
            return matches
        }
    }
}
