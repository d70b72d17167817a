import AppStoreFormats
import Foundation
import StoreSimulator
import Testing

extension LifecycleTests {
    static let promotional = OfferRequest(kind: .promotional, id: "pro.monthly.comeback")
    static let offerCode = OfferRequest(kind: .offerCode, id: "PRO-FRIENDS")

    @Test("An offer code for a one-time purchase: its price for each unit, offer type OFFER_CODE, ONE_TIME, no offer period, ONE_TIME_CHARGE")
    func oneTimeOfferCode() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("coder")
        let coins = "com.example.iapkit.coins.100"
        guard case .purchased(_, let id, _) = try await store.purchase(account: "coder", device: "d", productId: coins, quantity: 2,
                                                                         offer: .init(kind: .offerCode, id: "COINS-WELCOME")) else {
            Issue.record("offer-code purchase failed"); return
        }
        let events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.oneTimeCharge] && events[0].subtype == nil)
        let coded = try #require(events[0].transaction)
        #expect(coded.transactionId == id)
        #expect(coded.offerType == .offerCode && coded.offerIdentifier == "COINS-WELCOME" && coded.offerDiscountType == .oneTime)
        #expect(coded.offerPeriod == nil, "Apple reports an offer period only for subscriptions")
        #expect(coded.price == 980 && coded.quantity == 2, "0.49 each")
        #expect(try await store.purchase(account: "coder", device: "d", productId: coins, offer: .init(kind: .offerCode, id: "NOPE"))
                == .failed(reason: "invalidOfferIdentifier: no offer code NOPE for \(coins)"))
        #expect(try await store.purchase(account: "coder", device: "d", productId: coins, offer: .init(kind: .promotional, id: "COINS-WELCOME"))
                == .failed(reason: "invalidOfferIdentifier: promotional offers apply to auto-renewable subscriptions only"))
        // Without a code, the full price.
        guard case .purchased(_, _, _) = try await store.purchase(account: "coder", device: "d", productId: coins) else { Issue.record("purchase failed"); return }
        let plain = try #require(try await told(store, since: &seen).first?.transaction)
        #expect(plain.offerType == nil && plain.offerDiscountType == nil && plain.price == 990)
    }

    @Test("Offer codes and promotional offers: eligibility, SUBSCRIBED or OFFER_REDEEMED as Apple tabulates them, terms in the transactions they price")
    func offers() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("saver")
        let refused = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: Self.promotional)
        #expect(refused == .failed(reason: "ineligibleForOffer: promotional offers are for current and lapsed subscribers"))
        let unknown = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: .init(kind: .offerCode, id: "NOPE"))
        #expect(unknown == .failed(reason: "invalidOfferIdentifier: no offer code NOPE for \(Self.monthly)"))

        // A new subscriber redeems the free-month code instead of the free week.
        guard case .purchased(_, let firstId, _) = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: Self.offerCode) else {
            Issue.record("offer-code purchase failed"); return
        }
        var events = try await told(store, since: &seen)
        // Apple's table: an offer code redeemed to subscribe for the first time is SUBSCRIBED / INITIAL_BUY.
        #expect(events.map(\.type) == [.subscribed])
        #expect(events[0].subtype == .initialBuy)
        let coded = try #require(events[0].transaction)
        #expect(coded.offerType == .offerCode)
        #expect(coded.offerIdentifier == "PRO-FRIENDS")
        #expect(coded.offerDiscountType == .freeTrial)
        #expect(coded.offerPeriod == "P1M")
        #expect(coded.price == 0)
        #expect(abs(coded.expiresDate!.timeIntervalSince(coded.purchaseDate!) - 300) < 1)

        // The code is for new and lapsed subscribers only; a promotional offer applies from the next renewal.
        let again = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: Self.offerCode)
        #expect(again == .failed(reason: "ineligibleForOffer: offer code PRO-FRIENDS is not for existing subscribers"))
        guard case .purchased(_, let unchangedId, _) = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: Self.promotional) else {
            Issue.record("promotional offer failed"); return
        }
        #expect(unchangedId == firstId, "redeeming for the current plan charges nothing now")
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.offerRedeemed])
        #expect(events[0].subtype == nil)
        #expect(events[0].renewal?.offerType == .promotionalOffer)
        #expect(events[0].renewal?.offerIdentifier == "pro.monthly.comeback")
        #expect(events[0].renewal?.renewalPrice == 1990)

        // Pay as you go for two months, then the regular price.
        try await store.advanceClock(by: 300)
        try await store.advanceClock(by: 300)
        try await store.advanceClock(by: 300)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew, .didRenew, .didRenew])
        #expect(events.map { $0.transaction?.price } == [1990, 1990, 4990])
        #expect(events.map { $0.transaction?.offerType } == [.promotionalOffer, .promotionalOffer, nil])
        #expect(events[0].transaction?.offerDiscountType == .payAsYouGo)
        #expect(events[0].renewal?.offerType == .promotionalOffer, "the second discounted period is still to come")
        #expect(events[1].renewal?.offerType == nil)

        // Lapsed: the code works again, as a resubscription of the same series.
        #expect(try await store.setAutoRenew(originalTransactionId: firstId, enabled: false))
        try await store.advanceClock(by: 300)
        _ = try await told(store, since: &seen)
        guard case .purchased = try await store.purchase(account: "saver", device: "d", productId: Self.monthly, offer: Self.offerCode) else {
            Issue.record("resubscription with a code failed"); return
        }
        events = try await told(store, since: &seen)
        // Redeemed after the subscription expired: SUBSCRIBED / RESUBSCRIBE (OFFER_REDEEMED is for active subscriptions).
        #expect(events.map(\.type) == [.subscribed])
        #expect(events[0].subtype == .resubscribe)
        #expect(events[0].transaction?.originalTransactionId == firstId)
        #expect(events[0].transaction?.offerType == .offerCode)
    }

    @Test("An upgrade with a promotional offer is OFFER_REDEEMED / UPGRADE and priced at the offer")
    func upgradeWithOffer() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("climber")
        guard case .purchased = try await store.purchase(account: "climber", device: "d", productId: Self.monthly) else { Issue.record("purchase failed"); return }
        let yearlyOffer = OfferRequest(kind: .promotional, id: "pro.monthly.comeback")
        let refused = try await store.purchase(account: "climber", device: "d", productId: Self.yearly, offer: yearlyOffer)
        #expect(refused == .failed(reason: "invalidOfferIdentifier: no promotional offer pro.monthly.comeback for \(Self.yearly)"), "offers belong to one product")
        guard case .purchased(_, let upgradedId, _) = try await store.purchase(
            account: "climber", device: "d", productId: Self.yearly, offer: .init(kind: .promotional, id: "pro.yearly.upgrade")) else {
            Issue.record("upgrade failed"); return
        }
        let events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed, .offerRedeemed])
        #expect(events[1].subtype == .upgrade)
        let upgraded = try #require(events[1].transaction)
        #expect(upgraded.transactionId == upgradedId)
        #expect(upgraded.productId == Self.yearly)
        #expect(upgraded.offerType == .promotionalOffer)
        #expect(upgraded.offerDiscountType == .payUpFront)
        #expect(upgraded.price == 29990)
        #expect(abs(upgraded.expiresDate!.timeIntervalSince(upgraded.purchaseDate!) - 3600) < 1)
    }
}
