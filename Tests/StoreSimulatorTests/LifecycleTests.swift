import AppStoreFormats
import AppStoreTrust
import Foundation
import StoreSimulator
import Testing

@Suite("A subscription's life on the simulator's clock, told by its notifications")
struct LifecycleTests {
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.example.iapkit"))

    func engine(grace: Bool = true) throws -> StoreEngine {
        try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority), gracePeriodEnabled: grace)
    }

    /// The notifications minted since `seen`, verified, with their nested transaction and renewal info.
    struct Told {
        let type: NotificationTypeV2
        let subtype: NotificationSubtype?
        let status: SubscriptionStatus?
        let transaction: JWSTransactionDecodedPayload?
        let renewal: JWSRenewalInfoDecodedPayload?
    }

    func told(_ store: StoreEngine, since seen: inout Int) async throws -> [Told] {
        let all = await store.notifications()
        defer { seen = all.count }
        var result: [Told] = []
        for record in all.dropFirst(seen) {
            let notification = try await verifier.verifyNotification(record.signedPayload).payload
            #expect(notification.notificationType == record.type)
            let transaction = try await notification.data?.signedTransactionInfo.asyncMap { try await verifier.verifyTransaction($0).payload }
            let renewal = try await notification.data?.signedRenewalInfo.asyncMap { try await verifier.verifyRenewalInfo($0).payload }
            result.append(Told(type: notification.notificationType!, subtype: notification.subtype, status: notification.data?.status,
                               transaction: transaction, renewal: renewal))
        }
        return result
    }

    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    @Test("intro → renewals → grace → billing retry → recovery → upgrade → refund, and expiries")
    func walk() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("walker")
        guard case .purchased(_, let firstId, _) = try await store.purchase(account: "walker", device: "phone", productId: Self.monthly) else {
            Issue.record("purchase failed"); return
        }
        var events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed])
        #expect(events[0].subtype == .initialBuy)
        let intro = try #require(events[0].transaction)
        #expect(intro.offerType == .introductoryOffer)
        #expect(intro.offerDiscountType == .freeTrial)
        #expect(intro.price == 0)
        #expect(events[0].status == .active)

        // The free week (3 minutes), then two paid months (5 minutes each).
        try await store.advanceClock(by: 180)
        try await store.advanceClock(by: 300)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew, .didRenew])
        let renewal = try #require(events[0].transaction)
        #expect(renewal.originalTransactionId == firstId)
        #expect(renewal.transactionId != firstId)
        #expect(renewal.transactionReason == .renewal)
        #expect(renewal.offerType == nil)
        #expect(renewal.price == 4990)
        #expect(abs(renewal.expiresDate!.timeIntervalSince(renewal.purchaseDate!) - 300) < 1)
        #expect(renewal.purchaseDate == intro.expiresDate)
        #expect(events[1].transaction?.purchaseDate == renewal.expiresDate)

        // Billing fails at the next renewal: grace period, then billing retry.
        #expect(try await store.setBillingFails(account: "walker", true))
        try await store.advanceClock(by: 300)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didFailToRenew])
        #expect(events[0].subtype == .gracePeriod)
        #expect(events[0].status == .billingGracePeriod)
        #expect(events[0].renewal?.isInBillingRetryPeriod == true)
        #expect(events[0].renewal?.expirationIntent == .billingError)
        #expect(events[0].renewal?.gracePeriodExpiresDate != nil)
        try await store.advanceClock(by: 16 * 180.0 / 7 + 1)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.gracePeriodExpired])
        #expect(events[0].status == .billingRetry)

        // Billing works again: the subscription recovers with a new period.
        #expect(try await store.setBillingFails(account: "walker", false))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew])
        #expect(events[0].subtype == .billingRecovery)
        #expect(events[0].status == .active)
        let recovered = try #require(events[0].transaction)
        #expect(recovered.originalTransactionId == firstId)

        // Upgrade to the yearly plan (level 1): immediate, the old period marked upgraded.
        guard case .purchased(_, let upgradedId, _) = try await store.purchase(account: "walker", device: "phone", productId: Self.yearly) else {
            Issue.record("upgrade failed"); return
        }
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didChangeRenewalPref])
        #expect(events[0].subtype == .upgrade)
        #expect(events[0].transaction?.productId == Self.yearly)
        #expect(events[0].transaction?.originalTransactionId == firstId)
        #expect(abs(events[0].transaction!.expiresDate!.timeIntervalSince(events[0].transaction!.purchaseDate!) - 3600) < 1)
        #expect(await store.transaction(recovered.transactionId!)?.isUpgraded == true)
        #expect(await store.transaction(upgradedId)?.productId == Self.yearly)

        // Refund: revoked.
        #expect(try await store.refund(upgradedId))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.refund])
        #expect(events[0].status == .revoked)
        #expect(events[0].transaction?.revocationDate != nil)
        #expect(events[0].transaction?.revocationReason == .refundedForOtherReason)
        #expect(events[0].transaction?.revocationType == .refundFull)
        #expect(events[0].transaction?.revocationPercentage == 100_000)
        // …and reversed.
        #expect(try await store.reverseRefund(upgradedId))
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.refundReversed])
        #expect(events[0].status == .active)
        #expect(events[0].transaction?.revocationDate == nil)
        #expect(events[0].transaction?.revocationType == nil)
        #expect(events[0].transaction?.revocationPercentage == nil, "Apple drops the percentage when a refund is reversed")

        // Auto-renew off: expires voluntarily at the end of the period.
        #expect(try await store.setAutoRenew(originalTransactionId: firstId, enabled: false))
        try await store.advanceClock(by: 3600)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didChangeRenewalStatus, .expired])
        #expect(events[0].subtype == .autoRenewDisabled)
        #expect(events[0].renewal?.autoRenewStatus == .off)
        #expect(events[1].subtype == .voluntary)
        #expect(events[1].status == .expired)

        // Resubscribing continues the series, with no second free trial.
        guard case .purchased(_, let againId, _) = try await store.purchase(account: "walker", device: "phone", productId: Self.monthly) else {
            Issue.record("resubscribe failed"); return
        }
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed])
        #expect(events[0].subtype == .resubscribe)
        #expect(events[0].transaction?.originalTransactionId == firstId)
        #expect(events[0].transaction?.offerType == nil)
        #expect(await store.transaction(againId)?.price == 4990)
    }

    @Test("Without a grace period, billing retry ends in EXPIRED / BILLING_RETRY; a downgrade waits for the renewal")
    func retryExpiryAndDowngrade() async throws {
        let store = try engine(grace: false)
        var seen = 0
        try await store.createAccount("late-payer", billingFails: true)
        guard case .purchased = try await store.purchase(account: "late-payer", device: "d", productId: Self.yearly) else { Issue.record("purchase failed"); return }
        try await store.advanceClock(by: 3600)
        try await store.advanceClock(by: 60 * 180.0 / 7 + 1)
        var events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed, .didFailToRenew, .expired])
        #expect(events[1].subtype == nil)
        #expect(events[1].status == .billingRetry)
        #expect(events[2].subtype == .billingRetry)

        try await store.createAccount("saver")
        guard case .purchased(_, let yearlyId, _) = try await store.purchase(account: "saver", device: "d", productId: Self.yearly) else { Issue.record("purchase failed"); return }
        guard case .purchased(_, let sameId, _) = try await store.purchase(account: "saver", device: "d", productId: Self.monthly) else { Issue.record("downgrade failed"); return }
        #expect(sameId == yearlyId, "a downgrade charges nothing now")
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.subscribed, .didChangeRenewalPref])
        #expect(events[1].subtype == .downgrade)
        #expect(events[1].renewal?.autoRenewProductId == Self.monthly)
        #expect(events[1].renewal?.productId == Self.yearly)
        try await store.advanceClock(by: 3600)
        events = try await told(store, since: &seen)
        #expect(events.map(\.type) == [.didRenew])
        #expect(events[0].transaction?.productId == Self.monthly)
    }

    @Test("Sandbox stops renewing after 12 renewals; one-time purchases announce ONE_TIME_CHARGE")
    func renewalCapAndOneTimeCharge() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("loyal")
        guard case .purchased = try await store.purchase(account: "loyal", device: "d", productId: Self.yearly) else { Issue.record("purchase failed"); return }
        try await store.advanceClock(by: 20 * 3600)
        let events = try await told(store, since: &seen)
        #expect(events.filter { $0.type == .didRenew }.count == 12)
        #expect(events.last?.type == .expired)
        #expect(events.last?.subtype == .voluntary)
        guard case .purchased(_, let coins, _) = try await store.purchase(account: "loyal", device: "d", productId: "com.example.iapkit.coins.100") else { Issue.record("purchase failed"); return }
        let charge = try await told(store, since: &seen)
        #expect(charge.map(\.type) == [.oneTimeCharge])
        #expect(charge.first?.transaction?.transactionId == coins)
        #expect(charge.first?.status == nil)
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

@Suite("Price increases and renewal extensions")
struct PriceIncreaseTests {
    let base = LifecycleTests()

    @Test("Consent given: PENDING, ACCEPTED, then renewal at the new price; no consent: EXPIRED / PRICE_INCREASE")
    func priceIncrease() async throws {
        let store = try base.engine()
        var seen = 0
        for account in ["agrees", "ignores"] {
            try await store.createAccount(account)
            _ = try await store.purchase(account: account, device: "d", productId: LifecycleTests.yearly)
        }
        _ = try await base.told(store, since: &seen)
        #expect(try await store.raisePrice(productId: LifecycleTests.yearly, to: 49_990) == 2)
        var events = try await base.told(store, since: &seen)
        #expect(events.map(\.type) == [.priceIncrease, .priceIncrease])
        #expect(events.allSatisfy { $0.subtype == .pending && $0.renewal?.priceIncreaseStatus == .customerHasNotResponded && $0.renewal?.renewalPrice == 49_990 })
        let agreeing = try #require(events.first?.transaction?.originalTransactionId)
        #expect(try await store.consentToPriceIncrease(originalTransactionId: agreeing))
        #expect(try await !store.consentToPriceIncrease(originalTransactionId: agreeing), "nothing left to consent to")
        events = try await base.told(store, since: &seen)
        #expect(events.map(\.type) == [.priceIncrease])
        #expect(events[0].subtype == .accepted)
        try await store.advanceClock(by: 3600)
        events = try await base.told(store, since: &seen)
        let renewed = try #require(events.first { $0.type == .didRenew })
        #expect(renewed.transaction?.originalTransactionId == agreeing)
        #expect(renewed.transaction?.price == 49_990)
        let expired = try #require(events.first { $0.type == .expired })
        #expect(expired.subtype == .priceIncrease)
        #expect(expired.renewal?.expirationIntent == .customerDidNotConsentToPriceIncrease)
        #expect(expired.transaction?.originalTransactionId != agreeing)
    }

    @Test("Extending a renewal date moves the expiry and tells the server with RENEWAL_EXTENDED")
    func renewalExtended() async throws {
        let store = try base.engine()
        var seen = 0
        try await store.createAccount("patient")
        guard case .purchased(_, let id, _) = try await store.purchase(account: "patient", device: "d", productId: LifecycleTests.yearly) else { Issue.record("purchase failed"); return }
        _ = try await base.told(store, since: &seen)
        let before = try #require(await store.transaction(id)?.expiresDate)
        guard case .extended(let extended) = try await store.extendRenewal(originalTransactionId: id, days: 7, requestIdentifier: "r1") else {
            Issue.record("not extended"); return
        }
        #expect(abs(extended.expiresDate!.timeIntervalSince(before) - 180) < 0.01, "a week is 3 minutes at sandbox rates")
        let events = try await base.told(store, since: &seen)
        #expect(events.map(\.type) == [.renewalExtended])
        #expect(abs(events[0].transaction!.expiresDate!.timeIntervalSince(extended.expiresDate!)) < 0.001)
        guard case .extended = try await store.extendRenewal(originalTransactionId: id, days: 7, requestIdentifier: "r1") else { Issue.record("repeat should answer again"); return }
        #expect(try await base.told(store, since: &seen).isEmpty, "a repeated request identifier changes nothing")
        guard case .extended = try await store.extendRenewal(originalTransactionId: id, days: 1, requestIdentifier: "r2") else { Issue.record("second extension refused"); return }
        guard case .limitReached = try await store.extendRenewal(originalTransactionId: id, days: 1, requestIdentifier: "r3") else { Issue.record("third extension allowed"); return }
    }

    @Test("Extending for all active subscribers: RENEWAL_EXTENDED for each, RENEWAL_EXTENSION/FAILURE for one that cannot be, then RENEWAL_EXTENSION/SUMMARY with the counts")
    func massExtension() async throws {
        let store = try base.engine()
        var seen = 0
        for customer in ["ana", "ben", "cal"] {
            try await store.createAccount(customer)
            guard case .purchased = try await store.purchase(account: customer, device: "d", productId: LifecycleTests.yearly) else { Issue.record("purchase failed"); return }
        }
        // Cal's subscription already had its two extensions this year: the mass extension cannot extend it.
        let cals = try #require(await store.recordedSeries().first { $0.account == "cal" }?.originalTransactionId)
        for request in ["c1", "c2"] { _ = try await store.extendRenewal(originalTransactionId: cals, days: 1, requestIdentifier: request) }
        _ = try await base.told(store, since: &seen)
        try await store.massExtendRenewal(productId: LifecycleTests.yearly, days: 3, storefronts: nil, requestIdentifier: "everyone")
        let told = try await base.told(store, since: &seen)
        #expect(told.filter { $0.type == .renewalExtended }.count == 2)
        let failure = told.filter { $0.type == .renewalExtension && $0.subtype == .failure }
        #expect(failure.count == 1 && failure.first?.transaction?.originalTransactionId == cals)
        #expect(told.last?.type == .renewalExtension && told.last?.subtype == .summary)
        let last = try #require(await store.notifications().last?.signedPayload)
        let summary = try #require(try await base.verifier.verifyNotification(last).payload.summary)
        #expect(summary.requestIdentifier == "everyone" && summary.productId == LifecycleTests.yearly)
        #expect(summary.succeededCount == 2 && summary.failedCount == 1)
        #expect(summary.bundleId != nil && summary.environment != nil)
    }
}
