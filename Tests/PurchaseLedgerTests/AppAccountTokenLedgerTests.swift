import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("A token for purchases made outside the app's flow: one per account and series, never for a series another account holds now")
struct AppAccountTokenLedgerTests {
    @Test("An old period uploaded again by its first owner does not take the series back from the account that resubscribed through its order",
          arguments: StoreKind.allCases)
    func staleUploadDoesNotRenameTheSeries(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (first, second) = (uniqueId("first-"), uniqueId("second-"))
        // The first account's period, bought outside the app (an offer code): no token.
        let lapsed = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: Date() - 7_200, expires: Date() - 3_600)
        #expect(try await ledger.submit(.init(accountId: first, transaction: lapsed)).outcome == .granted)
        let token = try #require(try await ledger.appAccountToken(accountId: first, forTransaction: lapsed.transactionId!))
        #expect(try await ledger.appAccountToken(accountId: first, forTransaction: lapsed.transactionId!) == token, "one order per account and series")
        #expect(try await ledger.order(appAccountToken: token)?.accountId == first)
        // The same Apple ID resubscribes through the second account's order: the new period is that account's.
        let order = try await ledger.createOrder(accountId: second, productId: Demo.monthly)
        let resubscribed = transaction(Demo.monthly, original: lapsed.transactionId, type: .autoRenewableSubscription, purchased: Date() - 60,
                                       expires: Date() + 3_600, token: order.appAccountToken)
        _ = try await ledger.submit(.init(accountId: second, orderId: order.orderId, transaction: resubscribed))
        // The first account's device uploads its old period again: no token may be set for it now.
        #expect(try await ledger.appAccountToken(accountId: first, forTransaction: lapsed.transactionId!) == nil)
        #expect(try await ledger.appAccountToken(accountId: second, forTransaction: lapsed.transactionId!) == nil, "not its transaction")
    }
}
