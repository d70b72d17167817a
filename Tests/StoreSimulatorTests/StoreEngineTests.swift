import AppStoreFormats
import AppStoreTrust
import Foundation
import StoreSimulator
import Testing

@Suite("The simulator's purchase engine")
struct StoreEngineTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-engine-\(UUID().uuidString)")

    /// An engine in memory, or kept in this test's data directory when `persistent`.
    func engine(persistent: Bool = false) throws -> StoreEngine {
        let catalog = try SimulatorCatalog(storeKit: CatalogTests.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat", appAppleId: 42))
        return try StoreEngine(catalog: catalog, minter: Minter(authority: sharedAuthority), dataDirectory: persistent ? directory : nil)
    }

    let jws = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))
    let receipts = ReceiptVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))

    func purchased(_ result: StoreEngine.PurchaseResult) throws -> (jws: String, id: String, receipt: [UInt8]) {
        guard case .purchased(let signed, let id, let receipt?) = result else {
            Issue.record("expected a purchase, got \(result)")
            throw SimulatorError.catalog("not purchased")
        }
        return (signed, id, receipt)
    }

    @Test("Each product type is bought, signed and on the receipt; ids are unique")
    func buysEachType() async throws {
        let store = try engine()
        try await store.createAccount("alice")
        let token = UUID()
        var ids: Set<String> = []
        for product in ["com.revenuecat.consumable", "lifetime", "com.revenuecat.non_renewable", "com.revenuecat.monthly_4.99.1_week_intro"] {
            let bought = try purchased(try await store.purchase(account: "alice", device: "phone", productId: product, appAccountToken: token))
            let verified = try await jws.verifyTransaction(bought.jws)
            #expect(verified.payload.productId == product)
            #expect(verified.payload.appAccountToken == token)
            #expect(verified.payload.transactionId == bought.id)
            ids.insert(bought.id)
            let receipt = try await receipts.verify(bought.receipt)
            #expect(receipt.receipt.inAppPurchases.contains { $0.transactionId == bought.id && $0.productId == product })
        }
        #expect(ids.count == 4)
    }

    @Test("A first subscription in a group gets the intro offer; a later one in the group does not")
    func introOfferEligibility() async throws {
        let store = try engine()
        try await store.createAccount("bob")
        let first = try purchased(try await store.purchase(account: "bob", device: "d", productId: "com.revenuecat.monthly_4.99.1_week_intro"))
        let t1 = try await jws.verifyTransaction(first.jws).payload
        #expect(t1.offerType == .introductoryOffer)
        #expect(t1.offerDiscountType == .freeTrial)
        #expect(t1.price == 0)
        // The file's free trial is three months (P3M): 15 simulated minutes at sandbox rates.
        #expect(t1.offerPeriod == "P3M")
        #expect(abs(t1.expiresDate!.timeIntervalSince(t1.purchaseDate!) - 900) < 1)
        // Another plan of the same group while this one is live is a crossgrade; let it lapse first.
        #expect(try await store.setAutoRenew(originalTransactionId: first.id, enabled: false))
        try await store.advanceClock(by: 901)
        let second = try purchased(try await store.purchase(account: "bob", device: "d", productId: "com.revenuecat.annual_39.99.2_week_intro"))
        let t2 = try await jws.verifyTransaction(second.jws).payload
        #expect(t2.offerType == nil)
        #expect(t2.price == 39_990)
        #expect(abs(t2.expiresDate!.timeIntervalSince(t2.purchaseDate!) - 3600) < 1)
    }

    @Test("Finished consumables leave the receipt; other types stay")
    func consumablesDropAfterFinish() async throws {
        let store = try engine()
        try await store.createAccount("carol")
        let coins = try purchased(try await store.purchase(account: "carol", device: "d", productId: "com.revenuecat.consumable"))
        let lifetime = try purchased(try await store.purchase(account: "carol", device: "d", productId: "lifetime"))
        #expect(try await store.unfinished(account: "carol", device: "d").count == 2)
        #expect(try await store.finish(coins.id, device: "d"))
        #expect(try await store.finish(lifetime.id, device: "d"))
        #expect(try await !store.finish(coins.id, device: "d"), "finishing twice reports nothing to finish")
        #expect(try await store.unfinished(account: "carol", device: "d").isEmpty)
        let receipt = try await receipts.verify(store.receipt(for: "carol")).receipt
        #expect(receipt.inAppPurchases.map(\.transactionId) == [lifetime.id])
        let restored = try await store.restore(account: "carol")
        #expect(restored.count == 1)
    }

    @Test("Outcomes: cancelled, failed, no payments, invalid product, Ask to Buy approved and declined")
    func outcomes() async throws {
        let store = try engine()
        try await store.createAccount("dave")
        #expect(try await store.purchase(account: "dave", device: "d", productId: "lifetime", outcome: .userCancelled) == .userCancelled)
        guard case .failed = try await store.purchase(account: "dave", device: "d", productId: "lifetime", outcome: .failed) else { Issue.record("expected failure"); return }
        guard case .failed = try await store.purchase(account: "dave", device: "d", productId: "no.such.product") else { Issue.record("expected failure"); return }
        try await store.createAccount("kid", canMakePayments: false)
        guard case .failed = try await store.purchase(account: "kid", device: "d", productId: "lifetime") else { Issue.record("expected failure"); return }
        #expect(try await store.unfinished(account: "dave", device: "d").isEmpty)

        try await store.createAccount("teen", askToBuy: true)
        guard case .pending(let approveMe) = try await store.purchase(account: "teen", device: "d", productId: "lifetime") else { Issue.record("expected pending"); return }
        guard case .pending(let declineMe) = try await store.purchase(account: "teen", device: "d", productId: "com.revenuecat.consumable") else { Issue.record("expected pending"); return }
        #expect(try await store.unfinished(account: "teen", device: "d").isEmpty)
        let approved = try #require(try await store.approve(approveMe))
        #expect(try await store.decline(declineMe))
        #expect(try await store.approve(declineMe) == nil)
        let queue = try await store.unfinished(account: "teen", device: "d")
        #expect(queue.count == 1)
        #expect(try await jws.verifyTransaction(queue[0]).payload.transactionId == approved)
    }

    @Test("A restart on the same data directory loses nothing and mints no id twice")
    func restart() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var store = try engine(persistent: true)
        try await store.createAccount("erin")
        let first = try purchased(try await store.purchase(account: "erin", device: "d", productId: "lifetime"))
        try await store.advanceClock(by: 600)
        store = try engine(persistent: true)
        let queue = try await store.unfinished(account: "erin", device: "d")
        #expect(queue.count == 1)
        #expect(try await jws.verifyTransaction(queue[0]).payload.transactionId == first.id)
        let second = try purchased(try await store.purchase(account: "erin", device: "d", productId: "com.revenuecat.consumable"))
        #expect(second.id != first.id)
        let t = try await jws.verifyTransaction(second.jws).payload
        // The advanced clock survived the restart.
        #expect(t.purchaseDate!.timeIntervalSinceNow > 590)
    }
}
