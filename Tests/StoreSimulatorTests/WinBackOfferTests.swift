import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import StoreSimulator
import Testing

/// Win-back offers (StoreKit's `.winBackOffer(_:)`, iOS 18): for customers whose subscription in the group churned —
/// expired and not renewing — and who paid for it; refused to anyone else as StoreKit refuses, before any charge.
@Suite("Win-back offers: for lapsed paying subscribers only, priced as the offer, SUBSCRIBED RESUBSCRIBE")
struct WinBackOfferTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"
    static let winBack = OfferRequest(kind: .winBack, id: "pro.monthly.winback")
    let lifecycle = LifecycleTests()

    /// A customer who had the free week, paid one month, turned auto-renew off and let it expire.
    func lapsedPayer(_ store: StoreEngine, _ account: String) async throws -> String {
        try await store.createAccount(account)
        guard case .purchased(_, let original, _) = try await store.purchase(account: account, device: "d", productId: Self.monthly) else {
            throw SimulatorError.catalog("the first purchase failed")
        }
        try await store.advanceClock(by: 200)  // past the free week (180 s): the first paid month
        #expect(try await store.setAutoRenew(originalTransactionId: original, enabled: false))
        try await store.advanceClock(by: 400)  // past the paid month's end
        return original
    }

    @Test("A lapsed paying subscriber redeems it: offerType 4, its id, PAY_UP_FRONT, its price and period; SUBSCRIBED RESUBSCRIBE")
    func eligible() async throws {
        let store = try lifecycle.engine()
        let original = try await lapsedPayer(store, "lapsed")
        var seen = 0
        let before = try await lifecycle.told(store, since: &seen)
        let expired = try #require(before.last)
        #expect(expired.type == .expired && expired.subtype == .voluntary)
        #expect(expired.renewal?.eligibleWinBackOfferIds == ["pro.monthly.winback"], "a lapsed payer's renewal info names the offer")

        guard case .purchased(_, let id, _) = try await store.purchase(account: "lapsed", device: "d", productId: Self.monthly, offer: Self.winBack) else {
            Issue.record("the win-back purchase was refused"); return
        }
        let events = try await lifecycle.told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed], "Apple: a win-back offer redeemed after the subscription expired is SUBSCRIBED")
        #expect(events.first?.subtype == .resubscribe)
        let transaction = try #require(events.first?.transaction)
        #expect(transaction.transactionId == id)
        #expect(transaction.originalTransactionId == original, "resubscribing continues the series")
        #expect(transaction.offerType == .winBackOffer && transaction.offerType?.rawValue == 4)
        #expect(transaction.offerIdentifier == "pro.monthly.winback")
        #expect(transaction.offerDiscountType == .payUpFront)
        #expect(transaction.offerPeriod == "P3M")
        #expect(transaction.price == 5990, "the offer's price, not the month's 4990")
        #expect(abs(transaction.expiresDate!.timeIntervalSince(transaction.purchaseDate!) - 900) < 1, "three sandbox months")
        #expect(events.first?.renewal?.eligibleWinBackOfferIds == nil, "subscribed again: no longer eligible")

        // Subscribed now: a second redemption is refused.
        #expect(try await store.purchase(account: "lapsed", device: "d", productId: Self.monthly, offer: Self.winBack)
                == .failed(reason: "ineligibleForOffer: win-back offers are for lapsed subscribers; this customer's subscription in the group is active, in a grace period or in billing retry"))
    }

    @Test("Refused before any charge: never subscribed, subscribed now, in billing retry, never paid (free week only), unknown offer, one-time product")
    func ineligible() async throws {
        let store = try lifecycle.engine()
        /// Refused with `reason`, and nothing minted: no transaction, no notification.
        func refused(_ account: String, _ productId: String, _ offer: OfferRequest, _ reason: String) async throws {
            let transactions = try #require(try await store.transactionHistory(account: account)).count
            let notifications = await store.notifications().count
            #expect(try await store.purchase(account: account, device: "d", productId: productId, offer: offer) == .failed(reason: reason))
            #expect(try await store.transactionHistory(account: account)?.count == transactions, "nothing charged")
            #expect(await store.notifications().count == notifications)
        }

        try await store.createAccount("new")
        try await refused("new", Self.monthly, Self.winBack,
                          "ineligibleForOffer: win-back offers are for lapsed subscribers; this customer never subscribed in the group")

        try await store.createAccount("active")
        _ = try await store.purchase(account: "active", device: "d", productId: Self.monthly)
        try await store.advanceClock(by: 200)
        try await refused("active", Self.monthly, Self.winBack,
                          "ineligibleForOffer: win-back offers are for lapsed subscribers; this customer's subscription in the group is active, in a grace period or in billing retry")

        // Apple: a subscription in a billing grace period or in billing retry is not churned.
        try await store.createAccount("retrying")
        guard case .purchased(_, let retrying, _) = try await store.purchase(account: "retrying", device: "d", productId: Self.monthly) else {
            Issue.record("the purchase failed"); return
        }
        try await store.advanceClock(by: 200)
        #expect(try await store.setBillingFails(account: "retrying", true))
        try await store.advanceClock(by: 400)
        #expect(try await store.subscriptionStatuses(containing: retrying).first?.status == .billingGracePeriod)
        try await refused("retrying", Self.monthly, Self.winBack,
                          "ineligibleForOffer: win-back offers are for lapsed subscribers; this customer's subscription in the group is active, in a grace period or in billing retry")

        // A free week, cancelled before paying: App Store Connect asks for at least a month of paid subscription.
        try await store.createAccount("trial")
        guard case .purchased(_, let trial, _) = try await store.purchase(account: "trial", device: "d", productId: Self.monthly) else {
            Issue.record("the trial purchase failed"); return
        }
        #expect(try await store.setAutoRenew(originalTransactionId: trial, enabled: false))
        try await store.advanceClock(by: 200)
        try await refused("trial", Self.monthly, Self.winBack,
                          "ineligibleForOffer: win-back offers are for lapsed paying subscribers; this customer never paid for a period in the group")

        _ = try await lapsedPayer(store, "lapsed")
        try await refused("lapsed", Self.monthly, OfferRequest(kind: .winBack, id: "NOPE"), "invalidOfferIdentifier: no win-back offer NOPE for \(Self.monthly)")
        try await refused("lapsed", Self.yearly, Self.winBack, "invalidOfferIdentifier: no win-back offer pro.monthly.winback for \(Self.yearly)")
        try await refused("lapsed", "com.example.iapkit.premium", Self.winBack, "invalidOfferIdentifier: win-back offers apply to auto-renewable subscriptions only")
    }

    @Test("Over HTTP: /sim/products lists the offer; POST /sim/purchases redeems {kind: winBack} or refuses it with nothing charged")
    func overHTTP() async throws {
        let engine = try lifecycle.engine()
        let key = P256.Signing.PrivateKey()
        let authenticator = APIAuthenticator(keyId: "KEY", issuerId: "issuer", publicKey: key.publicKey, bundleId: "com.example.iapkit")
        _ = try await lapsedPayer(engine, "lapsed")
        try await SimulatorServer.application(.init(engine: engine, authenticator: authenticator), port: 0).test(.live) { client in
            let listed = try JSONSerialization.jsonObject(with: Data(try await client.execute(uri: "/sim/products?ids=\(Self.monthly)", method: .get)
                .body.readableBytesView)) as? [String: Any]
            let product = try #require((listed?["products"] as? [[String: Any]])?.first)
            let offers = try #require(product["winBackOffers"] as? [[String: Any]])
            #expect(offers.count == 1)
            #expect(offers.first?["id"] as? String == "pro.monthly.winback")
            #expect(offers.first?["discountType"] as? String == "PAY_UP_FRONT")
            #expect(offers.first?["price"] as? Int == 5990)
            #expect(offers.first?["period"] as? String == "P3M")

            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "fresh"]))
            let body: [String: Any] = ["device": "d", "productId": Self.monthly, "offer": ["kind": "winBack", "id": "pro.monthly.winback"], "withReceipt": false]
            var fresh = body
            fresh["account"] = "fresh"
            let refused = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(fresh)))
            #expect(refused.status == "failed")
            #expect(refused.reason?.hasPrefix("ineligibleForOffer:") == true, "\(refused.reason ?? "")")
            let history = try decode(SimulatedSignedTransactions.self, try await client.execute(uri: "/sim/accounts/fresh/transactions", method: .get))
            #expect(history.signedTransactions.isEmpty, "nothing charged")

            var lapsed = body
            lapsed["account"] = "lapsed"
            let redeemed = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(lapsed)))
            #expect(redeemed.status == "purchased")
            let signed = try #require(redeemed.signedTransaction)
            let payload = try await lifecycle.verifier.verifyTransaction(signed).payload
            #expect(payload.offerType == .winBackOffer && payload.offerIdentifier == "pro.monthly.winback" && payload.price == 5990)
        }
    }

    @Test("A .storekit file's winbackOffers are read: id, payment mode, period, price")
    func storeKitFile() throws {
        let file = #"""
        {"products": [], "nonRenewingSubscriptions": [], "subscriptionGroups": [{"id": "G1", "name": "Pro", "subscriptions": [{
          "productID": "com.example.iapkit.pro", "referenceName": "Pro", "type": "RecurringSubscription", "displayPrice": "9.99",
          "subscriptionGroupID": "G1", "groupNumber": 1, "recurringSubscriptionPeriod": "P1M", "adHocOffers": [], "codeOffers": [],
          "winbackOffers": [{"internalID": "W1", "offerID": "pro.back", "referenceName": "Come back", "paymentMode": "payAsYouGo",
                             "subscriptionPeriod": "P1M", "numberOfPeriods": 2, "displayPrice": "1.99"}]}]}]}
        """#
        let catalog = try SimulatorCatalog(storeKit: StoreKitConfiguration(data: Array(file.utf8)), settings: CatalogSettings(bundleId: "com.example.iapkit"))
        let offer = try #require(catalog.product("com.example.iapkit.pro")?.winBackOffers.first)
        #expect(offer.offerId == "pro.back")
        #expect(offer.discountType == .payAsYouGo)
        #expect(offer.period == SubscriptionPeriod(value: 1, unit: .month) && offer.numberOfPeriods == 2)
        #expect(offer.price == 1990)
        #expect(try SimulatorCatalog(storeKit: nil, settings: .demo).product(Self.monthly)?.winBackOffers.map(\.offerId) == ["pro.monthly.winback"])
    }
}
