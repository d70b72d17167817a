import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// Which outbox events a history writes, on both stores: each change its event, once, to the account that got it.
@Suite("Webhook events in the ledger: one per change, none without a change")
struct WebhookLedgerTests {
    func events(_ ledger: Ledger, _ account: String) async throws -> [String] {
        try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == account }.map(\.eventId).sorted()
    }

    func notify(_ ledger: Ledger, _ type: NotificationTypeV2, _ subtype: NotificationSubtype? = nil, _ payload: JWSTransactionDecodedPayload,
                signed: Date, renewal: JWSRenewalInfoDecodedPayload? = nil) async throws {
        var event = NotificationEvent(notificationUUID: UUID().uuidString.lowercased(), type: type, subtype: subtype, signedDate: signed,
                                      signedPayload: "x", transaction: payload, renewal: renewal)
        event.status = .active
        _ = try await ledger.apply(event)
    }

    /// Renewal info for `plan`'s series: auto-renew on or off, signed at `signed`.
    func renewalInfo(_ plan: JWSTransactionDecodedPayload, autoRenew: Bool, signed: Date) -> JWSRenewalInfoDecodedPayload {
        var info = JWSRenewalInfoDecodedPayload()
        info.originalTransactionId = plan.originalTransactionId
        info.autoRenewStatus = autoRenew ? .on : .off
        info.autoRenewProductId = plan.productId
        info.signedDate = signed
        return info
    }

    /// What Apple (or the reconciler, reading Apple's status API) says once `plan`'s series has expired.
    func expiredNews(_ plan: JWSTransactionDecodedPayload, _ type: NotificationTypeV2, _ subtype: NotificationSubtype?, uuid: String,
                     signed: Date) -> NotificationEvent {
        var event = NotificationEvent(notificationUUID: uuid, type: type, subtype: subtype, signedDate: signed, signedPayload: "x",
                                      transaction: plan, renewal: renewalInfo(plan, autoRenew: false, signed: signed))
        event.status = .expired
        return event
    }

    @Test("Another account uploading a refunded transaction changes nothing and tells nothing; Apple's refund tells the owner once", arguments: StoreKind.allCases)
    func refusedUploadTellsNothing(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (ada, bob) = (uniqueId("ada-"), uniqueId("bob-"))
        let bought = Date().addingTimeInterval(-600)
        let premium = transaction(Demo.premium, type: .nonConsumable, purchased: bought)
        _ = try await ledger.submit(PurchaseSubmission(accountId: ada, transaction: premium, source: .signedTransaction))
        var refunded = premium
        refunded.revocationDate = Date()
        for seconds in [10.0, 20, 30] {
            refunded.signedDate = bought.addingTimeInterval(seconds)
            let upload = refunded
            await #expect(throws: LedgerError.self) { try await ledger.submit(PurchaseSubmission(accountId: bob, transaction: upload, source: .signedTransaction)) }
        }
        let id = premium.transactionId!
        #expect(try await events(ledger, ada) == ["NON_RENEWING_PURCHASE.\(id)"], "no refund was applied, so none is told")
        refunded.signedDate = bought.addingTimeInterval(40)
        try await notify(ledger, .refund, nil, refunded, signed: bought.addingTimeInterval(40))
        try await notify(ledger, .refund, nil, refunded, signed: bought.addingTimeInterval(40))
        let told = try await events(ledger, ada)
        #expect(told.count == 2 && told.contains { $0.hasPrefix("REFUND.\(id).") }, "\(told)")
        #expect(try await events(ledger, bob).isEmpty)
    }

    @Test("With no receiver configured nothing is written to the outbox: not a grant, a claimed series, a refund nor a test event", arguments: StoreKind.allCases)
    func noReceiverNoEvents(_ kind: StoreKind) async throws {
        var ledger = try await makeLedger(kind)
        ledger.recordsWebhookEvents = false
        let dee = uniqueId("dee-")
        let start = Date().addingTimeInterval(-7_200)
        let coins = transaction(Demo.coins, type: .consumable, purchased: start)
        let premium = transaction(Demo.premium, type: .nonConsumable, purchased: start)
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(3_600))
        let second = transaction(Demo.monthly, original: first.transactionId, type: .autoRenewableSubscription, purchased: start.addingTimeInterval(3_600),
                                 expires: start.addingTimeInterval(7_200 + 3_600))
        for purchase in [coins, premium] { _ = try await ledger.submit(PurchaseSubmission(accountId: dee, transaction: purchase, source: .signedTransaction)) }
        try await notify(ledger, .subscribed, .initialBuy, first, signed: start)
        try await notify(ledger, .didRenew, nil, second, signed: start.addingTimeInterval(3_600))
        let granted = try await ledger.submit(PurchaseSubmission(accountId: dee, transaction: second, source: .signedTransaction))
        #expect(granted.entitlements.entitlements.contains { $0.productId == Demo.monthly }, "the series was claimed and grants")
        var refunded = premium
        refunded.revocationDate = Date()
        refunded.signedDate = Date()
        try await notify(ledger, .refund, nil, refunded, signed: Date())
        await #expect(throws: LedgerError.self) { try await ledger.emitTestWebhook(actor: "test") }
        let ids = [coins, premium, first, second].map { $0.transactionId! }
        #expect(try await ledger.webhookEvents(limit: 10_000).filter { event in ids.contains { event.body.contains($0) } }.isEmpty)
        #expect(try await events(ledger, dee).isEmpty)
    }

    /// A monthly's first period and its renewal, each told by a notification before anyone held the series: stored unbound.
    func seriesNobodyHeld(_ ledger: Ledger) async throws -> (first: JWSTransactionDecodedPayload, second: JWSTransactionDecodedPayload) {
        let start = Date().addingTimeInterval(-7_200)
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(3_600))
        let second = transaction(Demo.monthly, original: first.transactionId, type: .autoRenewableSubscription, purchased: start.addingTimeInterval(3_600),
                                 expires: start.addingTimeInterval(7_200 + 3_600))
        try await notify(ledger, .subscribed, .initialBuy, first, signed: start)
        try await notify(ledger, .didRenew, nil, second, signed: start.addingTimeInterval(3_600))
        return (first, second)
    }

    @Test("Periods stored before anyone held the series get their events when an account claims it", arguments: StoreKind.allCases)
    func claimedSeriesTellsEveryPeriod(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let cy = uniqueId("cy-")
        let (first, second) = try await seriesNobodyHeld(ledger)
        #expect(try await ledger.webhookEvents(limit: 10_000).filter { $0.body.contains(first.transactionId!) }.isEmpty, "nobody to tell yet")
        _ = try await ledger.submit(PurchaseSubmission(accountId: cy, transaction: second, source: .signedTransaction))
        #expect(try await events(ledger, cy) == ["INITIAL_PURCHASE.\(first.transactionId!)", "RENEWAL.\(second.transactionId!)"].sorted())
    }

    @Test("Twenty uploads at once of a renewal whose series nobody held: every one answered, the series the uploader's, each period's event once (on PostgreSQL each claim is handed back to a held transaction)", arguments: StoreKind.allCases)
    func claimedSeriesAtOnce(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let dot = uniqueId("dot-")
        let (first, second) = try await seriesNobodyHeld(ledger)
        let outcomes = try await withThrowingTaskGroup(of: SubmissionResult.Outcome.self) { group in
            for _ in 0..<20 {
                group.addTask { try await ledger.submit(PurchaseSubmission(accountId: dot, transaction: second, source: .signedTransaction)).outcome }
            }
            return try await group.reduce(into: [SubmissionResult.Outcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == 20)
        #expect(outcomes.allSatisfy { $0 == .granted || $0 == .alreadyGranted }, "\(outcomes)")
        #expect(try await ledger.transaction(first.transactionId!)?.accountId == dot)
        #expect(try await events(ledger, dot) == ["INITIAL_PURCHASE.\(first.transactionId!)", "RENEWAL.\(second.transactionId!)"].sorted())
        try await ledger.store.close()
    }

    @Test("A subscription event comes from news newer than the series': a late notification tells nothing; a family copy's revocation is an expiration", arguments: StoreKind.allCases)
    func staleAndFamily(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let di = uniqueId("di-")
        let start = Date().addingTimeInterval(-600)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(3_600))
        _ = try await ledger.submit(PurchaseSubmission(accountId: di, transaction: plan, source: .signedTransaction))
        func renewal(_ on: Bool, signed: Date) -> JWSRenewalInfoDecodedPayload { renewalInfo(plan, autoRenew: on, signed: signed) }
        try await notify(ledger, .didChangeRenewalStatus, .autoRenewDisabled, plan, signed: start.addingTimeInterval(60), renewal: renewal(false, signed: start.addingTimeInterval(60)))
        try await notify(ledger, .didChangeRenewalStatus, .autoRenewEnabled, plan, signed: start.addingTimeInterval(30), renewal: renewal(true, signed: start.addingTimeInterval(30)))
        let told = try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == di }.map(\.type)
        #expect(told.sorted() == ["CANCELLATION", "INITIAL_PURCHASE"], "the older AUTO_RENEW_ENABLED came late: \(told)")

        let eve = uniqueId("eve-")
        var copy = transaction(Demo.premium, type: .nonConsumable, purchased: start)
        copy.inAppOwnershipType = .familyShared
        _ = try await ledger.submit(PurchaseSubmission(accountId: eve, transaction: copy, source: .signedTransaction))
        copy.revocationDate = Date()
        copy.revocationType = .familyRevoke
        copy.signedDate = start.addingTimeInterval(90)
        try await notify(ledger, .revoke, nil, copy, signed: start.addingTimeInterval(90))
        let family = try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == eve }
        #expect(family.map(\.type).sorted() == ["EXPIRATION", "NON_RENEWING_PURCHASE"], "\(family.map(\.type))")
        #expect(family.allSatisfy { $0.body.contains(#""ownership":"FAMILY_SHARED""#) })
    }

    @Test("A state the reconciler learns from Apple tells the expiry once; Apple's own EXPIRED, signed before the reconciler's read, or the same state read again, tells nothing more", arguments: StoreKind.allCases)
    func reconciledStateTells(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let fay = uniqueId("fay-")
        let start = Date().addingTimeInterval(-7_200)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(3_600))
        _ = try await ledger.submit(PurchaseSubmission(accountId: fay, transaction: plan, source: .signedTransaction))
        let ended = start.addingTimeInterval(3_600)
        func news(_ type: NotificationTypeV2, _ subtype: NotificationSubtype?, uuid: String, signed: Date) -> NotificationEvent {
            expiredNews(plan, type, subtype, uuid: uuid, signed: signed)
        }
        // Apple signed EXPIRED a minute after the end; it is delayed, and the reconciler reads the state five minutes after.
        _ = try await ledger.apply(news(.reconciled, nil, uuid: "reconcile-\(uniqueId())", signed: ended.addingTimeInterval(300)))
        _ = try await ledger.apply(news(.expired, .voluntary, uuid: UUID().uuidString, signed: ended.addingTimeInterval(60)))
        _ = try await ledger.apply(news(.reconciled, nil, uuid: "reconcile-\(uniqueId())", signed: ended.addingTimeInterval(900)))
        let told = try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == fay }.map(\.type)
        #expect(told.sorted() == ["EXPIRATION", "INITIAL_PURCHASE"], "\(told)")
        #expect(try await ledger.entitlements(accountId: fay).entitlement("pro") == nil)
        // Apple signs its EXPIRED after the reconciler's read: the same expiry of the same period, one event.
        _ = try await ledger.apply(news(.expired, .voluntary, uuid: UUID().uuidString, signed: ended.addingTimeInterval(1_200)))
        #expect(try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == fay && $0.type == "EXPIRATION" }.count == 1)
    }

    @Test("Each period's expiry is told once, also when the reconciler reads the same status (EXPIRED) for a later period as for an earlier one", arguments: StoreKind.allCases)
    func reconciledSecondExpiry(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let gus = uniqueId("gus-")
        let start = Date().addingTimeInterval(-20_000)
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(3_600))
        _ = try await ledger.submit(PurchaseSubmission(accountId: gus, transaction: first, source: .signedTransaction))
        func reconciled(_ period: JWSTransactionDecodedPayload, signed: Date) -> NotificationEvent {
            expiredNews(period, .reconciled, nil, uuid: "reconcile-\(uniqueId())", signed: signed)
        }
        _ = try await ledger.apply(reconciled(first, signed: start.addingTimeInterval(3_700)))
        // The customer resubscribes; the new period comes by upload only, then ends, and the reconciler reads EXPIRED again.
        let again = transaction(Demo.monthly, original: first.originalTransactionId, type: .autoRenewableSubscription,
                                purchased: start.addingTimeInterval(10_000), expires: start.addingTimeInterval(13_600))
        _ = try await ledger.submit(PurchaseSubmission(accountId: gus, transaction: again, source: .signedTransaction))
        _ = try await ledger.apply(reconciled(again, signed: start.addingTimeInterval(13_700)))
        let expiries = try await ledger.webhookEvents(limit: 10_000).filter { $0.accountId == gus && $0.type == "EXPIRATION" }.map(\.eventId).sorted()
        #expect(expiries == ["EXPIRATION.\(first.transactionId!)", "EXPIRATION.\(again.transactionId!)"].sorted(), "\(expiries)")
    }

    /// On SQLite only: claiming takes any due event in the outbox, and PostgreSQL's is shared by every test running.
    @Test("A claim holds against every other sender until it lapses, one sending early included; then another takes it and the first settles nothing")
    func claimsHold() async throws {
        let ledger = try await makeLedger(.sqlite)
        let event = try await ledger.emitTestWebhook(actor: "test")
        let now = Date()
        let first = try #require(try await ledger.claimWebhookEvent(now: now, lease: 30))
        #expect(first.event.eventId == event.id)
        #expect(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(29), dueBy: now.addingTimeInterval(7_200), lease: 30) == nil,
                "the claim holds until it lapses, whatever is due")
        let second = try #require(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(31), lease: 30), "a lapsed claim is taken")
        try await ledger.settleWebhookEvent(event.id, claim: first.claim, delivered: true, error: nil, retryAt: nil, now: now)
        #expect(try await ledger.webhookEvents(state: .pending).map(\.eventId) == [event.id], "the lapsed holder settles nothing")
        try await ledger.settleWebhookEvent(event.id, claim: second.claim, delivered: false, error: "HTTP 503", retryAt: now.addingTimeInterval(600), now: now)
        #expect(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(61), lease: 30) == nil, "waits for its backoff")
        let early = try #require(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(61), dueBy: now.addingTimeInterval(7_200), lease: 30),
                                 "due by a later time")
        #expect(early.event.attempts == 1 && early.event.lastError == "HTTP 503")
        try await ledger.settleWebhookEvent(event.id, claim: early.claim, delivered: true, error: nil, retryAt: nil, now: now)
        #expect(try await ledger.webhookEvents(state: .delivered).map(\.eventId) == [event.id])
        // An operator's replay of a delivered event is a request to send it again, from attempt 0.
        #expect(try await ledger.replayWebhookEvent(event.id, actor: "ops", now: now))
        let again = try #require(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(120), lease: 30))
        #expect(again.event.eventId == event.id && again.event.attempts == 0)
    }

    /// On SQLite only, as above.
    @Test("Old delivered events are pruned in batches until none is left; pending and recent ones stay")
    func pruneInBatches() async throws {
        let ledger = try await makeLedger(.sqlite)
        let now = Date()
        var delivered: [String] = []
        for _ in 0..<5 {
            let event = try await ledger.emitTestWebhook(actor: "test")
            let held = try #require(try await ledger.claimWebhookEvent(now: Date(), lease: 30))
            try await ledger.settleWebhookEvent(held.event.eventId, claim: held.claim, delivered: true, error: nil, retryAt: nil, now: now)
            delivered.append(event.id)
        }
        let pending = try await ledger.emitTestWebhook(actor: "test")
        #expect(try await ledger.pruneWebhookEvents(deliveredBefore: now.addingTimeInterval(-60), batch: 2) == 0, "none is old yet")
        #expect(try await ledger.pruneWebhookEvents(deliveredBefore: Date().addingTimeInterval(60), batch: 2) == 5)
        #expect(try await ledger.webhookEvents(limit: 100).map(\.eventId) == [pending.id])
    }

    /// On SQLite only, as above.
    @Test("Claims take events in the order they fell due: new ones when written, retries when their backoff ended; newer events do not hold a retry back")
    func claimOrder() async throws {
        let ledger = try await makeLedger(.sqlite)
        var written: [WebhookEvent] = []
        for _ in 0..<3 {
            written.append(try await ledger.emitTestWebhook(actor: "test"))
            try await Task.sleep(for: .milliseconds(3))   // a millisecond of its own each
        }
        let (a, b, c) = (written[0], written[1], written[2])
        let now = Date().addingTimeInterval(1)
        let first = try #require(try await ledger.claimWebhookEvent(now: now, lease: 30))
        #expect(first.event.eventId == a.id, "the oldest first")
        try await ledger.settleWebhookEvent(a.id, claim: first.claim, delivered: false, error: "HTTP 503", retryAt: now.addingTimeInterval(100), now: now)
        let second = try #require(try await ledger.claimWebhookEvent(now: now, lease: 30))
        #expect(second.event.eventId == b.id)
        // A retry whose backoff ended before the next event was written.
        try await ledger.settleWebhookEvent(b.id, claim: second.claim, delivered: false, error: "HTTP 503", retryAt: now.addingTimeInterval(-60), now: now)
        let d = try await ledger.emitTestWebhook(actor: "test")
        var order: [String] = []
        while let next = try await ledger.claimWebhookEvent(now: now.addingTimeInterval(200), lease: 30) {
            order.append(next.event.eventId)
            try await ledger.settleWebhookEvent(next.event.eventId, claim: next.claim, delivered: true, error: nil, retryAt: nil, now: now)
        }
        #expect(order == [b.id, c.id, d.id, a.id], "by when each fell due")
    }

    @Test("A replay while a sender posts: no second sender meanwhile; the attempt under way settles nothing, delivered or failed out of attempts; the replay then sends it from attempt 0")
    func replayDuringDelivery() async throws {
        let ledger = try await makeLedger(.sqlite)
        let event = try await ledger.emitTestWebhook(actor: "test")
        let now = Date()
        for outcome in [true, false] {
            let held = try #require(try await ledger.claimWebhookEvent(now: now, dueBy: now.addingTimeInterval(7_200), lease: 30))
            #expect(try await ledger.replayWebhookEvent(event.id, actor: "ops", now: now))
            #expect(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(1), lease: 30) == nil, "still held: no second sender")
            // The sender's last attempt ends: delivered (it may have posted before the replay), or failed with no
            // attempts left by its count from before the replay.
            try await ledger.settleWebhookEvent(event.id, claim: held.claim, delivered: outcome, error: outcome ? nil : "HTTP 503", retryAt: nil, now: now)
            let stored = try #require(try await ledger.webhookEvents(limit: 10).first { $0.eventId == event.id })
            #expect(stored.state == .pending && stored.attempts == 0, "the replay stands: \(stored.state) after \(stored.attempts)")
            let resent = try #require(try await ledger.claimWebhookEvent(now: now.addingTimeInterval(31), lease: 30), "sent again once the claim lapsed")
            #expect(resent.event.attempts == 0)
            try await ledger.settleWebhookEvent(event.id, claim: resent.claim, delivered: true, error: nil, retryAt: nil, now: now)
            #expect(try await ledger.webhookEvents(state: .delivered).map(\.eventId) == [event.id])
            #expect(try await ledger.replayWebhookEvent(event.id, actor: "ops", now: now))
        }
    }
}
