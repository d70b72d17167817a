import AppStoreFormats
import Foundation
import StoreSimulator
import Testing

extension LifecycleTests {
    static let premium = "com.example.iapkit.premium"
    static let coins = "com.example.iapkit.coins.100"

    @Test("Family Sharing: members get FAMILY_SHARED copies that renew with the purchaser's, and REVOKE when access ends")
    func familySharing() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("parent")
        try await store.createAccount("kid")
        #expect(try await store.setFamily(organizer: "parent", members: ["kid"]))
        #expect(try await store.setFamily(organizer: "parent", members: ["nobody"]) == false)
        #expect(try await store.setFamily(organizer: "parent", members: ["parent"]) == false)

        let token = UUID()
        guard case .purchased(_, let premiumId, _) = try await store.purchase(account: "parent", device: "p", productId: Self.premium, appAccountToken: token),
              case .purchased = try await store.purchase(account: "parent", device: "p", productId: Self.coins),
              case .purchased = try await store.purchase(account: "parent", device: "p", productId: Self.monthly) else {
            Issue.record("purchases failed"); return
        }
        var events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.oneTimeCharge, .oneTimeCharge, .oneTimeCharge, .subscribed, .subscribed], "consumables are never shared")
        let sharedPremium = try #require(events[1].transaction)
        #expect(sharedPremium.inAppOwnershipType == .familyShared)
        #expect(sharedPremium.productId == Self.premium)
        #expect(sharedPremium.transactionId != premiumId)
        #expect(sharedPremium.appAccountToken == nil, "the purchaser's token names the purchaser")
        #expect(events[0].transaction?.appAccountToken == token)
        #expect(events[2].transaction?.productId == Self.coins)
        let sharedMonthly = try #require(events[4].transaction)
        #expect(events[4].subtype == .initialBuy)
        #expect(sharedMonthly.inAppOwnershipType == .familyShared)
        #expect(sharedMonthly.originalTransactionId == sharedMonthly.transactionId)
        #expect(sharedMonthly.expiresDate == events[3].transaction?.expiresDate)
        let kidSeries = try #require(sharedMonthly.originalTransactionId)

        // The purchaser's renewal reaches the member as the member's own renewal.
        try await store.advanceClock(by: 180)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew, .didRenew])
        #expect(events[1].transaction?.originalTransactionId == kidSeries)
        #expect(events[1].transaction?.inAppOwnershipType == .familyShared)
        #expect(events[1].transaction?.expiresDate == events[0].transaction?.expiresDate)
        #expect(events[1].status == .active)
        // Only the purchaser manages the subscription; a member's copy cannot be refunded or extended.
        #expect(try await store.setAutoRenew(originalTransactionId: kidSeries, enabled: false) == false)
        #expect(try await store.refund(events[1].transaction!.transactionId!) == false)

        // The member leaves: REVOKE for each copy.
        #expect(try await store.setFamily(organizer: "parent", members: []))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.revoke, .revoke])
        #expect(events.allSatisfy { $0.transaction?.revocationType == .familyRevoke && $0.transaction?.inAppOwnershipType == .familyShared })
        #expect(events[1].status == .revoked)
        try await store.advanceClock(by: 300)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew], "a revoked copy follows the purchaser no more")

        // Back in the family, then the purchaser's refund revokes the member's copy too.
        #expect(try await store.setFamily(organizer: "parent", members: ["kid"]))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.oneTimeCharge, .subscribed])
        #expect(events[1].subtype == .resubscribe)
        #expect(try await store.refund(premiumId))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.refund, .revoke])
        #expect(events[1].transaction?.productId == Self.premium)
        #expect(events[1].transaction?.inAppOwnershipType == .familyShared)

        let restored = try await store.restore(account: "kid").count
        #expect(restored == 5, "two premium copies and three subscription periods, revoked ones included")
    }
}
