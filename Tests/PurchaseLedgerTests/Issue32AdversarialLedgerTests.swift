import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger
import Testing

/// Adversarial review of issue 32 (ledger parts): sequences meant to break "a paid order is never lost" and "a customer
/// is never charged for something that will not be delivered" through the start check that refuses a catalog dropping
/// a product customers own.
@Suite("Issue 32 adversarial: the catalog check at start")
struct Issue32AdversarialLedgerTests {
    /// The demo catalog plus a product of this test's own (PostgreSQL's shared database holds every test's purchases).
    static func catalog(with productId: String) -> LedgerCatalog {
        var products = LedgerCatalog.demo.products
        products[productId] = .nonConsumable(productId)
        return LedgerCatalog(products: products)
    }

    /// Ask to Buy: the order is made, the parent approves days later. Meanwhile the operator drops the product from the
    /// catalog (instead of retiring it). The start check reads only bound purchases, so the server starts; the approved
    /// payment then arrives for a product the catalog no longer lists and is refused (unknown_product): charged, not
    /// delivered.
    @Test("Issue32Adversarial: a product with an open order waiting for Ask to Buy approval is named by the start check when the catalog drops it",
          arguments: StoreKind.allCases)
    func openOrderBlocksDrop(_ kind: StoreKind) async throws {
        let productId = uniqueId("com.example.adv.asktobuy.")
        let sold = try await makeLedger(kind, catalog: Self.catalog(with: productId))
        let now = Date()
        let account = uniqueId("asktobuy-")
        let order = try await sold.createOrder(accountId: account, productId: productId, now: now)

        let dropped = Ledger(store: sold.store, catalog: .demo)
        let missing = try await dropped.ownedProductsMissingFromCatalog()
        #expect(missing.contains(productId), "an order that may still be paid (Ask to Buy pending) is not counted: the server starts without its product")

        // What the start let through: the parent approves, the payment carries the order's token.
        let approved = transaction(productId, type: .nonConsumable, purchased: now.addingTimeInterval(60), token: order.appAccountToken)
        let result = try await dropped.submitAll([.init(accountId: account, orderId: order.orderId, transaction: approved)], now: now.addingTimeInterval(60))
        if case .failure(let refusal) = result[0] {
            Issue.record("the paid Ask to Buy order is refused: \(refusal.code.rawValue) — the customer was charged for what is not delivered")
        }
    }
}
