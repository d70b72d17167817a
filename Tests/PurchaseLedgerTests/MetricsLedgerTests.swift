import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

/// Issue 33's figures over time, on a ledger whose history spans three months: each day's count and money against the
/// definition computed by hand, read first from the rows alone and then again from the daily rollup.
@Suite("The business view over time: the daily sweep, the rollup, the money")
struct MetricsLedgerTests {
    static let day: TimeInterval = 86_400

    struct Period {
        var start: Date
        var end: Date
        var trial: Bool
        var monthly: Int64
    }

    /// A subscription period as Apple signs it.
    static func period(_ product: String, id: String, original: String, start: Date, length: TimeInterval, price: Int64,
                       trial: Bool = false) -> JWSTransactionDecodedPayload {
        var payload = TransactionMoneyTests.priced(product, id: id, type: .autoRenewableSubscription, price: price,
                                                   offer: trial ? (.introductoryOffer, .freeTrial, "P1W") : nil, purchased: start,
                                                   expires: start + length)
        payload.originalTransactionId = original
        return payload
    }

    func withLedger(_ kind: StoreKind, _ body: (Ledger) async throws -> Void) async throws {
        switch kind {
        case .sqlite: try await body(try await makeLedger(.sqlite))
        case .postgres:
            try await withOwnPostgresDatabase("metrics") { url in
                let ledger = Ledger(store: try await PostgresLedgerStore(url: url), catalog: .demo)
                try await ledger.migrate()
                try await body(ledger)
            }
        }
    }

    @Test("Active subscriptions, trials and MRR per day follow each period from its start to its end or refund; revenue per day and month; the rollup answers as the rows do",
          arguments: StoreKind.allCases)
    func sweep(_ kind: StoreKind) async throws {
        try await withLedger(kind) { ledger in
            let now = Date()
            let today = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / Self.day).rounded(.down) * Self.day)
            let base = today - 90 * Self.day
            let noon: TimeInterval = 12 * 3_600
            let account = uniqueId("acct-")
            var periods: [Period] = []
            func submit(_ payload: JWSTransactionDecodedPayload) async throws {
                let result = try await ledger.submit(.init(accountId: account, transaction: payload))
                #expect([.granted, .alreadyGranted].contains(result.outcome), "\(payload.transactionId!)")
            }
            // S1: three paid months of the monthly plan.
            let s1 = uniqueId()
            for index in 0..<3 {
                let start = base + noon + Double(index) * 30 * Self.day
                try await submit(Self.period(Demo.monthly, id: index == 0 ? s1 : uniqueId(), original: s1, start: start, length: 30 * Self.day, price: 4_990))
                periods.append(Period(start: start, end: start + 30 * Self.day, trial: false, monthly: 4_990))
            }
            // S2: the yearly, refunded after thirty days.
            let s2 = uniqueId()
            let s2Start = base + 10 * Self.day + noon
            var yearly = Self.period(Demo.yearly, id: s2, original: s2, start: s2Start, length: 365 * Self.day, price: 39_990)
            try await submit(yearly)
            yearly.revocationDate = s2Start + 30 * Self.day
            yearly.revocationReason = .refundedForOtherReason
            yearly.signedDate = s2Start + 30 * Self.day
            _ = try await ledger.submit(.init(accountId: account, transaction: yearly))
            periods.append(Period(start: s2Start, end: s2Start + 30 * Self.day, trial: false, monthly: 3_333))
            // S3: the monthly's free week, then a paid month (a conversion).
            let s3 = uniqueId()
            let s3Start = base + 20 * Self.day + noon
            try await submit(Self.period(Demo.monthly, id: s3, original: s3, start: s3Start, length: 7 * Self.day, price: 0, trial: true))
            try await submit(Self.period(Demo.monthly, id: uniqueId(), original: s3, start: s3Start + 7 * Self.day, length: 30 * Self.day, price: 4_990))
            periods.append(Period(start: s3Start, end: s3Start + 7 * Self.day, trial: true, monthly: 0))
            periods.append(Period(start: s3Start + 7 * Self.day, end: s3Start + 37 * Self.day, trial: false, monthly: 4_990))
            // One-time purchases: two coin packs in dollars, Premium in euros.
            for _ in 0..<2 {
                try await submit(TransactionMoneyTests.priced(Demo.coins, type: .consumable, price: 990, purchased: base + 5 * Self.day + noon))
            }
            try await submit(TransactionMoneyTests.priced(Demo.premium, type: .nonConsumable, price: 8_990, currency: "EUR",
                                                          purchased: base + 5 * Self.day + noon))

            func expected(_ metric: MetricSeries.Metric, at instant: Date) -> Int64 {
                periods.filter { $0.start <= instant && instant < $0.end && $0.trial == (metric == .activeTrials) }
                    .map { metric == .mrr ? $0.monthly : 1 }.reduce(0, +)
            }
            func check(_ now: Date, _ pass: String) async throws {
                for metric in [MetricSeries.Metric.activeSubscriptions, .activeTrials, .mrr] {
                    let series = try await ledger.metricSeries(metric, interval: .day, from: base, to: today, now: now, environment: .sandbox)
                    #expect(series.points.count == 90)
                    for point in series.points {
                        let seen = point.values.first { metric != .mrr || $0.currency == "USD" }?.value ?? 0
                        #expect(seen == expected(metric, at: point.end), "\(pass) \(metric) on \(point.start): \(seen)")
                    }
                }
                let revenue = try await ledger.metricSeries(.revenue, interval: .day, from: base, to: today, now: now, environment: .sandbox)
                func value(_ day: Int, _ name: String, _ currency: String) -> Int64? {
                    revenue.points[day].values.first { $0.name == name && $0.currency == currency }?.value
                }
                #expect(value(5, "gross", "USD") == 1_980 && value(5, "transactions", "USD") == 2 && value(5, "gross", "EUR") == 8_990, "\(pass)")
                #expect(value(10, "gross", "USD") == 39_990, "\(pass)")
                #expect(value(40, "refunded", "USD") == 39_990 && value(40, "net", "USD") == -39_990, "\(pass)")
                #expect(value(27, "gross", "USD") == 4_990 && value(20, "gross", "USD") == 0, "the free week is a sale at 0: \(pass)")
                let monthly = try await ledger.metricSeries(.revenue, interval: .month, from: base, to: today, now: now, environment: .sandbox)
                let grossValues: [MetricSeries.Value] = monthly.points.flatMap(\.values).filter { $0.name == "gross" && $0.currency == "USD" }
                let gross: Int64 = grossValues.map(\.value).reduce(0, +)
                let charged: Int64 = 1_980 + 39_990 + 4 * 4_990
                #expect(gross == charged, "\(pass)")
                let conversions = try await ledger.metricSeries(.trialConversions, interval: .day, from: base, to: today, now: now,
                                                                environment: .sandbox)
                let converted: [Int64] = conversions.points.map { $0.values.first?.value ?? 0 }
                #expect(converted[27] == 1 && converted.reduce(0, +) == 1, "\(pass)")
                let overview = try await ledger.metricsOverview(now: now)
                #expect(overview.environment == .sandbox, "a ledger holding only Sandbox purchases counts them")
                let usd = try #require(overview.revenue.first { $0.currency == "USD" })
                #expect(usd.gross == charged && usd.refunded == 39_990 && usd.refunds == 1, "\(pass): \(usd)")
                // The instant is judged by the entitlement rules; here they agree with the periods (nothing in grace).
                #expect(overview.activeSubscriptions == Int(expected(.activeSubscriptions, at: now)), "\(overview)")
                #expect((overview.mrr.first { $0.currency == "USD" }?.amount ?? 0) == expected(.mrr, at: now), "\(overview)")
                let cohorts = try await ledger.metricCohorts(months: 6, now: now, environment: .sandbox)
                #expect(cohorts.cohorts.map(\.size).reduce(0, +) == 3, "\(cohorts)")
            }
            // First from the rows alone (all recorded within the settle line), then from the rollup an hour later.
            try await check(now, "rows")
            try await check(now + 3_600, "rollup")
            let rolled = try await ledger.sqlStore.read { sql in try await sql.first("SELECT COUNT(*) FROM metric_days", [])?.int(0) ?? 0 }
            #expect(rolled > 0, "the second pass read the rollup")
            try await check(now + 7_200, "rollup again (nothing summed twice)")
        }
    }

    @Test("MRR normalises each period to a month: weekly × 52 ÷ 12, quarterly ÷ 3, yearly ÷ 12, an up-front offer by its own period")
    func monthlyAmounts() {
        var catalog = LedgerCatalog.demo
        catalog.products["weekly"] = .autoRenewable("pro", period: "P1W")
        catalog.products["quarterly"] = .autoRenewable("pro", period: "P3M")
        catalog.products["unknown"] = .autoRenewable("pro")
        func amount(_ product: String, _ price: Int64, offer: OfferDiscountType? = nil, period: String? = nil, length: Int64? = nil) -> Double {
            MetricRules.monthlyAmount(price, productId: product, offerDiscountType: offer, offerPeriod: period, catalog: catalog, signedLength: length)
        }
        #expect(amount(Demo.yearly, 39_990) == 39_990.0 / 12)
        #expect(amount(Demo.monthly, 4_990) == 4_990)
        #expect(abs(amount("weekly", 1_990) - 1_990 * 52.0 / 12) < 0.001)
        #expect(abs(amount("quarterly", 8_990) - 8_990.0 / 3) < 0.001)
        #expect(abs(amount(Demo.monthly, 5_990, offer: .payUpFront, period: "P3M") - 5_990.0 / 3) < 0.001, "three months paid up front")
        #expect(amount(Demo.monthly, 1_990, offer: .payAsYouGo, period: "P2M") == 1_990, "pay as you go is paid per month")
        // Without a period in the catalog: the length Apple signed, rounded to the nearest usual one.
        let day: Int64 = 86_400_000
        #expect(amount("unknown", 12_000, length: 365 * day) == 1_000)
        #expect(amount("unknown", 3_000, length: 31 * day) == 3_000)
        #expect(abs(amount("unknown", 1_200, length: 7 * day) - 1_200 * 52.0 / 12) < 0.001)
    }

    @Test("A refund counts its money once: all of it, or Apple's prorated percentage")
    func refundedShare() {
        #expect(MetricRules.refunded(price: 9_990, percentage: nil) == 9_990)
        #expect(MetricRules.refunded(price: 9_990, percentage: 50_000) == 4_995)
        #expect(MetricRules.refunded(price: 9_990, percentage: 100_000) == 9_990)
        #expect(MetricRules.refunded(price: 9_990, percentage: -5) == 9_990, "a value Apple never sends is taken as a whole refund")
    }

    @Test("What a transaction adds: a Family Sharing copy nothing, a receipt-only one a count without money, a later period a renewal")
    func contributions() {
        func facts(_ type: ProductType = .autoRenewableSubscription, id: String = "2", price: Int64? = 4_990, ownership: InAppOwnershipType = .purchased,
                   offer: OfferDiscountType? = nil) -> MetricRules.TransactionFacts {
            .init(transactionId: id, originalTransactionId: "1", productId: Demo.monthly, productType: type, purchaseDate: 86_400_000 * 10,
                  expiresDate: 86_400_000 * 40, price: price, currency: price == nil ? nil : "USD", ownership: ownership,
                  offerDiscountType: offer, offerPeriod: nil)
        }
        func kinds(_ facts: MetricRules.TransactionFacts) -> [MetricRules.Kind] {
            MetricRules.contributions(of: facts, catalog: .demo).map(\.kind)
        }
        #expect(kinds(facts(ownership: .familyShared)).isEmpty)
        #expect(kinds(facts(id: "1")) == [.sale, .newSubscription, .paidStart, .paidEnd])
        #expect(kinds(facts(id: "1", price: 0, offer: .freeTrial)) == [.sale, .newTrial, .trialStart, .trialEnd])
        #expect(kinds(facts()) == [.sale, .renewal, .paidStart, .paidEnd], "a conversion is counted from the rows, not summed")
        #expect(kinds(facts(.consumable, price: nil)) == [.unpriced, .oneTime])
        let end = MetricRules.contributions(of: facts(), catalog: .demo).first { $0.kind == .paidEnd }
        #expect(end?.day == 40 && end?.amount == 4_990)
        #expect(MetricRules.contribution(ofNotification: "EXPIRED", subtype: "BILLING_RETRY", signedDate: 0, productId: nil)?.kind == .churnBilling)
        #expect(MetricRules.contribution(ofNotification: "EXPIRED", subtype: "PRICE_INCREASE", signedDate: 0, productId: nil)?.kind == .churnVoluntary)
        #expect(MetricRules.contribution(ofNotification: "DID_RENEW", subtype: nil, signedDate: 0, productId: nil) == nil)
    }
}
