import Foundation
import Hummingbird
import IAPTestSupport
import PurchaseAPI
import Testing

/// Issue 33, "Keep the money", over real HTTP: what the simulator signs is what the operator reads back.
@Suite("The admin API shows a transaction's money as Apple signed it", .timeLimit(.minutes(3)))
struct TransactionMoneyServerTests {
    @Test("GET /admin/transactions/{id} shows price, currency, offer and storefront; a free trial at price 0", arguments: LedgerKind.allCases)
    func adminShowsTheMoney(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let (account, store) = try await system.customer("mona")
            let (_, premium, _) = try await system.buy(PurchaseFlowTests.premium, account: account, storeAccount: store)
            let premiumId = try #require(premium.transactionId)
            let (status, answer) = try await system.admin(.get, "/admin/transactions/\(premiumId)")
            #expect(status == .ok)
            let paid = try decode(TransactionRecord.self, answer)
            #expect(paid.price == 9_990, "\(paid)")
            #expect(paid.currency == "USD", "\(paid)")
            #expect(paid.storefront?.isEmpty == false, "\(paid)")
            #expect(paid.offerType == nil && paid.offerDiscountType == nil, "\(paid)")
            // The monthly plan's introductory free week: a real 0, with its offer.
            let (_, monthly, _) = try await system.buy(PurchaseFlowTests.monthly, account: account, storeAccount: store)
            let trial = try decode(TransactionRecord.self, await system.admin(.get, "/admin/transactions/\(try #require(monthly.transactionId))").1)
            #expect(trial.price == 0, "\(trial)")
            #expect(trial.currency == "USD", "\(trial)")
            #expect(trial.offerType == 1, "\(trial)")
            #expect(trial.offerDiscountType == "FREE_TRIAL", "\(trial)")
            #expect(trial.offerPeriod == "P1W", "\(trial)")
            // As JSON, under Apple's names.
            let object = try #require(try JSONSerialization.jsonObject(with: answer) as? [String: Any])
            #expect(object["price"] as? Int == 9_990 && object["currency"] as? String == "USD", "\(object)")
        }
    }
}
