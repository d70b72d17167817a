import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

/// Issue 33's promise under attack: sequences of events that could make the business view count a transaction twice,
/// lose one, or disagree with the accounts' own pages. Each test asserts the correct figure.
///
/// The rollup (`metric_days`) holds what was recorded before a watermark that trails the `now` a read is given by
/// `Ledger.metricsSettle`; the tests choose `recorded_at` with `submit(_:now:)` and move the watermark with the `now`
/// of a read, so that a row is summed into the rollup before a later event changes it.
@Suite("The business view, adversarially: rows changed after the rollup, watermark edges, the accounts' agreement, money, calendar")
struct MetricsAdversarialTests {
    static let day: TimeInterval = 86_400
    static let minute: TimeInterval = 60

    func withLedger(_ kind: StoreKind, _ body: (Ledger) async throws -> Void) async throws {
        switch kind {
        case .sqlite: try await body(try await makeLedger(.sqlite))
        case .postgres:
            try await withOwnPostgresDatabase("advmetrics") { url in
                let ledger = Ledger(store: try await PostgresLedgerStore(url: url), catalog: .demo)
                try await ledger.migrate()
                try await body(ledger)
            }
        }
    }

    /// Now at whole milliseconds (the ledger stores milliseconds).
    static func now() -> Date { Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000) }

    /// The start of the UTC day holding `date`.
    static func dayStart(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / day).rounded(.down) * day)
    }

    static func period(_ product: String, id: String, original: String, start: Date, end: Date, price: Int64?, currency: String = "USD",
                       trial: Bool = false) -> JWSTransactionDecodedPayload {
        var payload = TransactionMoneyTests.priced(product, id: id, type: .autoRenewableSubscription, price: price, currency: currency,
                                                   offer: trial ? (.introductoryOffer, .freeTrial, "P1W") : nil, purchased: start, expires: end)
        payload.originalTransactionId = original
        return payload
    }

    @discardableResult
    func submit(_ ledger: Ledger, _ account: String, _ payload: JWSTransactionDecodedPayload, recorded: Date,
                source: PurchaseSource = .signedTransaction) async throws -> SubmissionResult {
        try await ledger.submit(.init(accountId: account, transaction: payload, source: source), now: recorded)
    }

    /// The sum of the values named `name` over every point of a series.
    func total(_ series: MetricSeries, _ name: String? = nil, currency: String? = nil) -> Int64 {
        series.points.flatMap(\.values).filter { (name == nil || $0.name == name) && (currency == nil || $0.currency == currency) }
            .map(\.value).reduce(0, +)
    }

    /// The value of the day point holding `date`.
    func value(_ series: MetricSeries, on date: Date, _ name: String? = nil, currency: String? = nil) -> Int64? {
        guard let point = series.points.first(where: { $0.start <= date && date < $0.end }) else { return nil }
        return point.values.filter { (name == nil || $0.name == name) && (currency == nil || $0.currency == currency) }.map(\.value).reduce(0, +)
    }

    // MARK: Rows changed after they were rolled up

    @Test("A receipt-only sale (no price) rolled up, then Apple's signed copy with the price: revenue counts the sale once at its price, nothing stays unpriced",
          arguments: StoreKind.allCases)
    func priceFilledAfterRollup(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            var coins = TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: nil, purchased: now - 2 * Self.day)
            try await submit(ledger, account, coins, recorded: now - 3_600, source: .receipt)
            let before = try await ledger.metricsOverview(now: now, environment: .sandbox)
            #expect(before.unpricedTransactions == 1, "\(before)")
            // The app uploads the signed transaction later: the row gains its price (COALESCE), its recorded_at stays.
            coins.price = 990
            coins.currency = "USD"
            coins.storefront = "USA"
            coins.signedDate = now - Self.day
            try await submit(ledger, account, coins, recorded: now)
            let stored = try #require(try await ledger.transaction(coins.transactionId!))
            #expect(stored.price == 990, "the row now holds the price")
            let after = try await ledger.metricsOverview(now: now + 3_600, environment: .sandbox)
            let usd = after.revenue.first { $0.currency == "USD" }
            #expect(usd?.gross == 990 && usd?.transactions == 1, "observed \(String(describing: usd))")
            #expect(after.unpricedTransactions == 0, "observed \(after.unpricedTransactions) unpriced")
            let revenue = try await ledger.metricSeries(.revenue, interval: .day, from: now - 5 * Self.day, to: Self.dayStart(now), now: now + 3_600,
                                                        environment: .sandbox)
            #expect(total(revenue, "gross", currency: "USD") == 990)
        }
    }

    @Test("A receipt-only subscription period rolled up, then signed as the monthly's free week: a trial start and an active trial, not a paid subscription",
          arguments: StoreKind.allCases)
    func offerFilledAfterRollup(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), id = uniqueId()
            let start = now - 3 * Self.day
            var week = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 7 * Self.day, price: nil)
            try await submit(ledger, account, week, recorded: now - 3_600, source: .receipt)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            week = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 7 * Self.day, price: 0, trial: true)
            week.signedDate = start + 60
            try await submit(ledger, account, week, recorded: now)
            let later = now + 3_600
            let from = now - 10 * Self.day, to = Self.dayStart(now)
            let starts = try await ledger.metricSeries(.trialStarts, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            let news = try await ledger.metricSeries(.newSubscriptions, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            #expect(total(starts) == 1, "trial starts: \(total(starts))")
            #expect(total(news) == 0, "new paid subscriptions: \(total(news))")
            let trials = try await ledger.metricSeries(.activeTrials, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            let actives = try await ledger.metricSeries(.activeSubscriptions, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            let probe = start + Self.day
            #expect(value(trials, on: probe) == 1, "active trials on the trial's second day: \(String(describing: value(trials, on: probe)))")
            #expect(value(actives, on: probe) == 0, "active paid subscriptions then: \(String(describing: value(actives, on: probe)))")
            // The instant agrees with the account: a trial.
            let overview = try await ledger.metricsOverview(now: later, environment: .sandbox)
            #expect(overview.activeTrials == 1 && overview.activeSubscriptions == 0, "\(overview)")
        }
    }

    @Test("A receipt-only monthly rolled up, then signed with its price and refunded: MRR over the refunded days is 0, never negative",
          arguments: StoreKind.allCases)
    func priceAndRefundAfterRollup(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), id = uniqueId()
            let start = now - 20 * Self.day
            var month = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 30 * Self.day, price: nil)
            try await submit(ledger, account, month, recorded: now - 3_600, source: .receipt)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            month = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 30 * Self.day, price: 4_990)
            month.revocationDate = start + 10 * Self.day
            month.revocationReason = .refundedForOtherReason
            month.signedDate = start + 10 * Self.day
            try await submit(ledger, account, month, recorded: now)
            let mrr = try await ledger.metricSeries(.mrr, interval: .day, from: now - 30 * Self.day, to: Self.dayStart(now), now: now + 3_600,
                                                    environment: .sandbox)
            let low = mrr.points.flatMap(\.values).filter { $0.currency == "USD" }.map(\.value).min() ?? 0
            #expect(low >= 0, "MRR went to \(low)")
            #expect((value(mrr, on: start + 15 * Self.day, currency: "USD") ?? 0) == 0, "after the refund: \(String(describing: value(mrr, on: start + 15 * Self.day, currency: "USD")))")
            let actives = try await ledger.metricSeries(.activeSubscriptions, interval: .day, from: now - 30 * Self.day, to: Self.dayStart(now),
                                                        now: now + 3_600, environment: .sandbox)
            #expect(value(actives, on: start + 15 * Self.day) == 0)
        }
    }

    @Test("An expiry Apple extends (renewal date extension) after the period was rolled up: the period counts as active until its new end",
          arguments: StoreKind.allCases)
    func expiryExtendedAfterRollup(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), id = uniqueId()
            let start = now - 60 * Self.day
            var month = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 30 * Self.day, price: 4_990)
            try await submit(ledger, account, month, recorded: now - 3_600)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            // Apple extends the period by 15 days (RENEWAL_EXTENDED): the same transaction re-signed with a later expiry.
            month.expiresDate = start + 45 * Self.day
            month.signedDate = start + 25 * Self.day
            try await submit(ledger, account, month, recorded: now)
            let stored = try #require(try await ledger.transaction(id))
            #expect(stored.expiresDate.map(Millis.of) == Millis.of(start + 45 * Self.day))
            let later = now + 3_600
            let actives = try await ledger.metricSeries(.activeSubscriptions, interval: .day, from: now - 65 * Self.day, to: Self.dayStart(now),
                                                        now: later, environment: .sandbox)
            let probe = start + 35 * Self.day
            #expect(value(actives, on: probe) == 1, "five days into the extension: \(String(describing: value(actives, on: probe)))")
            #expect(value(actives, on: start + 50 * Self.day) == 0, "after the new end")
            let mrr = try await ledger.metricSeries(.mrr, interval: .day, from: now - 65 * Self.day, to: Self.dayStart(now), now: later,
                                                    environment: .sandbox)
            #expect(value(mrr, on: probe, currency: "USD") == 4_990)
        }
    }

    @Test("A renewal rolled up before its series' free trial arrived (the notification came first): the trial conversion is still counted",
          arguments: StoreKind.allCases)
    func conversionWhenTrialArrivesLate(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), original = uniqueId()
            let trialStart = now - 40 * Self.day
            let trial = Self.period(Demo.monthly, id: original, original: original, start: trialStart, end: trialStart + 7 * Self.day, price: 0, trial: true)
            let paid = Self.period(Demo.monthly, id: uniqueId(), original: original, start: trialStart + 7 * Self.day, end: trialStart + 37 * Self.day,
                                   price: 4_990)
            try await submit(ledger, account, paid, recorded: now - 3_600)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            try await submit(ledger, account, trial, recorded: now)
            let conversions = try await ledger.metricSeries(.trialConversions, interval: .day, from: now - 50 * Self.day, to: Self.dayStart(now),
                                                            now: now + 3_600, environment: .sandbox)
            #expect(total(conversions) == 1, "observed \(total(conversions)) conversions")
        }
    }

    @Test("Trial, then a renewal the ledger missed, then the next: the later one rolled up before the missed one arrived, the conversion counts once, not twice",
          arguments: StoreKind.allCases)
    func conversionCountedOnce(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), original = uniqueId()
            let t0 = now - 70 * Self.day
            let trial = Self.period(Demo.monthly, id: original, original: original, start: t0, end: t0 + 7 * Self.day, price: 0, trial: true)
            let second = Self.period(Demo.monthly, id: uniqueId(), original: original, start: t0 + 7 * Self.day, end: t0 + 37 * Self.day, price: 4_990)
            let third = Self.period(Demo.monthly, id: uniqueId(), original: original, start: t0 + 37 * Self.day, end: t0 + 67 * Self.day, price: 4_990)
            try await submit(ledger, account, trial, recorded: now - 3_600)
            try await submit(ledger, account, third, recorded: now - 3_600)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            try await submit(ledger, account, second, recorded: now)
            let from = now - 80 * Self.day, to = Self.dayStart(now), later = now + 3_600
            let conversions = try await ledger.metricSeries(.trialConversions, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            #expect(total(conversions) == 1, "observed \(total(conversions)) conversions")
            #expect(value(conversions, on: t0 + 7 * Self.day) == 1, "on the day the trial converted")
            let renewals = try await ledger.metricSeries(.renewals, interval: .day, from: from, to: to, now: later, environment: .sandbox)
            #expect(total(renewals) == 2)
        }
    }

    @Test("A refund Apple reverses after the rollup: no refund counted, the period active throughout, the account entitled",
          arguments: StoreKind.allCases)
    func refundReversed(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), id = uniqueId()
            let start = now - 5 * Self.day
            var month = Self.period(Demo.monthly, id: id, original: id, start: start, end: start + 30 * Self.day, price: 4_990)
            try await submit(ledger, account, month, recorded: now - 3 * 3_600)
            month.revocationDate = now - 2 * Self.day
            month.revocationReason = .refundedForOtherReason
            month.signedDate = now - 2 * Self.day
            try await submit(ledger, account, month, recorded: now - 2 * 3_600)
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            month.revocationDate = nil
            month.revocationReason = nil
            month.signedDate = now - Self.day
            try await submit(ledger, account, month, recorded: now)
            let later = now + 3_600
            let overview = try await ledger.metricsOverview(now: later, environment: .sandbox)
            let usd = overview.revenue.first { $0.currency == "USD" }
            #expect(usd?.refunded == 0 && usd?.refunds == 0 && usd?.gross == 4_990, "\(String(describing: usd))")
            #expect(overview.activeSubscriptions == 1)
            let owned = try await ledger.entitlements(accountId: account, now: later)
            #expect(owned.entitlements.count == overview.activeSubscriptions)
            let actives = try await ledger.metricSeries(.activeSubscriptions, interval: .day, from: now - 6 * Self.day, to: Self.dayStart(now),
                                                        now: later, environment: .sandbox)
            #expect(value(actives, on: now - 2 * Self.day) == 1)
        }
    }

    // MARK: The watermark

    @Test("Rows recorded at exactly the watermark's millisecond and the one after: each counted once, before and after the rollup takes them",
          arguments: StoreKind.allCases)
    func rowsAtTheWatermark(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            let mark = now - TimeInterval(Ledger.metricsSettle) / 1000
            for recorded in [mark, mark, mark + 0.001] {
                try await submit(ledger, account, TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 990, purchased: now - Self.day),
                                 recorded: recorded)
            }
            for read in [now, now + 1, now + 3_600, now + 7_200] {
                let usd = try await ledger.metricsOverview(now: read, environment: .sandbox).revenue.first { $0.currency == "USD" }
                #expect(usd?.gross == 2_970 && usd?.transactions == 3, "read at +\(read.timeIntervalSince(now))s: \(String(describing: usd))")
            }
        }
    }

    @Test("A purchase recorded by a replica whose clock runs 4 minutes behind, after another read moved the watermark: still counted",
          arguments: StoreKind.allCases)
    func replicaSlightlyBehind(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            try await submit(ledger, account, TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 990, purchased: now - 240),
                             recorded: now - 240)
            for read in [now + 1, now + 3_600] {
                let usd = try await ledger.metricsOverview(now: read, environment: .sandbox).revenue.first { $0.currency == "USD" }
                #expect(usd?.gross == 990, "\(String(describing: usd))")
            }
        }
    }

    @Test("A purchase recorded by a replica whose clock runs 10 minutes behind (or after the clock stepped back): counted, never lost for good",
          arguments: StoreKind.allCases)
    func replicaFarBehind(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            let coins = TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 990, purchased: now - 600)
            try await submit(ledger, account, coins, recorded: now - 600)
            #expect(try await ledger.transaction(coins.transactionId!) != nil, "the purchase is in the ledger")
            for read in [now + 1, now + 3_600] {
                let usd = try await ledger.metricsOverview(now: read, environment: .sandbox).revenue.first { $0.currency == "USD" }
                #expect(usd?.gross == 990, "read at +\(read.timeIntervalSince(now))s: \(String(describing: usd))")
            }
        }
    }

    @Test("A chunk boundary: 20,001 rows recorded in one millisecond, rows in the milliseconds either side: every row summed once",
          arguments: StoreKind.allCases)
    func chunkOfOneMillisecond(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now()
            let recorded = Millis.of(now) - 3_600_000
            let purchased = Millis.of(now) - 86_400_000
            func bulk(_ prefix: String, count: Int, at: Int64) async throws {
                try await ledger.sqlStore.write { sql in
                    try await sql.execute("""
                        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
                        INSERT INTO purchases (transaction_id, original_transaction_id, account_id, product_id, product_type, environment, quantity,
                            purchase_date, is_upgraded, signed_date, source, recorded_at, price, currency)
                        SELECT '\(prefix)' || CAST(i AS TEXT), '\(prefix)' || CAST(i AS TEXT), 'bulk', '\(Demo.coins)', 'Consumable', 'Sandbox', 1,
                            $1, 0, $1, 'jws', $2, 990, 'USD' FROM n
                        """, [.int(purchased), .int(at)])
                }
            }
            try await bulk("a-", count: 2, at: recorded - 1)
            try await bulk("b-", count: Ledger.metricsChunk + 1, at: recorded)
            try await bulk("c-", count: 3, at: recorded + 1)
            try await bulk("d-", count: Ledger.metricsChunk, at: recorded + 2)
            let rows = Int64(2 + Ledger.metricsChunk + 1 + 3 + Ledger.metricsChunk)
            for read in [now - 1_800, now, now + 3_600] {
                let usd = try await ledger.metricsOverview(now: read, environment: .sandbox).revenue.first { $0.currency == "USD" }
                #expect(usd?.gross == rows * 990 && usd?.transactions == Int(rows), "read at \(read): \(String(describing: usd))")
            }
        }
    }

    @Test("A read while another read rolls the rows it sums into the rollup: the read sees each row once, from the rollup or from the tail",
          arguments: StoreKind.allCases)
    func readRacingTheRollup(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now()
            // The watermark at now - settle; then rows recorded after it, three chunks' worth, still in the tail.
            _ = try await ledger.metricsOverview(now: now, environment: .sandbox)
            let mark = Millis.of(now) - Ledger.metricsSettle
            let rows = 3 * Ledger.metricsChunk
            try await ledger.sqlStore.write { sql in
                // A long history already rolled up (in another currency, worth nothing): reading the rollup takes a while.
                try await sql.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
                    INSERT INTO metric_days (day, environment, kind, product_id, currency, count, amount)
                    SELECT i, 'Sandbox', 'sale', 'filler', 'XXX', 0, 0 FROM n
                    """)
                try await sql.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                    INSERT INTO purchases (transaction_id, original_transaction_id, account_id, product_id, product_type, environment, quantity,
                        purchase_date, is_upgraded, signed_date, source, recorded_at, price, currency)
                    SELECT 'race-' || CAST(i AS TEXT), 'race-' || CAST(i AS TEXT), 'bulk', '\(Demo.coins)', 'Consumable', 'Sandbox', 1,
                        $1, 0, $1, 'jws', $2 + i, 990, 'USD' FROM n
                    """, [.int(mark - 86_400_000), .int(mark)])
            }
            let expected = Int64(rows) * 990
            // One read within a minute of the line (no rollup of its own), racing one that rolls the three chunks.
            async let roller = ledger.metricsOverview(now: now + 600, environment: .sandbox)
            var seen: [Int64?] = []
            for _ in 0..<3 {
                seen.append(try await ledger.metricsOverview(now: now, environment: .sandbox).revenue.first { $0.currency == "USD" }?.gross)
            }
            let rolled = try await roller.revenue.first { $0.currency == "USD" }?.gross
            #expect(seen.allSatisfy { $0 == expected }, "reads during the rollup saw \(seen), expected \(expected)")
            #expect(rolled == expected)
        }
    }

    // MARK: The overview and the accounts

    @Test("An upgrade bought under another sign-in on the same Apple ID: one active subscription, one account entitled, MRR the yearly's",
          arguments: StoreKind.allCases)
    func upgradeUnderAnotherAccount(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), first = uniqueId("acct-"), second = uniqueId("acct-"), original = uniqueId()
            var monthly = Self.period(Demo.monthly, id: original, original: original, start: now - 10 * Self.day, end: now + 20 * Self.day, price: 4_990)
            try await submit(ledger, first, monthly, recorded: now - 3_600)
            // The second account's order names the upgrade (its appAccountToken), as the app's purchase flow sends it.
            let order = try await ledger.createOrder(accountId: second, productId: Demo.yearly)
            var yearly = Self.period(Demo.yearly, id: uniqueId(), original: original, start: now - 5 * Self.day, end: now + 360 * Self.day, price: 39_990)
            yearly.appAccountToken = order.appAccountToken
            #expect(try await ledger.submit(.init(accountId: second, orderId: order.orderId, transaction: yearly), now: now - 1_800).outcome == .granted)
            monthly.isUpgraded = true
            monthly.revocationDate = now - 5 * Self.day
            monthly.revocationReason = .refundedForOtherReason
            monthly.signedDate = now - 5 * Self.day
            try await submit(ledger, first, monthly, recorded: now - 900)
            let overview = try await ledger.metricsOverview(now: now, environment: .sandbox)
            var entitled = 0
            for account in [first, second] {
                entitled += try await ledger.entitlements(accountId: account, now: now).entitlements.filter { $0.expiresAt != nil }.count
            }
            #expect(overview.activeSubscriptions == 1 && entitled == 1, "overview \(overview.activeSubscriptions), accounts \(entitled)")
            #expect(overview.mrr == [CurrencyAmount(currency: "USD", amount: 3_333)], "\(overview.mrr)")
            let usd = overview.revenue.first { $0.currency == "USD" }
            #expect(usd?.refunds == 0 && usd?.refunded == 0 && usd?.gross == 4_990 + 39_990, "an upgrade is no refund: \(String(describing: usd))")
            let operatorView = try await ledger.overview(now: now, days: 30)
            #expect(operatorView.activeSubscriptions.map(\.count).reduce(0, +) == 1)
        }
    }

    @Test("A later period that began inside a longer one and has ended (out of Apple's order): not active for the overview nor the account, whichever came first; a series row an old ledger left behind is brought up by migration 24",
          arguments: StoreKind.allCases)
    func laterPeriodEndedInsideEarlier(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now()
            var made: [(account: String, original: String)] = []
            for longFirst in [true, false] {
                let account = uniqueId("nested-"), original = uniqueId()
                let long = Self.period(Demo.yearly, id: original, original: original, start: now - 10 * Self.day, end: now + 355 * Self.day, price: 39_990)
                let later = Self.period(Demo.yearly, id: uniqueId(), original: original, start: now - 5 * Self.day, end: now - Self.day, price: 39_990)
                for payload in longFirst ? [long, later] : [later, long] { try await submit(ledger, account, payload, recorded: now - 60) }
                made.append((account, original))
            }
            let series = made
            func counted() async throws -> (overview: Int, accounts: Int) {
                var entitled = 0
                for item in series { entitled += try await ledger.entitlements(accountId: item.account, now: now).entitlements.count }
                return (try await ledger.metricsOverview(now: now, environment: .sandbox).activeSubscriptions, entitled)
            }
            let agreed = try await counted()
            #expect(agreed.overview == 0 && agreed.accounts == 0, "\(agreed)")
            // A series row behind its periods (a ledger from before migration 9, then the long period arriving last):
            // its date names the running period, and the instant would take it for the latest — migration 24 mends it.
            let long = Millis.of(now - 10 * Self.day), later = Millis.of(now - 5 * Self.day)
            _ = try await ledger.sqlStore.write { sql in
                try await sql.rows("UPDATE subscriptions SET period_purchase_date = $1 WHERE original_transaction_id IN ($2, $3)",
                                   [.int(long), .text(series[0].original), .text(series[1].original)])
            }
            #expect(try await counted().overview == 2, "the stale row is what the migration is for")
            _ = try await ledger.sqlStore.write { sql in try await sql.rows("DELETE FROM ledger_migrations WHERE version = 24", []) }
            try await ledger.migrate()
            let mended = try await counted()
            #expect(mended.overview == 0 && mended.accounts == 0, "\(mended)")
            let dates = try await ledger.sqlStore.read { sql in
                try await sql.rows("SELECT period_purchase_date FROM subscriptions WHERE original_transaction_id IN ($1, $2)",
                                   [.text(series[0].original), .text(series[1].original)]).map { try $0.int(0) }
            }
            #expect(dates == [later, later])
        }
    }

    @Test("A purchase Apple signed 2 minutes ahead of the server's clock: the overview, the dashboard's count, today's point of the series and the account all count it",
          arguments: StoreKind.allCases)
    func clockLagAllowance(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), id = uniqueId()
            let ahead = now + 120
            try await submit(ledger, account, Self.period(Demo.monthly, id: id, original: id, start: ahead, end: ahead + 30 * Self.day, price: 4_990),
                             recorded: now)
            let overview = try await ledger.metricsOverview(now: now, environment: .sandbox)
            let owned = try await ledger.entitlements(accountId: account, now: now)
            #expect(overview.activeSubscriptions == 1 && owned.entitlements.count == 1, "overview \(overview.activeSubscriptions), account \(owned.entitlements.count)")
            let board = try await ledger.overview(now: now, days: 2)
            #expect(board.activeSubscriptions.map(\.count).reduce(0, +) == 1)
            let series = try await ledger.metricSeries(.activeSubscriptions, interval: .day, from: now - Self.day, to: now + Self.day, now: now,
                                                       environment: .sandbox)
            #expect(value(series, on: now) == 1)
        }
    }

    // MARK: Money

    @Test("A prorated refund counts Apple's share; a family member's revoked copy adds no sale and no refund; a Production figure ignores Sandbox",
          arguments: StoreKind.allCases)
    func refundsMoney(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-"), member = uniqueId("acct-")
            let id = uniqueId()
            var yearly = Self.period(Demo.yearly, id: id, original: id, start: now - 100 * Self.day, end: now + 265 * Self.day, price: 39_990)
            yearly.environment = .production
            try await submit(ledger, account, yearly, recorded: now - 7_200)
            yearly.revocationDate = now - 2 * Self.day
            yearly.revocationReason = .refundedForOtherReason
            yearly.revocationPercentage = 72_603
            yearly.signedDate = now - 2 * Self.day
            try await submit(ledger, account, yearly, recorded: now - 7_000)
            let shared = uniqueId()
            var copy = Self.period(Demo.monthly, id: shared, original: shared, start: now - 10 * Self.day, end: now + 20 * Self.day, price: 4_990)
            copy.environment = .production
            copy.inAppOwnershipType = .familyShared
            try await submit(ledger, member, copy, recorded: now - 6_000)
            copy.revocationDate = now - Self.day
            copy.revocationReason = .refundedForOtherReason
            copy.signedDate = now - Self.day
            try await submit(ledger, member, copy, recorded: now - 5_000)
            // Sandbox noise.
            var test = TransactionMoneyTests.priced(Demo.premium, type: .nonConsumable, price: 9_990, purchased: now - Self.day)
            test.revocationDate = now - 3_600
            test.revocationReason = .refundedForOtherReason
            try await submit(ledger, account, test, recorded: now - 4_000)
            for read in [now, now + 3_600] {
                let overview = try await ledger.metricsOverview(now: read)
                #expect(overview.environment == .production)
                let usd = overview.revenue.first { $0.currency == "USD" }
                #expect(usd?.gross == 39_990 && usd?.refunded == 39_990 * 72_603 / 100_000 && usd?.refunds == 1 && usd?.transactions == 1,
                        "\(String(describing: usd))")
                #expect(overview.activeSubscriptions == 0, "the yearly was refunded, the shared copy revoked")
            }
        }
    }

    @Test("One product sold in two currencies: MRR per currency, revenue per currency",
          arguments: StoreKind.allCases)
    func mixedCurrencies(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now()
            for (currency, price) in [("USD", Int64(4_990)), ("EUR", Int64(4_490)), ("USD", Int64(4_990))] {
                let id = uniqueId()
                try await submit(ledger, uniqueId("acct-"), Self.period(Demo.monthly, id: id, original: id, start: now - 3 * Self.day,
                                                                       end: now + 27 * Self.day, price: price, currency: currency), recorded: now - 3_600)
            }
            for read in [now - 1_800, now + 60] {
                let overview = try await ledger.metricsOverview(now: read, environment: .sandbox)
                #expect(overview.mrr == [CurrencyAmount(currency: "EUR", amount: 4_490), CurrencyAmount(currency: "USD", amount: 9_980)], "\(overview.mrr)")
                #expect(overview.revenue.map(\.gross) == [4_490, 9_980])
            }
            let mrr = try await ledger.metricSeries(.mrr, interval: .day, from: now - 5 * Self.day, to: Self.dayStart(now), now: now + 60,
                                                    environment: .sandbox)
            #expect(value(mrr, on: now - Self.day, currency: "EUR") == 4_490 && value(mrr, on: now - Self.day, currency: "USD") == 9_980)
        }
    }

    @Test("A refund of a receipt-only purchase (no price) is still a refund: the refunds series counts it",
          arguments: StoreKind.allCases)
    func unpricedRefundCounted(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            var premium = TransactionMoneyTests.priced(Demo.premium, type: .nonConsumable, price: nil, purchased: now - 3 * Self.day)
            try await submit(ledger, account, premium, recorded: now - 3_600, source: .receipt)
            premium.revocationDate = now - 2 * Self.day
            premium.revocationReason = .refundedForOtherReason
            premium.signedDate = now - 2 * Self.day
            try await submit(ledger, account, premium, recorded: now - 3_000, source: .receipt)
            let refunds = try await ledger.metricSeries(.refunds, interval: .day, from: now - 5 * Self.day, to: Self.dayStart(now), now: now,
                                                        environment: .sandbox)
            #expect(total(refunds, "refunds") == 1, "observed \(refunds.points.flatMap(\.values))")
        }
    }

    // MARK: Calendar

    @Test("Week buckets begin on Monday, before and after 1970; month buckets follow months of 31, 29 and 31 days; the cap is 1,000 points")
    func calendar() {
        func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }
        let weeks = Ledger.buckets(.week, from: date("2026-11-25T15:00:00Z"), to: date("2026-12-08T00:00:00Z"))
        #expect(weeks.map { Millis.date($0.start) } == [date("2026-11-23T00:00:00Z"), date("2026-11-30T00:00:00Z"), date("2026-12-07T00:00:00Z")])
        let early = Ledger.buckets(.week, from: date("1969-12-31T23:59:59Z"), to: date("1970-01-06T00:00:00Z"))
        #expect(early.map { Millis.date($0.start) } == [date("1969-12-29T00:00:00Z"), date("1970-01-05T00:00:00Z")])
        let sunday = Ledger.buckets(.week, from: date("1969-12-28T12:00:00Z"), to: date("1969-12-29T00:00:00Z"))
        #expect(sunday.map { Millis.date($0.start) } == [date("1969-12-22T00:00:00Z")])
        let months = Ledger.buckets(.month, from: date("2024-01-31T15:00:00Z"), to: date("2024-03-01T00:00:01Z"))
        #expect(months.map { Millis.date($0.end) } == [date("2024-02-01T00:00:00Z"), date("2024-03-01T00:00:00Z"), date("2024-04-01T00:00:00Z")])
        let beforeEpoch = Ledger.buckets(.day, from: date("1969-12-31T12:00:00Z"), to: date("1970-01-01T00:00:00Z"))
        #expect(beforeEpoch.map { Millis.date($0.start) } == [date("1969-12-31T00:00:00Z")])
        #expect(MetricRules.day(-1) == -1 && MetricRules.day(-86_400_000) == -1 && MetricRules.day(-86_400_001) == -2)
        #expect(Ledger.buckets(.day, from: date("2020-01-01T00:00:00Z"), to: date("2026-01-01T00:00:00Z")).count == 1_000)
    }

    @Test("A sale on 1969-12-31 lands in that day's bucket, and a series span not on day boundaries is rounded out to the days it touches",
          arguments: StoreKind.allCases)
    func daysBeforeEpochAndRoundedSpans(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Self.now(), account = uniqueId("acct-")
            let old = Date(timeIntervalSince1970: -12 * 3_600)
            try await submit(ledger, account, TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 990, purchased: old), recorded: now - 3_600)
            let noonish = Self.dayStart(now) - 2 * Self.day + 13 * 3_600
            try await submit(ledger, account, TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 1_990, purchased: noonish - 3_600),
                             recorded: now - 3_600)
            for read in [now - 1_800, now + 3_600] {
                let series = try await ledger.metricSeries(.revenue, interval: .day, from: Date(timeIntervalSince1970: -2 * Self.day),
                                                           to: Date(timeIntervalSince1970: Self.day), now: read, environment: .sandbox)
                #expect(value(series, on: old, "gross", currency: "USD") == 990, "\(series.points.map(\.values))")
                let span = try await ledger.metricSeries(.revenue, interval: .day, from: noonish, to: noonish + 60, now: read, environment: .sandbox)
                #expect(span.points.count == 1 && total(span, "gross", currency: "USD") == 1_990, "\(span.points)")
            }
        }
    }
}
