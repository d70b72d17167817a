import AppStoreFormats
import AppStoreTrust
import Foundation
import HummingbirdTesting
import StoreSimulator
import Testing

/// The App Store sells an Apple ID nothing it already has: buying an owned non-consumable, or the product of a live
/// subscription, answers the transaction that owns it and charges nothing. And Ask to Buy requests are listed.
@Suite("The simulator answers what the Apple ID owns, and lists waiting Ask to Buy requests")
struct OwnedPurchaseTests {
    static let monthly = "com.revenuecat.monthly_4.99.1_week_intro"

    func engine() throws -> StoreEngine {
        let catalog = try SimulatorCatalog(storeKit: CatalogTests.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat", appAppleId: 42))
        return try StoreEngine(catalog: catalog, minter: Minter(authority: sharedAuthority))
    }

    let jws = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))

    func bought(_ result: StoreEngine.PurchaseResult) throws -> String {
        guard case .purchased(_, let id, _) = result else {
            Issue.record("expected a purchase, got \(result)")
            throw SimulatorError.catalog("not purchased")
        }
        return id
    }

    @Test("Buying an owned non-consumable again answers the transaction that bought it (the first buyer's token): no new transaction, no notification, Ask to Buy not asked; refunded, it is sold again")
    func ownedNonConsumable() async throws {
        let store = try engine()
        try await store.createAccount("olga")
        let (tokenA, tokenB) = (UUID(), UUID())
        let first = try bought(try await store.purchase(account: "olga", device: "phone", productId: "lifetime", appAccountToken: tokenA))
        let notified = await store.notifications().count
        let again = try await store.purchase(account: "olga", device: "tablet", productId: "lifetime", appAccountToken: tokenB)
        guard case .purchased(let signed, let id, _) = again else { Issue.record("expected the owned transaction, got \(again)"); return }
        #expect(id == first, "the App Store answers the purchase that owns it")
        let payload = try await jws.verifyTransaction(signed).payload
        #expect(payload.transactionId == first && payload.appAccountToken == tokenA, "the first buyer's order, not the second's")
        #expect(try await store.transactionHistory(account: "olga")?.count == 1, "charged once")
        #expect(await store.notifications().count == notified, "nothing sold, nothing notified")
        #expect(try await store.unfinished(account: "olga", device: "tablet").isEmpty, "answered to the purchase, not queued")

        // Under Ask to Buy the App Store still answers what is owned: no parent is asked for it.
        try await store.createAccount("olga", askToBuy: true)
        #expect(try bought(try await store.purchase(account: "olga", device: "phone", productId: "lifetime")) == first)
        #expect(await store.waitingRequests().isEmpty)
        try await store.createAccount("olga")

        // Refunded, it is owned no more: sold again, and that purchase is then the one that owns it.
        #expect(try await store.refund(first))
        let rebought = try bought(try await store.purchase(account: "olga", device: "phone", productId: "lifetime", appAccountToken: tokenB))
        #expect(rebought != first)
        #expect(try bought(try await store.purchase(account: "olga", device: "phone", productId: "lifetime")) == rebought)
        #expect(await store.notifications().filter { $0.type == .oneTimeCharge }.count == 2)

        // What is not owned for good is charged every time.
        for product in ["com.revenuecat.consumable", "com.revenuecat.non_renewable"] {
            let one = try bought(try await store.purchase(account: "olga", device: "phone", productId: product))
            let two = try bought(try await store.purchase(account: "olga", device: "phone", productId: product))
            #expect(one != two, "\(product) is bought again")
        }
    }

    @Test("Buying the product of a live subscription answers its current transaction, charging and notifying nothing; expired, it is a resubscription")
    func currentlySubscribed() async throws {
        let store = try engine()
        try await store.createAccount("sam")
        let original = try bought(try await store.purchase(account: "sam", device: "phone", productId: Self.monthly))
        // The free trial (15 simulated minutes) ends and the series renews: its latest transaction is no longer the first.
        try await store.advanceClock(by: 930)
        let latest = try #require(await store.recordedSeries().first { $0.originalTransactionId == original }).latestTransactionId
        #expect(latest != original)
        let (minted, notified) = (await store.recordedTransactions().count, await store.notifications().count)
        let again = try await store.purchase(account: "sam", device: "phone", productId: Self.monthly)
        guard case .purchased(let signed, let id, _) = again else { Issue.record("expected the current transaction, got \(again)"); return }
        #expect(id == latest)
        #expect(try await jws.verifyTransaction(signed).payload.originalTransactionId == original)
        #expect(await store.recordedTransactions().count == minted, "nothing charged")
        #expect(await store.notifications().count == notified, "nothing notified")

        // Turned off and lapsed, buying it again is a new purchase of the series.
        #expect(try await store.setAutoRenew(originalTransactionId: original, enabled: false))
        try await store.advanceClock(by: 400)
        let resubscribed = try bought(try await store.purchase(account: "sam", device: "phone", productId: Self.monthly))
        #expect(resubscribed != latest)
        #expect(await store.notifications().last?.subtype == .resubscribe)
    }

    @Test("An Ask to Buy request for a non-consumable bought meanwhile is approved without a charge: the owning transaction reaches the waiting device")
    func approvedWhenOwned() async throws {
        let store = try engine()
        try await store.createAccount("tia", askToBuy: true)
        guard case .pending(let request) = try await store.purchase(account: "tia", device: "ipad", productId: "lifetime") else {
            Issue.record("expected Ask to Buy"); return
        }
        try await store.createAccount("tia")
        let owned = try bought(try await store.purchase(account: "tia", device: "phone", productId: "lifetime"))
        #expect(try await store.approve(request) == owned)
        #expect(try await store.transactionHistory(account: "tia")?.count == 1, "charged once")
        let queue = try await store.unfinished(account: "tia", device: "ipad")
        #expect(try await queue.asyncMap { try await jws.verifyTransaction($0).payload.transactionId } == [owned])
    }

    @Test("GET /sim/requests lists the waiting requests by the id the pending answer named (?account= filters); approved by that id, one leaves the list")
    func listsRequests() async throws {
        try await SimulatorFixture().application().test(.router) { client in
            for id in ["teen", "kid"] {
                _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": id, "askToBuy": true]))
            }
            func buy(_ body: [String: Any]) async throws -> SimulatedPurchaseAnswer {
                try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(body)))
            }
            let teen = try await buy(["account": "teen", "device": "d", "productId": "lifetime", "withReceipt": false])
            let kid = try await buy(["account": "kid", "device": "k", "productId": "com.revenuecat.consumable", "outcome": "interrupted"])
            #expect(teen.status == "pending" && kid.status == "interrupted")
            let (teenRequest, kidRequest) = (try #require(teen.requestId), try #require(kid.requestId))

            let all = try decode(SimRequests.self, try await client.execute(uri: "/sim/requests", method: .get)).requests
            #expect(all.map(\.requestId) == [teenRequest, kidRequest], "oldest first")
            #expect(all.map(\.state) == ["pending", "interrupted"])
            #expect(all.map(\.productId) == ["lifetime", "com.revenuecat.consumable"])
            #expect(all.map(\.device) == ["d", "k"])
            #expect(all.allSatisfy { $0.requestedAt != nil })
            let teens = try decode(SimRequests.self, try await client.execute(uri: "/sim/requests?account=teen", method: .get)).requests
            #expect(teens.map(\.requestId) == [teenRequest])

            let approved = try await client.execute(uri: "/sim/requests/\(teenRequest)/approve", method: .post)
            #expect(approved.status == .ok)
            let left = try decode(SimRequests.self, try await client.execute(uri: "/sim/requests", method: .get)).requests
            #expect(left.map(\.requestId) == [kidRequest])
            #expect(try decode(SimRequests.self, try await client.execute(uri: "/sim/requests?account=teen", method: .get)).requests.isEmpty)
        }
    }
}

/// `GET /sim/requests`.
struct SimRequests: Decodable {
    struct Request: Decodable {
        var requestId: String
        var account: String
        var device: String
        var productId: String
        var requestedAt: Date?
        var state: String
    }

    var requests: [Request]
}
