import AppStoreFormats
import Foundation

/// The business view (docs/METRICS.md): figures at an instant judged per series by ``MetricRules`` (hence by
/// ``EntitlementRules``), figures over time summed from a daily rollup of ``MetricRules/contributions(of:catalog:)``.
///
/// The rollup is filled by these reads, never by the purchase path: rows recorded before a watermark are summed into
/// `metric_days` once; the rows after it are summed on each read. The watermark stays `settle` behind the clock, so
/// a transaction still being written when it moves (or a replica whose clock runs a little behind) is never skipped.
extension Ledger {
    /// How far the rollup's watermark stays behind the clock.
    static let metricsSettle: Int64 = 300_000
    /// Rows summed per write transaction while the rollup catches up (a first read over a large ledger): the purchase
    /// path waits for one chunk at most.
    static let metricsChunk = 20_000
    /// The advisory lock (PostgreSQL) a rollup holds while it moves the watermark; a refresh that may retract takes it
    /// shared.
    static let metricRollupLock = "iapkit.metric-rollup"
    /// The purchases' watermark as SQL: rows recorded before it are in the rollup.
    static let purchasesWatermark = "COALESCE((SELECT recorded_before FROM metric_watermarks WHERE source = 'purchases'), 0)"
    /// The notifications' watermark as SQL.
    static let notificationsWatermark = "COALESCE((SELECT recorded_before FROM metric_watermarks WHERE source = 'notifications'), 0)"

    /// `time` (SQL), or `watermark` when `time` is before it: a row written by a server whose clock runs behind (a
    /// replica; a clock stepped back) is recorded at the watermark, where the rollup still finds it, never below.
    static func recordedNoEarlierThan(_ time: String, _ watermark: String) -> String {
        "(CASE WHEN \(time) < \(watermark) THEN \(watermark) ELSE \(time) END)"
    }

    /// What a retraction keeps of a row: the facts ``MetricRules/contributions(of:catalog:)`` reads.
    static let retractionColumns = """
        transaction_id, original_transaction_id, product_id, product_type, purchase_date, expires_date, price, currency, ownership, \
        offer_discount_type, offer_period, environment
        """

    /// Whether a refresh changes what the rollup summed of a row: its expiry (Apple extends one), or a price or offer
    /// learnt after a receipt-only record (filled, never replaced). The arguments are the new values' SQL.
    static func metricFactsChange(expires: String, price: String, currency: String, offerDiscountType: String, offerPeriod: String) -> String {
        """
        (expires_date IS DISTINCT FROM CAST(\(expires) AS BIGINT) OR (price IS NULL AND \(price) IS NOT NULL) \
        OR (currency IS NULL AND \(currency) IS NOT NULL) OR (offer_discount_type IS NULL AND \(offerDiscountType) IS NOT NULL) \
        OR (offer_period IS NULL AND \(offerPeriod) IS NOT NULL))
        """
    }


    /// Runs `body` on one snapshot of the ledger: the rollup, its watermarks, the retractions and the rows after them
    /// must be read as of one instant, or a rollup committing between two reads would count rows twice or not at all.
    /// SQLite's reads are one transaction already; PostgreSQL's are statements apart, hence a repeatable-read one.
    func snapshotRead<R: Sendable>(_ body: @escaping @Sendable (LedgerSession) async throws -> R) async throws -> R {
        guard sqlStore.kind == .postgres else {
            do {
                return try await sqlStore.readMany { try await body(LedgerSession($0)) }
            } catch {
                throw Self.ledgerError(error)
            }
        }
        return try await write { session in
            _ = try await session.sql.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", [])
            return try await body(session)
        }
    }

    // MARK: The instant

    /// The business at `at` (now when nil; the ledger's clock allowance applies to now only, as for an account's own
    /// answer), with the revenue over `[from, to)` (all time when nil). `productId` narrows every figure to one product.
    public func metricsOverview(at: Date? = nil, now: Date = Date(), from: Date? = nil, to: Date? = nil,
                                environment: AppStoreEnvironment? = nil, productId: String? = nil) async throws -> MetricsOverview {
        try await rollUpMetrics(now: now)
        let environment = try await metricsEnvironment(environment)
        let instant = at ?? now
        let allowance = at == nil ? EntitlementRules.clockLagAllowance : 0
        let catalog = catalog
        return try await snapshotRead { session in
            var overview = try await Self.instant(session, at: instant, allowance: allowance, environment: environment, productId: productId,
                                                  catalog: catalog)
            overview.from = from
            overview.to = to
            // Revenue by whole UTC days: a span is rounded out to the days it touches.
            let fromDay = from.map { MetricRules.day(Millis.of($0)) }
            let toDay = to.map { MetricRules.day(Millis.of($0) + MetricRules.dayMillis - 1) }
            let days = try await Self.metricDays(session, environment: environment, productId: productId, kinds: [.sale, .unpriced],
                                                 fromDay: fromDay, toDay: toDay, catalog: catalog)
            var revenue: [String: RevenueTotal] = [:]
            for item in days {
                if item.kind == .unpriced { overview.unpricedTransactions += Int(item.count); continue }
                revenue[item.currency, default: RevenueTotal(currency: item.currency)].gross += item.amount
                revenue[item.currency]!.transactions += Int(item.count)
            }
            for refunds in try await Self.refundTotals(session, environment: environment, productId: productId,
                                                       from: fromDay.map { $0 * MetricRules.dayMillis }, to: toDay.map { $0 * MetricRules.dayMillis }) {
                guard let currency = refunds.currency else { overview.unpricedRefunds += Int(refunds.count); continue }
                revenue[currency, default: RevenueTotal(currency: currency)].refunded += refunds.amount
                revenue[currency]!.refunds += Int(refunds.count)
            }
            overview.revenue = revenue.keys.sorted().map { revenue[$0]! }
            return overview
        }
    }

    /// The instant's figures at `at` — the series entitled, in a trial, in grace, in billing retry, and the MRR — with
    /// no revenue (the overview adds it; a series' point for today needs none).
    static func instant(_ session: LedgerSession, at: Date, allowance: TimeInterval, environment: AppStoreEnvironment, productId: String?,
                        catalog: LedgerCatalog) async throws -> MetricsOverview {
        var overview = MetricsOverview(at: at, environment: environment, activeSubscriptions: 0, activeTrials: 0, inGracePeriod: 0, inBillingRetry: 0,
                                       mrr: [], unpricedSubscriptions: 0, revenue: [], unpricedTransactions: 0, unpricedRefunds: 0, from: nil, to: nil,
                                       activeByProduct: [:])
        // Each series' monthly amount, summed per currency in ascending order: the same total at every read, whatever
        // order the store read the series in (sorting 28,000 amounts costs less than sorting their ids).
        var mrr: [String: [Double]] = [:]
        try await seriesStates(session, at: at, allowance: allowance, environment: environment, productId: productId, catalog: catalog) { latest, state in
            switch state {
            case .paid:
                overview.activeSubscriptions += 1
                if let price = latest.price, let currency = latest.currency {
                    mrr[currency, default: []].append(MetricRules.monthlyAmount(
                        price, productId: latest.productId, offerDiscountType: latest.offerDiscountType, offerPeriod: latest.offerPeriod,
                        catalog: catalog, signedLength: latest.expiresDate.map { Millis.of($0) - Millis.of(latest.purchaseDate) }))
                } else {
                    overview.unpricedSubscriptions += 1
                }
            case .trial: overview.activeTrials += 1
            case .gracePeriod: overview.inGracePeriod += 1
            case .billingRetry: overview.inBillingRetry += 1
            }
            if state != .billingRetry { overview.activeByProduct[latest.productId, default: 0] += 1 }
        }
        overview.mrr = mrr.keys.sorted().map { CurrencyAmount(currency: $0, amount: Int64(mrr[$0]!.sorted().reduce(0, +).rounded())) }
        return overview
    }

    /// Every auto-renewable series that may be entitled or retrying at `at`, with its latest period and its state.
    /// `environment` nil: every environment's series.
    ///
    /// Read are only the series that can be entitled or retrying at `at`: those with a period not yet at its signed end
    /// (whose latest period begun by `at` is that one or a later one — Apple's periods of a series end in the order they
    /// begin), and those whose status is a grace period or billing retry (an ended period entitles only through grace).
    /// Each with its status, in one statement per set; the rules then judge each series' latest period.
    static func seriesStates(_ session: LedgerSession, at: Date, allowance: TimeInterval, environment: AppStoreEnvironment?,
                             productId: String?, catalog: LedgerCatalog,
                             _ visit: (PurchaseRecord, MetricRules.SeriesState) throws -> Void) async throws {
        // A status can keep a series only within Apple's 60-day billing retry after its last period ended.
        let atMillis = Millis.of(at), since = Millis.of(at) - 61 * MetricRules.dayMillis, until = Millis.of(at.addingTimeInterval(allowance))
        let binds: [SQLValue] = [.int(atMillis - 1), .int(until), .text(environment?.rawValue ?? ""), .int(since)]
        var read = LatestPeriods(at: at, allowance: allowance)
        // One access to `read` per row: a closure's captures are checked for exclusive access at each use, and every row
        // touched three of them.
        let select = session.sql.selectList(Self.seriesColumnList)
        try await session.sql.forEachRow(Self.runningPeriodsQuery(anyEnvironment: environment == nil, select: select), binds) { try read.take($0) }
        try await session.sql.forEachRow(Self.troubledSeriesQuery(anyEnvironment: environment == nil, select: select), binds) { try read.take($0) }
        // In the order read, each handed over where it lies (no copy of a record per series): a caller that sums money
        // sums it in an order of its own (``metricsOverview``).
        for index in read.periods.indices where productId == nil || read.periods[index].productId == productId {
            guard let state = MetricRules.seriesState(latest: read.periods[index], status: read.statuses[index], catalog: catalog, at: at,
                                                      clockLagAllowance: allowance) else { continue }
            try visit(read.periods[index], state)
        }
    }

    /// Each series' latest period begun by `at` (the rule's own choice, made row by row) with its status, as rows come:
    /// a series is held once, whatever number of its periods is read, and no row is kept but a series' latest period.
    struct LatestPeriods {
        let at: Date
        let allowance: TimeInterval
        var periods: [PurchaseRecord] = []
        var statuses: [SubscriptionRecord?] = []
        /// A series' index into `periods`.
        var latest: [String: Int] = [:]

        init(at: Date, allowance: TimeInterval) {
            self.at = at
            self.allowance = allowance
        }

        mutating func take(_ row: SQLRow) throws {
            let period = try Ledger.decodeSeriesPeriod(row)
            guard MetricRules.hasBegun(period, at: at, clockLagAllowance: allowance) else { return }
            if let index = latest[period.originalTransactionId] {
                guard MetricRules.isLater(period, than: periods[index]) else { return }
                periods[index] = period
            } else {
                latest[period.originalTransactionId] = periods.count
                periods.append(period)
                statuses.append(try Ledger.decodeSeriesStatus(row, of: period.originalTransactionId))
            }
        }
    }

    /// The instant's first read (binds: `at` - 1 ms, `at` plus the clock allowance, the environment, 61 days before
    /// `at`): periods still running at `at`, unless a later period of theirs, begun by then, has already ended; each
    /// with its series' status. Every step reads an index alone (`purchases_periods`, `purchases_series_ends`,
    /// `subscriptions_state`; SchemaTests checks the plan): a step into a table per live series was most of the time.
    ///
    /// A period that is its series' latest (the series row's `period_purchase_date`, which every stored period moves
    /// on: ``SubmissionRules/seriesPeriod(_:)``, migration 24) has no later one: the check, an index seek per live
    /// series and a fifth of the overview at a million purchases (BENCHMARKS.md, run 8), runs only for the others.
    static func runningPeriodsQuery(anyEnvironment: Bool, select: String = seriesColumns) -> String {
        """
        SELECT \(select) FROM purchases p LEFT JOIN subscriptions s ON s.original_transaction_id = p.original_transaction_id
        WHERE p.expires_date > $1 AND p.purchase_date <= $2 AND \(anyEnvironment ? "$3 = $3" : "p.environment = $3")
          AND p.product_type = 'Auto-Renewable Subscription' AND $4 = $4
          AND (s.period_purchase_date = p.purchase_date
               OR NOT EXISTS (SELECT 1 FROM purchases q WHERE q.original_transaction_id = p.original_transaction_id
                                AND q.purchase_date > p.purchase_date AND q.purchase_date <= $2 AND q.expires_date <= $1))
        """
    }

    /// The instant's second read (the same binds): the recent periods of series in a grace period or billing retry.
    static func troubledSeriesQuery(anyEnvironment: Bool, select: String = seriesColumns) -> String {
        """
        SELECT \(select) FROM subscriptions s JOIN purchases p ON p.original_transaction_id = s.original_transaction_id
        WHERE s.status IN (\(SubscriptionStatus.billingRetry.rawValue), \(SubscriptionStatus.billingGracePeriod.rawValue))
          AND p.expires_date > $4 AND p.purchase_date <= $2 AND \(anyEnvironment ? "$3 = $3" : "p.environment = $3") AND $1 = $1
        """
    }

    static let seriesColumnList = seriesPeriodColumns.map { "p." + $0 } + seriesStatusColumns.map { "s." + $0 }
    static let seriesColumns = seriesColumnList.joined(separator: ", ")

    /// What the rules read of a period to judge its series (a stored transaction's other columns are not needed).
    static let seriesPeriodColumns = ["transaction_id", "original_transaction_id", "product_id", "product_type", "environment", "purchase_date",
                                      "expires_date", "revocation_date", "is_upgraded", "ownership", "signed_date", "price", "currency",
                                      "offer_discount_type", "offer_period"]
    /// What the rules read of a series' status (its renewal details are not needed to count it).
    /// `signed_date` first: never NULL in a stored status, so a NULL there is the LEFT JOIN's "no status row".
    static let seriesStatusColumns = ["signed_date", "status", "grace_period_expires_date", "period_purchase_date"]

    static func decodeSeriesPeriod(_ row: SQLRow) throws -> PurchaseRecord {
        let transactionId = try row.text(0), productId = try row.text(2)
        guard !transactionId.isEmpty, !productId.isEmpty else {
            throw LedgerError(.invalidInput, "a stored period lacks its transaction id or product id")
        }
        return PurchaseRecord(period: transactionId, originalTransactionId: try row.text(1), productId: productId,
                              productType: ProductType(rawValue: try row.text(3)), environment: AppStoreEnvironment(rawValue: try row.text(4)),
                              purchaseDate: Millis.date(try row.int(5)), expiresDate: row.optionalInt(6).map(Millis.date),
                              revocationDate: row.optionalInt(7).map(Millis.date), isUpgraded: try row.int(8) != 0,
                              ownership: row.optionalText(9).map(InAppOwnershipType.init(rawValue:)), signedDate: Millis.date(try row.int(10)),
                              price: row.optionalInt(11), currency: row.optionalText(12),
                              offerDiscountType: row.optionalText(13).map(OfferDiscountType.init(rawValue:)), offerPeriod: row.optionalText(14))
    }

    /// The status columns after the period's, nil when the series has no status row (the LEFT JOIN's NULLs).
    static func decodeSeriesStatus(_ row: SQLRow, of originalTransactionId: String) throws -> SubscriptionRecord? {
        let first = Self.seriesPeriodColumns.count
        guard let signed = row.optionalInt(first) else { return nil }
        return SubscriptionRecord(originalTransactionId: originalTransactionId, status: row.optionalInt(first + 1).map { SubscriptionStatus(rawValue: Int($0)) },
                                  gracePeriodExpiresDate: row.optionalInt(first + 2).map(Millis.date), signedDate: Millis.date(signed),
                                  periodPurchaseDate: row.optionalInt(first + 3).map(Millis.date))
    }

    // MARK: Over time

    /// `metric` per `interval` over `[from, to)` (rounded out to whole intervals). A count of active series is the one
    /// at the end of each interval, from the periods Apple charged for; the interval holding `now` reports the
    /// instant's figure (``metricsOverview(at:now:from:to:environment:productId:)``).
    public func metricSeries(_ metric: MetricSeries.Metric, interval: MetricSeries.Interval, from: Date, to: Date, now: Date = Date(),
                             environment: AppStoreEnvironment? = nil, productId: String? = nil) async throws -> MetricSeries {
        try await rollUpMetrics(now: now)
        let environment = try await metricsEnvironment(environment)
        let buckets = Self.buckets(interval, from: from, to: to)
        guard let first = buckets.first, let last = buckets.last else {
            return MetricSeries(metric: metric, interval: interval, environment: environment, points: [])
        }
        let catalog = catalog
        return try await snapshotRead { session -> MetricSeries in
            let fromDay = MetricRules.day(first.start), toDay = MetricRules.day(last.end)
            var points = buckets.map { MetricSeries.Point(start: Millis.date($0.start), end: Millis.date($0.end), values: []) }
            func bucket(_ day: Int64) -> Int? {
                let millis = day * MetricRules.dayMillis
                return buckets.firstIndex { $0.start <= millis && millis < $0.end }
            }
            func add(_ totals: inout [[String: Int64]], _ index: Int?, _ key: String, _ value: Int64) {
                guard let index else { return }
                totals[index][key, default: 0] += value
            }
            var totals = [[String: Int64]](repeating: [:], count: buckets.count)
            switch metric {
            case .activeSubscriptions, .activeTrials, .mrr:
                let (startKind, endKind): (MetricRules.Kind, MetricRules.Kind) = metric == .activeTrials ? (.trialStart, .trialEnd) : (.paidStart, .paidEnd)
                // The sweep: what began before the span less what ended before it, then each day's changes.
                var level: [String: Int64] = [:]
                var changes: [Int64: [String: Int64]] = [:]
                func note(_ day: Int64, _ key: String, _ delta: Int64) {
                    if day < fromDay { level[key, default: 0] += delta } else if day < toDay { changes[day, default: [:]][key, default: 0] += delta }
                }
                for item in try await Self.metricDays(session, environment: environment, productId: productId, kinds: [startKind, endKind],
                                                      fromDay: nil, toDay: toDay, catalog: catalog) {
                    let key = metric == .mrr ? item.currency : "count"
                    guard metric != .mrr || !item.currency.isEmpty else { continue }
                    let delta = metric == .mrr ? item.amount : item.count
                    note(item.day, key, item.kind == startKind ? delta : -delta)
                }
                // A period refunded or upgraded away ended then, not at its signed expiry.
                for cut in try await Self.revokedPeriods(session, environment: environment, productId: productId, catalog: catalog)
                where (metric == .activeTrials) == cut.trial {
                    let key = metric == .mrr ? cut.currency ?? "" : "count"
                    guard metric != .mrr || cut.currency != nil else { continue }
                    let delta = metric == .mrr ? cut.monthly : 1
                    note(MetricRules.day(cut.expires), key, delta)
                    note(MetricRules.day(cut.revoked), key, -delta)
                }
                for (index, bucket) in buckets.enumerated() {
                    for day in MetricRules.day(bucket.start)..<MetricRules.day(bucket.end) {
                        for (key, delta) in changes[day] ?? [:] { level[key, default: 0] += delta }
                    }
                    totals[index] = level.filter { $0.value != 0 || $0.key == "count" }
                    if totals[index].isEmpty && metric != .mrr { totals[index]["count"] = 0 }
                }
            case .revenue, .refunds:
                for item in try await Self.metricDays(session, environment: environment, productId: productId, kinds: [.sale], fromDay: fromDay,
                                                      toDay: toDay, catalog: catalog) where metric == .revenue {
                    add(&totals, bucket(item.day), "gross|" + item.currency, item.amount)
                    add(&totals, bucket(item.day), "transactions|" + item.currency, item.count)
                }
                for refund in try await Self.refunds(session, environment: environment, productId: productId, from: first.start, to: last.end) {
                    let index = bucket(MetricRules.day(refund.date))
                    guard let currency = refund.currency else {
                        // A receipt-only purchase refunded: a refund, with no money known.
                        add(&totals, index, "refunds", 1)
                        continue
                    }
                    add(&totals, index, "refunded|" + currency, refund.amount)
                    add(&totals, index, "refunds|" + currency, 1)
                    if metric == .revenue { add(&totals, index, "gross|" + currency, 0) }
                }
                if metric == .revenue {
                    for index in totals.indices {
                        for key in totals[index].keys where key.hasPrefix("gross|") {
                            let currency = String(key.dropFirst(6))
                            totals[index]["net|" + currency] = totals[index][key]! - (totals[index]["refunded|" + currency] ?? 0)
                        }
                    }
                }
            case .churn:
                for item in try await Self.metricDays(session, environment: environment, productId: productId,
                                                      kinds: [.churnVoluntary, .churnBilling, .churnOther], fromDay: fromDay, toDay: toDay, catalog: catalog) {
                    let name = item.kind == .churnVoluntary ? "voluntary" : item.kind == .churnBilling ? "billing" : "other"
                    add(&totals, bucket(item.day), name, item.count)
                }
            case .trialConversions:
                for day in try await Self.trialConversions(session, environment: environment, productId: productId, from: first.start, to: last.end) {
                    add(&totals, bucket(day), "count", 1)
                }
                for index in totals.indices where totals[index].isEmpty { totals[index]["count"] = 0 }
            case .newSubscriptions, .trialStarts, .renewals, .billingIssues, .purchases:
                let kind: MetricRules.Kind = switch metric {
                case .newSubscriptions: .newSubscription
                case .trialStarts: .trialStart
                case .renewals: .renewal
                case .billingIssues: .billingIssue
                default: .oneTime
                }
                for item in try await Self.metricDays(session, environment: environment, productId: productId, kinds: [kind], fromDay: fromDay,
                                                      toDay: toDay, catalog: catalog) {
                    add(&totals, bucket(item.day), "count", item.count)
                }
                for index in totals.indices where totals[index].isEmpty { totals[index]["count"] = 0 }
            }
            for index in points.indices {
                points[index].values = totals[index].keys.sorted().map { key in
                    let value = totals[index][key]!
                    if metric == .mrr { return MetricSeries.Value(name: "mrr", currency: key, value: value) }
                    let parts = key.split(separator: "|", maxSplits: 1).map(String.init)
                    return MetricSeries.Value(name: parts[0] == "count" ? metric.rawValue : parts[0], currency: parts.count > 1 ? parts[1] : nil,
                                              value: value)
                }
            }
            // The interval holding now: the instant's own figure, judged as the overview judges it (in the same snapshot
            // as the days before it).
            let nowMillis = Millis.of(now)
            if [.activeSubscriptions, .activeTrials, .mrr].contains(metric),
               let index = points.firstIndex(where: { Millis.of($0.start) <= nowMillis && nowMillis < Millis.of($0.end) }) {
                let instant = try await Self.instant(session, at: now, allowance: EntitlementRules.clockLagAllowance, environment: environment,
                                                     productId: productId, catalog: catalog)
                points[index].values = switch metric {
                case .mrr: instant.mrr.map { .init(name: "mrr", currency: $0.currency, value: $0.amount) }
                case .activeTrials: [.init(name: metric.rawValue, currency: nil, value: Int64(instant.activeTrials))]
                default: [.init(name: metric.rawValue, currency: nil, value: Int64(instant.activeSubscriptions))]
                }
            }
            return MetricSeries(metric: metric, interval: interval, environment: environment, points: points)
        }
    }

    /// Series by the month their first period began, and how many were still running at the end of each month after.
    public func metricCohorts(months: Int = 12, now: Date = Date(), environment: AppStoreEnvironment? = nil,
                              productId: String? = nil) async throws -> CohortTable {
        let months = max(1, min(months, 60))
        try await rollUpMetrics(now: now)
        let environment = try await metricsEnvironment(environment)
        return try await read { session in
            var binds: [SQLValue] = [.text(environment.rawValue)]
            var filter = ""
            if let productId { binds.append(.text(productId)); filter = " AND product_id = $2" }
            var cohorts: [Int64: (size: Int, ends: [Int64])] = [:]
            for row in try await session.sql.rows("""
                SELECT MIN(purchase_date),
                       MAX(CASE WHEN revocation_date IS NOT NULL AND revocation_date < expires_date THEN revocation_date ELSE expires_date END)
                FROM purchases
                WHERE product_type = 'Auto-Renewable Subscription' AND environment = $1 AND expires_date IS NOT NULL
                  AND (ownership IS NULL OR ownership <> 'FAMILY_SHARED')\(filter)
                GROUP BY original_transaction_id
                """, binds) {
                let month = Self.monthStart(try row.int(0))
                cohorts[month, default: (0, [])].size += 1
                cohorts[month]!.ends.append(try row.int(1))
            }
            let nowMillis = Millis.of(now)
            let first = Self.monthStart(Self.addMonths(Self.monthStart(nowMillis), -(months - 1)))
            return CohortTable(environment: environment, cohorts: cohorts.keys.sorted().filter { $0 >= first }.map { month in
                let (size, ends) = cohorts[month]!
                var retained: [Int] = []
                var k = 0
                while true {
                    let end = Self.addMonths(month, k + 1)
                    guard end <= nowMillis else { break }
                    retained.append(ends.filter { $0 > end }.count)
                    k += 1
                }
                return CohortTable.Cohort(month: Millis.date(month), size: size, retained: retained)
            })
        }
    }

    /// The environment the business view counts when not told: Production once the ledger holds a Production
    /// transaction (sandbox purchases are App Review's and testers', not revenue); before that — a development or
    /// staging server — Sandbox, or the one test environment it holds. Every answer names the one it counted.
    public func metricsEnvironment(_ asked: AppStoreEnvironment? = nil) async throws -> AppStoreEnvironment {
        if let asked { return asked }
        return try await snapshotRead { session in
            let watermark = try await Self.watermarks(session).purchases
            var held = Set(try await session.sql.rows("SELECT DISTINCT environment FROM metric_days", []).map { try $0.text(0) })
            for row in try await session.sql.rows("SELECT DISTINCT environment FROM purchases WHERE recorded_at >= $1", [.int(watermark)]) {
                held.insert(try row.text(0))
            }
            for preferred in [AppStoreEnvironment.production, .sandbox, .xcode, .localTesting] where held.contains(preferred.rawValue) {
                return preferred
            }
            return .production
        }
    }

    // MARK: Reading the rollup

    /// The rollup's items of `kinds` for days in `[fromDay, toDay)` (nil: unbounded), with the rows after the
    /// watermark summed now.
    /// `environment` nil: every environment's.
    static func metricDays(_ session: LedgerSession, environment: AppStoreEnvironment?, productId: String?, kinds: Set<MetricRules.Kind>,
                           fromDay: Int64?, toDay: Int64?, catalog: LedgerCatalog) async throws -> [MetricRules.Contribution] {
        var binds: [SQLValue] = [.text(environment?.rawValue ?? "")]
        var conditions = [environment == nil ? "$1 = $1" : "environment = $1", "kind IN (\(kinds.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ")))"]
        if let fromDay { binds.append(.int(fromDay)); conditions.append("day >= $\(binds.count)") }
        if let toDay { binds.append(.int(toDay)); conditions.append("day < $\(binds.count)") }
        if let productId { binds.append(.text(productId)); conditions.append("product_id = $\(binds.count)") }
        var items = try await session.sql.rows("""
            SELECT day, product_id, currency, kind, CAST(SUM(count) AS BIGINT), CAST(SUM(amount) AS BIGINT) FROM metric_days WHERE \(conditions.joined(separator: " AND "))
            GROUP BY day, product_id, currency, kind
            """, binds).compactMap { row -> MetricRules.Contribution? in
            guard let kind = MetricRules.Kind(rawValue: try row.text(3)) else { return nil }
            return MetricRules.Contribution(day: try row.int(0), productId: try row.text(1), currency: try row.text(2), kind: kind,
                                            count: try row.int(4), amount: try row.int(5))
        }
        let watermarks = try await Self.watermarks(session)
        let tail = try await Self.transactionContributions(session, recordedFrom: watermarks.purchases, before: nil, catalog: catalog)
            + Self.notificationContributions(session, receivedFrom: watermarks.notifications, before: nil)
            + Self.retractedContributions(session, catalog: catalog)
        items += tail.filter { item in
            kinds.contains(item.kind) && (productId == nil || item.productId == productId)
                && (fromDay.map { item.day >= $0 } ?? true) && (toDay.map { item.day < $0 } ?? true)
                && (environment == nil || item.environment == environment!.rawValue)
        }.map(\.contribution)
        return items
    }

    /// A contribution with the environment of the row it came from.
    struct EnvironmentContribution {
        var environment: String
        var contribution: MetricRules.Contribution
        var kind: MetricRules.Kind { contribution.kind }
        var productId: String { contribution.productId }
        var day: Int64 { contribution.day }
    }

    static func transactionContributions(_ session: LedgerSession, recordedFrom: Int64, before: Int64?,
                                         catalog: LedgerCatalog) async throws -> [EnvironmentContribution] {
        var binds: [SQLValue] = [.int(recordedFrom)]
        if let before { binds.append(.int(before)) }
        return try await session.sql.rows("""
            SELECT \(retractionColumns) FROM purchases WHERE recorded_at >= $1\(before == nil ? "" : " AND recorded_at < $2")
            """, binds).flatMap { try contributions($0, catalog: catalog, sign: 1) }
    }

    /// What the retractions not yet applied take back: each contribution of a row's old facts, negated.
    static func retractedContributions(_ session: LedgerSession, catalog: LedgerCatalog) async throws -> [EnvironmentContribution] {
        try await session.sql.rows("SELECT \(retractionColumns) FROM metric_retractions", []).flatMap { try contributions($0, catalog: catalog, sign: -1) }
    }

    /// A row of ``retractionColumns``' contributions, times `sign`.
    static func contributions(_ row: SQLRow, catalog: LedgerCatalog, sign: Int64) throws -> [EnvironmentContribution] {
        let facts = MetricRules.TransactionFacts(
            transactionId: try row.text(0), originalTransactionId: try row.text(1), productId: try row.text(2),
            productType: ProductType(rawValue: try row.text(3)), purchaseDate: try row.int(4), expiresDate: row.optionalInt(5),
            price: row.optionalInt(6), currency: row.optionalText(7), ownership: row.optionalText(8).map(InAppOwnershipType.init(rawValue:)),
            offerDiscountType: row.optionalText(9).map(OfferDiscountType.init(rawValue:)), offerPeriod: row.optionalText(10))
        let environment = try row.text(11)
        return MetricRules.contributions(of: facts, catalog: catalog).map {
            var contribution = $0
            contribution.count *= sign
            contribution.amount *= sign
            return EnvironmentContribution(environment: environment, contribution: contribution)
        }
    }

    static func notificationContributions(_ session: LedgerSession, receivedFrom: Int64, before: Int64?) async throws -> [EnvironmentContribution] {
        var binds: [SQLValue] = [.int(receivedFrom)]
        if let before { binds.append(.int(before)) }
        return try await session.sql.rows("""
            SELECT n.notification_type, n.subtype, n.signed_date, s.product_id, s.environment
            FROM notifications n
            JOIN purchases s ON s.transaction_id = (SELECT q.transaction_id FROM purchases q WHERE q.original_transaction_id = n.original_transaction_id
                                                    ORDER BY q.purchase_date DESC LIMIT 1)
            WHERE n.notification_type IN ('EXPIRED', 'DID_FAIL_TO_RENEW') AND n.received_at >= $1\(before == nil ? "" : " AND n.received_at < $2")
            """, binds).compactMap { row in
            MetricRules.contribution(ofNotification: try row.text(0), subtype: row.optionalText(1), signedDate: try row.int(2),
                                     productId: row.optionalText(3))
                .map { EnvironmentContribution(environment: (try? row.text(4)) ?? "", contribution: $0) }
        }
    }

    /// Refunds with their date and amount (Family Sharing revocations and upgrades are not refunds: no money went back);
    /// a receipt-only purchase's refund has no currency and no amount.
    static func refunds(_ session: LedgerSession, environment: AppStoreEnvironment?, productId: String?, from: Int64?,
                        to: Int64?) async throws -> [(date: Int64, currency: String?, amount: Int64)] {
        let (conditions, binds) = refundConditions(environment: environment, productId: productId, from: from, to: to)
        return try await session.sql.rows("""
            SELECT revocation_date, currency, price, revocation_percentage FROM purchases WHERE \(conditions)
            """, binds).map { row in
            guard let currency = row.optionalText(1), let price = row.optionalInt(2) else { return (try row.int(0), nil, 0) }
            return (try row.int(0), currency, MetricRules.refunded(price: price, percentage: row.optionalInt(3).map { Int(clamping: $0) }))
        }
    }

    /// The refunds of ``refunds(_:environment:productId:from:to:)`` without their dates: one row per distinct price and
    /// percentage, each refunded amount by the same rule times its count (a currency nil: the unpriced refunds). The
    /// overview's all-time figure read ~20,000 rows at a million purchases for a handful of sums.
    static func refundTotals(_ session: LedgerSession, environment: AppStoreEnvironment?, productId: String?, from: Int64?,
                             to: Int64?) async throws -> [(currency: String?, count: Int64, amount: Int64)] {
        let (conditions, binds) = refundConditions(environment: environment, productId: productId, from: from, to: to)
        return try await session.sql.rows("""
            SELECT currency, price, revocation_percentage, COUNT(*) FROM purchases WHERE \(conditions)
            GROUP BY currency, price, revocation_percentage
            """, binds).map { row in
            let count = try row.int(3)
            guard let currency = row.optionalText(0), let price = row.optionalInt(1) else { return (nil, count, 0) }
            return (currency, count, count * MetricRules.refunded(price: price, percentage: row.optionalInt(2).map { Int(clamping: $0) }))
        }
    }

    /// The refunds' filter and its binds.
    private static func refundConditions(environment: AppStoreEnvironment?, productId: String?, from: Int64?,
                                         to: Int64?) -> (String, [SQLValue]) {
        var binds: [SQLValue] = [.text(environment?.rawValue ?? "")]
        // The first term is the partial index's own predicate, which lets both stores read refunds through it.
        var conditions = ["(revocation_date IS NOT NULL OR is_upgraded = 1)", "revocation_date IS NOT NULL", environment == nil ? "$1 = $1" : "environment = $1",
                          "is_upgraded = 0", "(ownership IS NULL OR ownership <> 'FAMILY_SHARED')",
                          "(revocation_type IS NULL OR revocation_type <> '\(RevocationType.familyRevoke.rawValue)')"]
        if let from { binds.append(.int(from)); conditions.append("revocation_date >= $\(binds.count)") }
        if let to { binds.append(.int(to)); conditions.append("revocation_date < $\(binds.count)") }
        if let productId { binds.append(.text(productId)); conditions.append("product_id = $\(binds.count)") }
        return (conditions.joined(separator: " AND "), binds)
    }

    /// The days of trial conversions in `[from, to)`: each free-trial period's next period, when it is paid. Read from
    /// the rows (the trials through their partial index), since a conversion depends on the period before it, which
    /// may arrive after.
    static func trialConversions(_ session: LedgerSession, environment: AppStoreEnvironment, productId: String?, from: Int64,
                                 to: Int64) async throws -> [Int64] {
        var binds: [SQLValue] = [.text(environment.rawValue), .int(from), .int(to)]
        var filter = ""
        if let productId { binds.append(.text(productId)); filter = " AND n.product_id = $4" }
        return try await session.sql.rows("""
            SELECT n.purchase_date FROM purchases t
            JOIN purchases n ON n.original_transaction_id = t.original_transaction_id
             AND n.purchase_date = (SELECT MIN(q.purchase_date) FROM purchases q
                                    WHERE q.original_transaction_id = t.original_transaction_id AND q.purchase_date > t.purchase_date)
            WHERE t.offer_discount_type = 'FREE_TRIAL' AND t.environment = $1 AND (t.ownership IS NULL OR t.ownership <> 'FAMILY_SHARED')
              AND (n.offer_discount_type IS NULL OR n.offer_discount_type <> 'FREE_TRIAL')
              AND n.purchase_date >= $2 AND n.purchase_date < $3\(filter)
            """, binds).map { MetricRules.day(try $0.int(0)) }
    }

    /// Auto-renewable periods that ended before their signed end: refunded, revoked from a family member, or upgraded
    /// away (at the revocation Apple signed, or else when the upgrade's period began).
    static func revokedPeriods(_ session: LedgerSession, environment: AppStoreEnvironment, productId: String?,
                               catalog: LedgerCatalog) async throws -> [(expires: Int64, revoked: Int64, trial: Bool, currency: String?, monthly: Int64)] {
        var binds: [SQLValue] = [.text(environment.rawValue)]
        var filter = ""
        if let productId { binds.append(.text(productId)); filter = " AND p.product_id = $2" }
        // `+p.expires_date`: an expression, not the column, so that SQLite reads the few revoked rows through their
        // partial index; with the bare column it chose the expiries index and read every period (0.65 s at a million).
        return try await session.sql.rows("""
            SELECT p.purchase_date, p.expires_date,
                   COALESCE(p.revocation_date, (SELECT MIN(q.purchase_date) FROM purchases q
                                                WHERE q.original_transaction_id = p.original_transaction_id AND q.purchase_date > p.purchase_date)),
                   p.price, p.currency, p.offer_discount_type, p.offer_period, p.product_id
            FROM purchases p
            WHERE (p.revocation_date IS NOT NULL OR p.is_upgraded = 1) AND p.environment = $1
              AND p.product_type = 'Auto-Renewable Subscription' AND +p.expires_date IS NOT NULL
              AND (p.ownership IS NULL OR p.ownership <> 'FAMILY_SHARED')\(filter)
            """, binds).compactMap { row in
            let purchased = try row.int(0), expires = try row.int(1)
            guard let revoked = row.optionalInt(2), revoked < expires, revoked > purchased else { return nil }
            let offer = row.optionalText(5).map(OfferDiscountType.init(rawValue:))
            let trial = offer == .freeTrial
            var monthly: Int64 = 0
            if let price = row.optionalInt(3), row.optionalText(4) != nil {
                monthly = Int64(MetricRules.monthlyAmount(price, productId: try row.text(7), offerDiscountType: offer, offerPeriod: row.optionalText(6),
                                                          catalog: catalog, signedLength: expires - purchased).rounded())
            }
            return (expires, revoked, trial, trial ? nil : row.optionalText(4), monthly)
        }
    }

    // MARK: Filling the rollup

    static func watermarks(_ session: LedgerSession) async throws -> (purchases: Int64, notifications: Int64) {
        var marks: [String: Int64] = [:]
        for row in try await session.sql.rows("SELECT source, recorded_before FROM metric_watermarks", []) { marks[try row.text(0)] = try row.int(1) }
        return (marks["purchases"] ?? 0, marks["notifications"] ?? 0)
    }

    /// Sums what was recorded before the settle line into `metric_days`, a chunk per write transaction.
    func rollUpMetrics(now: Date) async throws {
        let target = Millis.of(now) - Self.metricsSettle
        let catalog = catalog
        // Within a minute of the line: the rows after the watermark are few, and summed on the read.
        let marks = try await read { try await Self.watermarks($0) }
        guard min(marks.purchases, marks.notifications) < target - 60_000 else { return }
        while try await write({ session -> Bool in
            // One replica at a time moves the watermark; the others wait, then find it moved.
            try await session.lockSeries("iapkit.metric-rollup")
            let marks = try await Self.watermarks(session)
            var moved = false
            // What news changed of rows already summed is taken back first, in the transaction that sums them again.
            try await Self.addToRollup(session, try Self.retractedContributions(session, catalog: catalog))
            try await session.sql.execute("DELETE FROM metric_retractions", [])
            for source in ["purchases", "notifications"] {
                let from = source == "purchases" ? marks.purchases : marks.notifications
                guard from < target else { continue }
                let (table, column) = source == "purchases" ? ("purchases", "recorded_at") : ("notifications", "received_at")
                let cut = try await session.sql.first("""
                    SELECT \(column) FROM \(table) WHERE \(column) >= $1 AND \(column) < $2 ORDER BY \(column) LIMIT 1 OFFSET \(Self.metricsChunk)
                    """, [.int(from), .int(target)])?.int(0)
                // A chunk ends where a new recorded time begins: rows recorded at one instant are never split.
                let end = cut.map { $0 > from ? $0 : from + 1 } ?? target
                let items = await source == "purchases"
                    ? try Self.transactionContributions(session, recordedFrom: from, before: end, catalog: catalog)
                    : try Self.notificationContributions(session, receivedFrom: from, before: end)
                try await Self.addToRollup(session, items)
                try await session.sql.execute("""
                    INSERT INTO metric_watermarks (source, recorded_before) VALUES ($1, $2)
                    ON CONFLICT (source) DO UPDATE SET recorded_before = excluded.recorded_before
                    """, [.text(source), .int(end)])
                moved = moved || end < target
            }
            return moved
        }) {}
    }

    /// Adds `items` to `metric_days`, summed per row first.
    static func addToRollup(_ session: LedgerSession, _ items: [EnvironmentContribution]) async throws {
        var sums: [String: (EnvironmentContribution, Int64, Int64)] = [:]
        for item in items {
            let c = item.contribution
            let key = [item.environment, c.kind.rawValue, String(c.day), c.productId, c.currency].joined(separator: "\u{1}")
            let sum = sums[key]
            sums[key] = (item, (sum?.1 ?? 0) + c.count, (sum?.2 ?? 0) + c.amount)
        }
        for (item, count, amount) in sums.values where count != 0 || amount != 0 {
            let c = item.contribution
            try await session.sql.execute("""
                INSERT INTO metric_days (day, environment, kind, product_id, currency, count, amount) VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (environment, kind, day, product_id, currency)
                DO UPDATE SET count = metric_days.count + excluded.count, amount = metric_days.amount + excluded.amount
                """, [.int(c.day), .text(item.environment), .text(c.kind.rawValue), .text(c.productId), .text(c.currency), .int(count),
                      .int(amount)])
        }
    }

    // MARK: Calendar

    static func buckets(_ interval: MetricSeries.Interval, from: Date, to: Date) -> [(start: Int64, end: Int64)] {
        var start: Int64
        let fromMillis = Millis.of(from), toMillis = Millis.of(to)
        switch interval {
        case .day: start = MetricRules.day(fromMillis) * MetricRules.dayMillis
        case .week:
            // 1970-01-01 was a Thursday: Mondays are 4 days after it, modulo 7.
            let day = MetricRules.day(fromMillis)
            start = (day - ((day - 4) % 7 + 7) % 7) * MetricRules.dayMillis
        case .month: start = monthStart(fromMillis)
        }
        var buckets: [(Int64, Int64)] = []
        while start < toMillis, buckets.count < 1_000 {
            let end = switch interval {
            case .day: start + MetricRules.dayMillis
            case .week: start + 7 * MetricRules.dayMillis
            case .month: addMonths(start, 1)
            }
            buckets.append((start, end))
            start = end
        }
        return buckets
    }

    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func monthStart(_ millis: Int64) -> Int64 {
        let parts = utc.dateComponents([.year, .month], from: Millis.date(millis))
        return Millis.of(utc.date(from: parts)!)
    }

    static func addMonths(_ millis: Int64, _ months: Int) -> Int64 {
        Millis.of(utc.date(byAdding: .month, value: months, to: Millis.date(millis))!)
    }
}
