import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// Issue 32's renewal state: what the ledger holds of a series' latest renewal info reaches each auto-renewable
/// entitlement, on both stores and through every read of what an account owns (a purchase's answer, PostgreSQL's
/// interpreter, the plain read); a price increase awaiting consent is an event for the app's backend.
@Suite("Renewal info on auto-renewable entitlements, and price-increase events")
struct RenewalInfoLedgerTests {
    /// A notification about `plan`'s series with `renewal` and, when given, a status.
    func notify(_ ledger: Ledger, _ type: NotificationTypeV2, _ subtype: NotificationSubtype?, _ plan: JWSTransactionDecodedPayload,
                renewal: JWSRenewalInfoDecodedPayload?, status: SubscriptionStatus? = .active, signed: Date, uuid: String = UUID().uuidString.lowercased()) async throws {
        var event = NotificationEvent(notificationUUID: uuid, type: type, subtype: subtype, signedDate: signed, signedPayload: "x",
                                      transaction: plan, renewal: renewal)
        event.status = status
        _ = try await ledger.apply(event)
    }

    func renewalInfo(_ plan: JWSTransactionDecodedPayload, autoRenew: AutoRenewStatus, next: String? = nil, signed: Date) -> JWSRenewalInfoDecodedPayload {
        var info = JWSRenewalInfoDecodedPayload()
        info.originalTransactionId = plan.originalTransactionId
        info.productId = plan.productId
        info.autoRenewStatus = autoRenew
        info.autoRenewProductId = next ?? plan.productId
        info.signedDate = signed
        return info
    }

    @Test("An auto-renewable entitlement carries the series' latest renewal info — auto-renew, next product, billing retry, grace, expiration intent, price increase — and nothing else does", arguments: StoreKind.allCases)
    func latestRenewalInfo(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("ren-")
        let start = Date().addingTimeInterval(-600)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(86_400))
        let premium = transaction(Demo.premium, type: .nonConsumable, purchased: start)
        _ = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: premium, source: .signedTransaction))
        let first = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: plan, source: .signedTransaction))
        #expect(first.entitlements.entitlement("pro")?.renewal == nil, "no renewal info has come yet")

        // SUBSCRIBED: renewing.
        try await notify(ledger, .subscribed, .initialBuy, plan, renewal: renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(1)),
                         signed: start.addingTimeInterval(1))
        let subscribed = try #require(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal)
        #expect(subscribed.autoRenewStatus == .on && subscribed.autoRenewProductId == Demo.monthly)
        #expect(subscribed.signedDate.map(Millis.of) == Millis.of(start.addingTimeInterval(1)))

        // The customer downgrades for the next period and turns auto-renew off.
        try await notify(ledger, .didChangeRenewalStatus, .autoRenewDisabled, plan,
                         renewal: renewalInfo(plan, autoRenew: .off, next: Demo.yearly, signed: start.addingTimeInterval(60)), signed: start.addingTimeInterval(60))
        var owned = try await ledger.entitlements(accountId: account)
        let off = try #require(owned.entitlement("pro")?.renewal)
        #expect(off.autoRenewStatus == .off && off.autoRenewProductId == Demo.yearly)
        #expect(owned.entitlement("premium")?.renewal == nil, "a non-consumable has no renewal info")

        // Older renewal info arriving late changes nothing.
        try await notify(ledger, .didChangeRenewalStatus, .autoRenewEnabled, plan, renewal: renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(30)),
                         signed: start.addingTimeInterval(30))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal?.autoRenewStatus == .off)

        // A renewal that failed to bill: grace period, billing retry, the billing error as the intent.
        var failing = renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(120))
        let graceEnd = start.addingTimeInterval(86_400 * 7)
        failing.isInBillingRetryPeriod = true
        failing.gracePeriodExpiresDate = graceEnd
        failing.expirationIntent = .billingError
        try await notify(ledger, .didFailToRenew, .gracePeriod, plan, renewal: failing, status: .billingGracePeriod, signed: start.addingTimeInterval(120))
        owned = try await ledger.entitlements(accountId: account)
        let retry = try #require(owned.entitlement("pro")?.renewal)
        #expect(retry.isInBillingRetryPeriod == true && retry.expirationIntent == .billingError && retry.autoRenewStatus == .on)
        #expect(retry.gracePeriodExpiresDate.map(Millis.of) == Millis.of(graceEnd))

        // A status alone (no renewal info) keeps what the renewal info said.
        try await notify(ledger, .didFailToRenew, .gracePeriod, plan, renewal: nil, status: .billingGracePeriod, signed: start.addingTimeInterval(150))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal?.isInBillingRetryPeriod == true)

        // Billing recovered, then a price increase needs the customer's consent: Apple's renewal info leaves the intent
        // and the retry out (they no longer apply), and the ledger forgets them.
        var pending = renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(180))
        pending.priceIncreaseStatus = .customerHasNotResponded
        pending.isInBillingRetryPeriod = false
        try await notify(ledger, .priceIncrease, .pending, plan, renewal: pending, signed: start.addingTimeInterval(180))
        let asked = try #require(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal)
        #expect(asked.priceIncreaseStatus == .customerHasNotResponded)
        #expect(asked.expirationIntent == nil && asked.isInBillingRetryPeriod == false)

        // What a purchase answers (on PostgreSQL: the interpreter's own read) says the same.
        let again = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: plan, source: .signedTransaction))
        #expect(again.entitlements.entitlement("pro")?.renewal?.priceIncreaseStatus == .customerHasNotResponded)
        let renewalPeriod = transaction(Demo.monthly, original: plan.transactionId, type: .autoRenewableSubscription, purchased: start.addingTimeInterval(200),
                                        expires: start.addingTimeInterval(86_400 * 2))
        let renewed = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: renewalPeriod, source: .signedTransaction))
        #expect(renewed.outcome == .granted)
        let answered = try #require(renewed.entitlements.entitlement("pro")?.renewal, "\(renewed.entitlements)")
        #expect(answered.priceIncreaseStatus == .customerHasNotResponded && answered.autoRenewProductId == Demo.monthly)
    }

    @Test("A device's signed renewal info is applied to the uploader's own series when newer; another account's series and older info change nothing", arguments: StoreKind.allCases)
    func deviceRenewalInfo(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (owner, other) = (uniqueId("own-"), uniqueId("oth-"))
        let start = Date().addingTimeInterval(-600)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(86_400))
        _ = try await ledger.submit(PurchaseSubmission(accountId: owner, transaction: plan, source: .signedTransaction))
        var info = renewalInfo(plan, autoRenew: .off, next: Demo.yearly, signed: start.addingTimeInterval(60))
        info.environment = .sandbox
        info.expirationIntent = .customerCancelled
        #expect(try await ledger.applyDeviceRenewalInfo(info, accountId: other) == .notOwned)
        #expect(try await ledger.entitlements(accountId: owner).entitlement("pro")?.renewal == nil, "another account's upload changed nothing")
        #expect(try await ledger.applyDeviceRenewalInfo(info, accountId: owner) == .applied)
        let applied = try #require(try await ledger.entitlements(accountId: owner).entitlement("pro")?.renewal)
        #expect(applied.autoRenewStatus == .off && applied.autoRenewProductId == Demo.yearly && applied.expirationIntent == .customerCancelled)
        var older = renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(30))
        older.environment = .sandbox
        #expect(try await ledger.applyDeviceRenewalInfo(older, accountId: owner) == .older)
        #expect(try await ledger.applyDeviceRenewalInfo(info, accountId: owner) == .older, "the same info again")
        #expect(try await ledger.entitlements(accountId: owner).entitlement("pro")?.renewal?.autoRenewStatus == .off)
        var premium = renewalInfo(transaction(Demo.premium, type: .nonConsumable), autoRenew: .on, signed: Date())
        premium.environment = .sandbox
        #expect(try await ledger.applyDeviceRenewalInfo(premium, accountId: owner) == .notOwned, "no series of that id")
    }

    @Test("The contract's entitlements carry renewalInfo under Apple's names and values, and leave it out when there is none")
    func contractEncoding() throws {
        let item = Entitlements.Item(name: "pro", productId: Demo.monthly, transactionId: "1", expiresAt: Date(timeIntervalSince1970: 1_800_000_000),
                                     state: .active, environment: "Sandbox",
                                     renewalInfo: .init(autoRenewStatus: 0, autoRenewProductId: Demo.yearly, expirationIntent: 1,
                                                        isInBillingRetryPeriod: false, priceIncreaseStatus: 0))
        let json = String(decoding: try APIJSON.encoder().encode(item), as: UTF8.self)
        #expect(json.contains(#""renewalInfo":{"#), "\(json)")
        #expect(json.contains(#""autoRenewStatus":0"#) && json.contains(#""autoRenewProductId":"\#(Demo.yearly)""#), "\(json)")
        #expect(json.contains(#""expirationIntent":1"#) && json.contains(#""priceIncreaseStatus":0"#), "\(json)")
        let decoded = try APIJSON.decoder().decode(Entitlements.Item.self, from: Data(json.utf8))
        #expect(decoded == item && decoded.willAutoRenew == false && decoded.renewalInfo?.awaitsPriceIncreaseConsent == true)
        var lifetime = item
        lifetime.renewalInfo = nil
        #expect(!String(decoding: try APIJSON.encoder().encode(lifetime), as: UTF8.self).contains("renewalInfo"))
    }

    @Test("PRICE_INCREASE / PENDING tells the series' account PRICE_INCREASE_CONSENT_NEEDED, ACCEPTED tells PRICE_INCREASE_ACCEPTED, once each", arguments: StoreKind.allCases)
    func priceIncreaseEvents(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("pi-")
        let start = Date().addingTimeInterval(-600)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(86_400))
        _ = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: plan, source: .signedTransaction))
        var pending = renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(60))
        pending.priceIncreaseStatus = .customerHasNotResponded
        let asked = UUID().uuidString.lowercased()
        try await notify(ledger, .priceIncrease, .pending, plan, renewal: pending, signed: start.addingTimeInterval(60), uuid: asked)
        try await notify(ledger, .priceIncrease, .pending, plan, renewal: pending, signed: start.addingTimeInterval(60), uuid: asked)
        var accepted = renewalInfo(plan, autoRenew: .on, signed: start.addingTimeInterval(90))
        accepted.priceIncreaseStatus = .customerConsentedOrWasNotifiedWithoutClaimingConsent
        let consented = UUID().uuidString.lowercased()
        try await notify(ledger, .priceIncrease, .accepted, plan, renewal: accepted, signed: start.addingTimeInterval(90), uuid: consented)
        let told = try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == account }
        #expect(told.map(\.eventId).sorted() == ["INITIAL_PURCHASE.\(plan.transactionId!)", "PRICE_INCREASE_ACCEPTED.\(consented)",
                                                 "PRICE_INCREASE_CONSENT_NEEDED.\(asked)"].sorted(), "\(told.map(\.eventId))")
        let needed = try #require(told.first { $0.type == "PRICE_INCREASE_CONSENT_NEEDED" })
        #expect(needed.body.contains(#""subtype":"PENDING""#) && needed.body.contains(#""notificationUUID":"\#(asked)""#), "\(needed.body)")
        #expect(needed.body.contains(#""originalTransactionId":"\#(plan.originalTransactionId!)""#))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal?.priceIncreaseStatus
                == .customerConsentedOrWasNotifiedWithoutClaimingConsent)
    }
}
