import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import StoreSimulator
import Testing

/// Issue 33's "done when", over real processes: `iap dev` (its simulator and its server), six customers buying through
/// the simulator and uploading as apps do, and the operator's `GET /admin/metrics/overview` with the key `iap dev` made.
@Suite("The business view of an iap dev world, over real processes", .timeLimit(.minutes(3)))
struct BusinessViewProcessTests {
    static let (coins, premium, season) = ("com.example.iapkit.coins.100", "com.example.iapkit.premium", "com.example.iapkit.season.pass")
    static let (monthly, yearly) = ("com.example.iapkit.pro.monthly", "com.example.iapkit.pro.yearly")

    /// An app's purchase: an order, the simulator's payment bound to it, the signed transaction uploaded.
    static func buy(_ dev: MetricsCommandTests.Dev, _ product: String, account: String) async throws -> (transactionId: String, reply: PurchaseReply) {
        let (_, order) = try await IAPServeProcessTests.request("\(dev.serverURL)/v1/orders", method: "POST", body: #"{"productId":"\#(product)"}"#,
                                                                account: account, secret: dev.secret)
        let token = try order.decoded(as: OrderReply.self).appAccountToken.lowercasedString
        _ = try await IAPServeProcessTests.request("http://127.0.0.1:\(dev.simulator)/sim/accounts", method: "POST", body: #"{"id":"\#(account)"}"#)
        let (_, bought) = try await IAPServeProcessTests.request(
            "http://127.0.0.1:\(dev.simulator)/sim/purchases", method: "POST",
            body: #"{"account":"\#(account)","device":"phone","productId":"\#(product)","appAccountToken":"\#(token)"}"#)
        let paid = try bought.decoded(as: SimulatedPurchaseAnswer.self)
        let signed = try #require(paid.signedTransaction, "\(bought.utf8Text)")
        let (status, answer) = try await IAPServeProcessTests.request("\(dev.serverURL)/v1/purchases", method: "POST",
                                                                      body: #"{"signedTransaction":"\#(signed)"}"#, account: account, secret: dev.secret)
        #expect(status == 200, "\(answer.utf8Text)")
        return (try #require(paid.transactionId), try answer.decoded(as: PurchaseReply.self))
    }

    @Test("Six customers — 100 coins, Premium, the monthly's free week, the yearly, a Premium the App Store refunds, a season pass: 1 active, 1 trial, MRR 39,990 / 12, revenue 63,950 gross, 9,990 refunded, 53,960 net; each account's own entitlements agree")
    func sixCustomers() async throws {
        let dev = try await MetricsCommandTests.Dev.start()
        do {
            let products = [Self.coins, Self.premium, Self.monthly, Self.yearly, Self.premium, Self.season]
            var bought: [(account: String, transactionId: String)] = []
            for (index, product) in products.enumerated() {
                let account = "customer-\(index + 1)"
                let (id, reply) = try await Self.buy(dev, product, account: account)
                #expect([.granted, .alreadyGranted].contains(reply.outcome), "\(product): \(reply)")
                bought.append((account, id))
            }
            // The App Store refunds the fifth customer's Premium; its notification reaches the server on its own.
            _ = try await IAPServeProcessTests.request("http://127.0.0.1:\(dev.simulator)/sim/transactions/\(bought[4].transactionId)/refund",
                                                       method: "POST", body: "{}")
            var overview: MetricsOverviewReply?
            for _ in 0..<100 {
                var request = URLRequest(url: URL(string: "\(dev.serverURL)/admin/metrics/overview")!)
                request.setValue("Bearer \(dev.adminKey)", forHTTPHeaderField: "Authorization")
                let data = try await URLSession.shared.data(for: request).0
                overview = try data.decoded(as: MetricsOverviewReply.self)
                if overview?.revenue.first?.refunds == 1 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let figures = try #require(overview)
            #expect(figures.activeSubscriptions == 1 && figures.activeTrials == 1, "\(figures)")
            let mrr = Double(figures.mrr.first { $0.currency == "USD" }?.amount ?? 0), expectedMRR = 39_990.0 / 12
            #expect(abs(mrr - expectedMRR) <= expectedMRR * 0.01, "\(figures.mrr)")
            let usd = try #require(figures.revenue.first { $0.currency == "USD" })
            #expect(usd.gross == 63_950 && usd.refunded == 9_990 && usd.net == 53_960, "\(usd)")

            // What each account is told it owns.
            var pro: [String: String] = [:]
            var premium: [String] = []
            for (account, _) in bought {
                let (_, data) = try await IAPServeProcessTests.request("\(dev.serverURL)/v1/entitlements", account: account, secret: dev.secret)
                let owned = try data.decoded(as: EntitlementsReply.self)
                if let item = owned.entitlements.entitlement("pro") { pro[account] = item.state.rawValue }
                if owned.entitlements.entitlement("premium") != nil { premium.append(account) }
            }
            #expect(pro == ["customer-3": "active", "customer-4": "active"], "\(pro)")
            #expect(pro.count == figures.activeSubscriptions + figures.activeTrials)
            #expect(premium == ["customer-2"], "the refunded Premium is no longer owned: \(premium)")
        } catch {
            try await dev.stop()
            throw error
        }
        try await dev.stop()
    }
}
