import Foundation
import Hummingbird
import IAPTestSupport
import PurchaseAPI
import Testing

/// Issue 33's business view against histories whose money is known, bought through the simulator and uploaded as apps
/// do: each figure checked against the sum a person would make by hand, and against the accounts' own entitlements.
@Suite("The business view counts what Apple charged, by the entitlement rules", .timeLimit(.minutes(4)))
struct BusinessMetricsTests {
    static let (coins, premium, season) = (PurchaseFlowTests.coins, PurchaseFlowTests.premium, PurchaseFlowTests.season)
    static let (monthly, yearly) = (PurchaseFlowTests.monthly, PurchaseFlowTests.yearly)

    func overview(_ system: System, _ query: String = "") async throws -> MetricsOverviewReply {
        let (status, data) = try await system.admin(.get, "/admin/metrics/overview" + query)
        #expect(status == .ok, "\(String(decoding: data, as: UTF8.self))")
        return try decode(MetricsOverviewReply.self, data)
    }

    func series(_ system: System, _ query: String) async throws -> MetricSeriesReply {
        let (status, data) = try await system.admin(.get, "/admin/metrics/series?" + query)
        #expect(status == .ok, "\(String(decoding: data, as: UTF8.self))")
        return try decode(MetricSeriesReply.self, data)
    }

    func usd(_ overview: MetricsOverviewReply) -> RevenueSummary? { overview.revenue.first { $0.currency == "USD" } }
    func mrr(_ overview: MetricsOverviewReply) -> Int64 { overview.mrr.first { $0.currency == "USD" }?.amount ?? 0 }

    /// How many of `accounts` the server itself says hold `pro` now, and in which state.
    func pro(_ system: System, _ accounts: [String]) async throws -> [String: String] {
        var states: [String: String] = [:]
        for account in accounts {
            if let item = try await system.entitlements(account).entitlements.entitlement("pro") { states[account] = item.state.rawValue }
        }
        return states
    }

    @Test("Six customers (coins, Premium, the monthly's free week, the yearly, a refunded Premium, a season pass): the issue's figures, and the accounts agree",
          arguments: LedgerKind.allCases)
    func sixCustomers(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, ownDatabase: true)) { system in
            var accounts: [String] = []
            var refunded: String?
            for (index, product) in [Self.coins, Self.premium, Self.monthly, Self.yearly, Self.premium, Self.season].enumerated() {
                let (account, store) = try await system.customer("six")
                let (_, purchase, reply) = try await system.buy(product, account: account, storeAccount: store)
                // The simulator's notification may reach the server before the app's upload: granted either way.
                #expect([.granted, .alreadyGranted].contains(reply?.outcome), "\(product): \(String(describing: reply))")
                accounts.append(account)
                if index == 4 { refunded = purchase.transactionId }
            }
            // The App Store refunds the second Premium; the server hears it from the notification.
            _ = try await system.device(.post, "/sim/transactions/\(try #require(refunded))/refund")
            try await system.advance(by: 0)

            let figures = try await overview(system)
            #expect(figures.environment == "Sandbox", "a ledger holding no Production purchase counts its Sandbox ones")
            #expect(figures.activeSubscriptions == 1 && figures.activeTrials == 1, "\(figures)")
            #expect(figures.inGracePeriod == 0 && figures.inBillingRetry == 0)
            let expectedMRR: Double = 39_990.0 / 12
            let mrrSeen = Double(mrr(figures))
            #expect(abs(mrrSeen - expectedMRR) <= expectedMRR * 0.01, "\(figures.mrr)")
            let money = try #require(usd(figures))
            #expect(money.gross == 63_950 && money.refunded == 9_990 && money.net == 53_960, "\(money)")
            #expect(money.transactions == 6 && money.refunds == 1, "\(money)")
            #expect(figures.unpricedTransactions == 0 && figures.unpricedSubscriptions == 0)
            // The accounts' own pages: the yearly's account active, the monthly's in its trial, nobody else.
            let states = try await pro(system, accounts)
            #expect(states == [accounts[2]: "active", accounts[3]: "active"], "\(states)")
            #expect(states.count == figures.activeSubscriptions + figures.activeTrials + figures.inGracePeriod)
            let refundedPremium = try await system.entitlements(accounts[4]).entitlements.entitlement("premium")
            #expect(refundedPremium == nil)

            // One product alone, and the same figures as CSV.
            let yearlyOnly = try await overview(system, "?productId=\(Self.yearly)")
            #expect(yearlyOnly.activeSubscriptions == 1 && yearlyOnly.activeTrials == 0 && usd(yearlyOnly)?.gross == 39_990)
            let csv = try await system.server.execute(uri: "/admin/metrics/overview", method: .get,
                                                       headers: [.authorization: "Bearer \(System.adminKey)", .accept: "text/csv"])
            #expect(csv.headers[.contentType]?.hasPrefix("text/csv") == true)
            let rows = String(buffer: csv.body).split(separator: "\r\n").map(String.init)
            #expect(rows.first == "figure,currency,value")
            #expect(rows.contains("gross,USD,63950") && rows.contains("net,USD,53960") && rows.contains("activeSubscriptions,,1"), "\(rows)")

            // Over time: today's revenue is the overview's; today's active count is the overview's.
            let revenue = try await series(system, "metric=revenue&interval=day")
            let today = try #require(revenue.points.last)
            #expect(today.values.contains(.init(name: "gross", currency: "USD", value: 63_950)), "\(today)")
            #expect(today.values.contains(.init(name: "net", currency: "USD", value: 53_960)), "\(today)")
            #expect(revenue.points.dropLast().allSatisfy { $0.values.isEmpty })
            let active = try await series(system, "metric=activeSubscriptions&interval=week")
            #expect(active.points.last?.values == [.init(name: "activeSubscriptions", currency: nil, value: 1)], "\(active.points.last as Any)")
            let refunds = try await series(system, "metric=refunds&interval=day")
            #expect(refunds.points.last?.values.contains(.init(name: "refunded", currency: "USD", value: 9_990)) == true, "\(refunds.points.last as Any)")
            #expect(refunds.points.last?.values.contains(.init(name: "refunds", currency: "USD", value: 1)) == true)
            let purchases = try await series(system, "metric=purchases&interval=month")
            #expect(purchases.points.last?.values == [.init(name: "purchases", currency: nil, value: 4)])
        }
    }

    @Test("A subscription's life: trial, conversion, upgrade, grace, billing retry, voluntary churn, Family Sharing — each figure as it happens",
          arguments: LedgerKind.allCases)
    func lifecycle(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, ownDatabase: true)) { system in
            // T: the monthly's free week, then paying. U: the monthly's trial, upgraded at once to the yearly.
            // G: the monthly's trial on an Apple ID whose card fails. F: the yearly, shared with M's family.
            // V: the yearly, auto-renew turned off.
            let (t, tStore) = try await system.customer("trial")
            let (u, uStore) = try await system.customer("upgrade")
            let (g, gStore) = try await system.customer("grace")
            let (f, fStore) = try await system.customer("family")
            let (v, vStore) = try await system.customer("voluntary")
            let (m, mStore) = try await system.customer("member")
            _ = try await system.device(.post, "/sim/accounts", ["id": gStore, "billingFails": true])
            _ = try await system.buy(Self.monthly, account: t, storeAccount: tStore)
            _ = try await system.buy(Self.monthly, account: u, storeAccount: uStore)
            let (_, upgrade, upgradeReply) = try await system.buy(Self.yearly, account: u, storeAccount: uStore)
            #expect([.granted, .alreadyGranted].contains(upgradeReply?.outcome), "\(upgrade)")
            _ = try await system.buy(Self.monthly, account: g, storeAccount: gStore)
            _ = try await system.buy(Self.yearly, account: f, storeAccount: fStore)
            _ = try await system.device(.put, "/sim/accounts/\(fStore)/family", ["members": [mStore]])
            let (_, voluntary, _) = try await system.buy(Self.yearly, account: v, storeAccount: vStore)
            _ = try await system.device(.post, "/sim/subscriptions/\(try #require(voluntary.transactionId))/autoRenew", ["enabled": false])
            try await system.advance(by: 1)
            // M's app restores what the family shares.
            let restored = try JSONSerialization.jsonObject(with: try await system.device(.post, "/sim/accounts/\(mStore)/restore")) as? [String: Any]
            let shared = (restored?["signedTransactions"] as? [String]) ?? []
            #expect(!shared.isEmpty)
            _ = try await system.call(.post, "/v1/restore", as: m, RestoreRequest(signedTransactions: shared))

            var figures = try await overview(system)
            #expect(figures.activeSubscriptions == 3 && figures.activeTrials == 2, "U, F, V paying; T, G in trial (M's copy is F's series): \(figures)")
            let threeYearly: Int64 = 3 * 3_333
            #expect(abs(mrr(figures) - threeYearly) <= 3, "\(figures.mrr)")
            let threeYearlyCharges: Int64 = 3 * 39_990
            #expect(usd(figures)?.gross == threeYearlyCharges, "trials are 0, the family copy is F's money: \(figures.revenue)")
            var states = try await pro(system, [t, u, g, f, v, m])
            #expect(states.count == 6, "every account holds pro, M by Family Sharing: \(states)")

            // The free week ends: T pays, G's card fails and Apple gives a grace period.
            try await system.advance(by: 200)
            figures = try await overview(system)
            #expect(figures.activeSubscriptions == 4 && figures.activeTrials == 0 && figures.inGracePeriod == 1, "\(figures)")
            let withMonthly: Int64 = threeYearly + 4_990
            #expect(abs(mrr(figures) - withMonthly) <= 3, "\(figures.mrr)")
            #expect(usd(figures)?.gross == threeYearlyCharges + 4_990)
            states = try await pro(system, [t, g])
            #expect(states[t] == "active" && states[g] == "gracePeriod", "\(states)")
            let conversions = try await series(system, "metric=trialConversions&interval=month")
            #expect(conversions.points.last?.values.first?.value == 2,
                    "T paid after its trial and U upgraded from its trial to the yearly; G did not pay: \(conversions.points.last as Any)")
            let starts = try await series(system, "metric=trialStarts&interval=month")
            #expect(starts.points.last?.values.first?.value == 3, "T, U and G began with the free week")
            let new = try await series(system, "metric=newSubscriptions&interval=month")
            #expect(new.points.last?.values.first?.value == 2, "F and V began paying; U's yearly is its series' second period")
            let renewals = try await series(system, "metric=renewals&interval=month")
            #expect(renewals.points.last?.values.first?.value == 2, "T's first paid month, and U's yearly (a later period of its series)")
            let issues = try await series(system, "metric=billingIssues&interval=month")
            #expect(issues.points.last?.values.first?.value == 1)

            // The grace period runs out: G is in billing retry, not entitled, not counted active.
            try await system.advance(by: 450)
            figures = try await overview(system)
            #expect(figures.inGracePeriod == 0 && figures.inBillingRetry == 1, "\(figures)")
            #expect(figures.activeSubscriptions == 4)
            #expect(try await pro(system, [g]).isEmpty)

            // The yearly plans reach their end: V's expires (voluntary churn), U's and F's renew.
            try await system.advance(by: 3_000)
            figures = try await overview(system)
            #expect(try await pro(system, [v]).isEmpty)
            let churn = try await series(system, "metric=churn&interval=month")
            let churned = churn.points.flatMap(\.values)
            #expect(churned.filter { $0.name == "voluntary" }.map(\.value).reduce(0, +) == 1, "\(churned)")
            #expect(churned.filter { $0.name == "billing" }.map(\.value).reduce(0, +) == 1, "G's billing retry ran out: \(churned)")
            let active = try await series(system, "metric=activeSubscriptions&interval=day")
            #expect(active.points.last?.values.first?.value == Int64(figures.activeSubscriptions))
            states = try await pro(system, [t, u, g, f, v])
            let entitled = states.values.filter { $0 == "active" || $0 == "gracePeriod" }.count
            #expect(entitled == figures.activeSubscriptions + figures.activeTrials + figures.inGracePeriod, "\(states) vs \(figures)")
            // Cohorts: the five series (M's copy is F's), all begun this month or the last.
            let (status, data) = try await system.admin(.get, "/admin/metrics/cohorts")
            #expect(status == .ok)
            let cohorts = try decode(CohortsReply.self, data)
            #expect(cohorts.cohorts.map(\.size).reduce(0, +) == 5, "\(cohorts)")
        }
    }

    @Test("Bad metrics queries are refused with a clear error and change nothing")
    func refusals() async throws {
        try await System.run(.init(kind: .sqlite)) { system in
            for query in ["/admin/metrics/series?metric=profit", "/admin/metrics/series?metric=mrr&interval=hour",
                          "/admin/metrics/overview?at=yesterday", "/admin/metrics/overview?from=5&to=5",
                          "/admin/metrics/cohorts?months=0", "/admin/metrics/overview?environment=Moon",
                          "/admin/metrics/series?metric=revenue&interval=day&from=0&to=253402300799999"] {
                let (status, data) = try await system.admin(.get, query)
                #expect(status == .badRequest, "\(query): \(status) \(String(decoding: data, as: UTF8.self))")
            }
            let (status, _) = try await system.call(.get, "/admin/metrics/overview", as: "someone")
            #expect(status == .unauthorized || status == .forbidden)
        }
    }
}
