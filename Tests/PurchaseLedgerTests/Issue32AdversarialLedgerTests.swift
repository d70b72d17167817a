import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
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
    /// catalog (instead of retiring it). Were the open order not counted, the server would start, and the approved payment
    /// would arrive for a product the catalog no longer lists and be refused (unknown_product): charged, not delivered.
    @Test("Issue32Adversarial: a product with an open order waiting for Ask to Buy approval is named by the start check when the catalog drops it",
          arguments: StoreKind.allCases)
    func openOrderBlocksDrop(_ kind: StoreKind) async throws {
        let productId = uniqueId("com.example.adv.asktobuy.")
        let sold = try await makeLedger(kind, catalog: Self.catalog(with: productId))
        let now = Date()
        let account = uniqueId("asktobuy-")
        _ = try await sold.createOrder(accountId: account, productId: productId, now: now)

        let dropped = Ledger(store: sold.store, catalog: .demo)
        let missing = try await dropped.ownedProductsMissingFromCatalog()
        #expect(missing.contains(productId), "an order that may still be paid (Ask to Buy pending) is not counted: the server starts without its product")
    }

    /// A non-consumable's only purchase is refunded: were it no longer counted, the operator could drop the product. Apple then reverses the refund (REFUND_REVERSED, the same
    /// transaction without its revocation): the customer owns it again, but the catalog no longer lists it.
    @Test("Issue32Adversarial: a refund Apple reverses after the product was dropped gives the customer back what they own",
          arguments: StoreKind.allCases)
    func refundReversedAfterDrop(_ kind: StoreKind) async throws {
        let productId = uniqueId("com.example.adv.reversed.")
        let controlProduct = uniqueId("com.example.adv.reversed-control.")
        var products = Self.catalog(with: productId).products
        products[controlProduct] = .nonConsumable(controlProduct)
        let sold = try await makeLedger(kind, catalog: LedgerCatalog(products: products))
        let now = Date()
        let account = uniqueId("reversed-")
        let id = uniqueId()
        let bought = transaction(productId, id: id, type: .nonConsumable, purchased: now.addingTimeInterval(-3600))
        #expect(try await sold.submit(.init(accountId: account, transaction: bought), now: now.addingTimeInterval(-3600)).outcome == .granted)
        let refunded = transaction(productId, id: id, type: .nonConsumable, purchased: now.addingTimeInterval(-3600), signed: now.addingTimeInterval(-1800),
                                   revoked: now.addingTimeInterval(-1800))
        _ = try await sold.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: now.addingTimeInterval(-1800),
                                                   signedPayload: "x", transaction: refunded), now: now.addingTimeInterval(-1800))
        #expect(try await sold.entitlements(accountId: account, now: now).entitlements.map(\.name).contains(productId) == false, "setup: refunded")

        // Control: with the product still in the catalog, the reversal gives it back.
        let controlAccount = uniqueId("reversed-control-")
        let controlId = uniqueId()
        _ = try await sold.submit(.init(accountId: controlAccount, transaction: transaction(controlProduct, id: controlId, type: .nonConsumable,
                                                                                          purchased: now.addingTimeInterval(-3600))), now: now.addingTimeInterval(-3600))
        _ = try await sold.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: now.addingTimeInterval(-1800), signedPayload: "x",
                                                   transaction: transaction(controlProduct, id: controlId, type: .nonConsumable, purchased: now.addingTimeInterval(-3600),
                                                                            signed: now.addingTimeInterval(-1800), revoked: now.addingTimeInterval(-1800))), now: now.addingTimeInterval(-1800))
        _ = try await sold.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil, signedDate: now.addingTimeInterval(-60), signedPayload: "x",
                                                   transaction: transaction(controlProduct, id: controlId, type: .nonConsumable, purchased: now.addingTimeInterval(-3600),
                                                                            signed: now.addingTimeInterval(-60))), now: now.addingTimeInterval(-60))
        #expect(try await sold.entitlements(accountId: controlAccount, now: now).entitlements.map(\.name).contains(controlProduct), "control: the catalog that keeps it")
        _ = try? await sold.sqlStore.write { sql in try await sql.rows("DELETE FROM purchases WHERE product_id = $1", [.text(controlProduct)]) }

        let dropped = Ledger(store: sold.store, catalog: .demo)
        let missing = try await dropped.ownedProductsMissingFromCatalog()
        if !missing.contains(productId) {
            // The server starts without the product. Apple reverses the refund.
            let reinstated = transaction(productId, id: id, type: .nonConsumable, purchased: now.addingTimeInterval(-3600), signed: now.addingTimeInterval(-60))
            _ = try? await dropped.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil, signedDate: now.addingTimeInterval(-60),
                                                           signedPayload: "x", transaction: reinstated), now: now.addingTimeInterval(-60))
            let owned = try await dropped.entitlements(accountId: account, now: now).entitlements.map(\.name)
            #expect(owned.contains(productId), "the reversed refund gives nothing back: the catalog was allowed to drop the product (owned: \(owned))")
            // Tidy the shared database: this product is in no other test's catalog.
            _ = try? await sold.sqlStore.write { sql in try await sql.rows("DELETE FROM purchases WHERE product_id = $1", [.text(productId)]) }
        }
    }
}
