import Foundation
@testable import IAPKit
import Testing

@Suite("Promoted purchases held until the app is ready")
struct PromotedPurchasesTests {
    @Test("One per product; released once, this launch's first, then the journal's with their win-back offers")
    func holdAndRelease() {
        var promoted = PromotedPurchases()
        promoted.hold(PromotedPurchase(productId: "a", winBackOfferId: "back"))
        promoted.hold(PromotedPurchase(productId: "a"))
        #expect(promoted.held == [PromotedPurchase(productId: "a", winBackOfferId: "back")], "a second tap on the App Store is the same purchase")
        #expect(!promoted.ready)
        let journaled = [JournalEntry(promoted: PromotedPurchase(productId: "a")), JournalEntry(promoted: PromotedPurchase(productId: "b", winBackOfferId: "b1"))]
        let released = promoted.release(journaled: journaled)
        #expect(released == [PromotedPurchase(productId: "a", winBackOfferId: "back"), PromotedPurchase(productId: "b", winBackOfferId: "b1")])
        #expect(promoted.ready && promoted.held.isEmpty)
    }
}
