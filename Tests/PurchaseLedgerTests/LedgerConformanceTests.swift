import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("Ledger conformance: the same rules on SQLite and on PostgreSQL")
struct LedgerConformanceTests {
    @Test("An order's consumable is credited once; the same submission again grants nothing", arguments: StoreKind.allCases)
    func consumableOnce(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken, quantity: 2)
        let first = try await ledger.submit(.init(accountId: account, orderId: order.orderId, transaction: paid))
        #expect(first.outcome == .granted)
        #expect(first.orderId == order.orderId)
        #expect(first.entitlements.balances["coins"] == 200)
        let again = try await ledger.submit(.init(accountId: account, orderId: order.orderId, transaction: paid))
        #expect(again.outcome == .alreadyGranted)
        #expect(again.entitlements.balances["coins"] == 200)
        #expect(try await ledger.order(order.orderId)?.state == .granted)
        #expect(try await ledger.order(order.orderId)?.transactionId == paid.transactionId)
    }

    @Test("Each product type grants what its rule says, judged by Apple's dates", arguments: StoreKind.allCases)
    func productTypes(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.premium, type: .nonConsumable, purchased: now.addingTimeInterval(-86_400 * 400))))
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(
            Demo.monthly, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-100), expires: now.addingTimeInterval(200))))
        // Two season passes stack: 30 + 30 days from the first purchase.
        let seasonStart = now.addingTimeInterval(-86_400 * 40)
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.season, type: .nonRenewingSubscription, purchased: seasonStart)))
        let result = try await ledger.submit(.init(accountId: account, transaction: transaction(
            Demo.season, type: .nonRenewingSubscription, purchased: seasonStart.addingTimeInterval(86_400))))
        let owned = result.entitlements
        #expect(owned.entitlement("premium")?.expiresAt == nil)
        #expect(abs(owned.entitlement("pro")!.expiresAt!.timeIntervalSince(now.addingTimeInterval(200))) < 0.01)
        let seasonEnd = try #require(owned.entitlement("season")?.expiresAt)
        #expect(abs(seasonEnd.timeIntervalSince(seasonStart.addingTimeInterval(86_400 * 60))) < 0.01)
        // An expired subscription grants nothing, whatever the device thinks.
        let later = try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(300))
        #expect(later.entitlement("pro") == nil)
        #expect(later.entitlement("premium") != nil)
    }

    @Test("A lost order id is found again through the transaction's appAccountToken", arguments: StoreKind.allCases)
    func orderByToken(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.premium)
        let result = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.premium, type: .nonConsumable, token: order.appAccountToken)))
        #expect(result.orderId == order.orderId)
        #expect(try await ledger.order(order.orderId)?.state == .granted)
    }

    @Test("Another account's transaction is refused and recorded; nothing is granted to it", arguments: StoreKind.allCases)
    func replayRefused(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (owner, thief) = (uniqueId("owner-"), uniqueId("thief-"))
        let paid = transaction(Demo.coins, type: .consumable)
        _ = try await ledger.submit(.init(accountId: owner, transaction: paid))
        await #expect(throws: LedgerError(.transactionBoundElsewhere, "")) {
            try await ledger.submit(.init(accountId: thief, transaction: paid))
        }
        #expect(try await ledger.entitlements(accountId: thief).balances["coins"] == nil)
        #expect(try await ledger.entitlements(accountId: owner).balances["coins"] == 100)
        #expect(try await ledger.conflicts().contains { $0.transactionId == paid.transactionId! && $0.claimedBy == thief && $0.owner == owner })
        // A renewal of the owner's series is the owner's too.
        let series = transaction(Demo.monthly, type: .autoRenewableSubscription, expires: Date().addingTimeInterval(300))
        _ = try await ledger.submit(.init(accountId: owner, transaction: series))
        let renewal = transaction(Demo.monthly, original: series.transactionId, type: .autoRenewableSubscription, expires: Date().addingTimeInterval(600))
        await #expect(throws: LedgerError(.transactionBoundElsewhere, "")) {
            try await ledger.submit(.init(accountId: thief, transaction: renewal))
        }
        #expect(try await ledger.transaction(renewal.transactionId!)?.accountId == owner, "kept for its owner before the thief's device may finish it")
        #expect(try await ledger.entitlements(accountId: thief).entitlement("pro") == nil)
        // An order belongs to its account.
        let order = try await ledger.createOrder(accountId: owner, productId: Demo.premium)
        await #expect(throws: LedgerError(.orderAccountMismatch, "")) {
            try await ledger.submit(.init(accountId: thief, orderId: order.orderId, transaction: transaction(Demo.premium, type: .nonConsumable)))
        }
        await #expect(throws: LedgerError(.orderProductMismatch, "")) {
            try await ledger.submit(.init(accountId: owner, orderId: order.orderId, transaction: transaction(Demo.coins, type: .consumable)))
        }
        await #expect(throws: LedgerError(.unknownProduct, "")) {
            try await ledger.submit(.init(accountId: owner, transaction: transaction("com.other.app.thing", type: .consumable)))
        }
    }

    @Test("200 concurrent submissions of one transaction grant exactly once", arguments: StoreKind.allCases)
    func concurrentSubmissions(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let order = try await ledger.createOrder(accountId: account, productId: Demo.coins)
        let paid = transaction(Demo.coins, type: .consumable, token: order.appAccountToken)
        let outcomes = try await withThrowingTaskGroup(of: SubmissionResult.Outcome.self) { group in
            for index in 0..<200 {
                group.addTask {
                    try await ledger.submit(.init(accountId: account, orderId: index.isMultiple(of: 2) ? order.orderId : nil, transaction: paid)).outcome
                }
            }
            return try await group.reduce(into: [SubmissionResult.Outcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .granted }.count == 1)
        #expect(outcomes.filter { $0 == .alreadyGranted }.count == 199)
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
    }

    @Test("Spending is idempotent per key, never overdraws, and refuses a reused key", arguments: StoreKind.allCases)
    func spending(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        _ = try await ledger.submit(.init(accountId: account, transaction: transaction(Demo.coins, type: .consumable)))
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 30, idempotencyKey: "k1") == 70)
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 30, idempotencyKey: "k1") == 70)
        await #expect(throws: LedgerError(.idempotencyKeyReused, "")) {
            try await ledger.spend(accountId: account, currency: "coins", amount: 31, idempotencyKey: "k1")
        }
        await #expect(throws: LedgerError(.insufficientBalance, "")) {
            try await ledger.spend(accountId: account, currency: "coins", amount: 71, idempotencyKey: "k2")
        }
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 70)
        // The refused spend left no trace: its key is still free.
        #expect(try await ledger.spend(accountId: account, currency: "coins", amount: 70, idempotencyKey: "k2") == 0)
    }

    @Test("Notifications: a duplicate UUID changes nothing; renewals join their series' account", arguments: StoreKind.allCases)
    func notificationsRenewAndDeduplicate(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-300), expires: now.addingTimeInterval(-1))
        _ = try await ledger.submit(.init(accountId: account, transaction: first))
        #expect(try await ledger.entitlements(accountId: account, now: now).entitlement("pro") == nil)
        let renewal = transaction(Demo.monthly, original: first.transactionId, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-1),
                                  expires: now.addingTimeInterval(299))
        let event = NotificationEvent(notificationUUID: UUID().uuidString, type: .didRenew, subtype: nil, signedDate: now, signedPayload: "x",
                                      transaction: renewal, status: .active)
        #expect(try await ledger.apply(event, now: now) == .applied)
        #expect(try await ledger.apply(event, now: now) == .duplicate)
        let owned = try await ledger.entitlements(accountId: account, now: now)
        #expect(owned.entitlement("pro")?.transactionId == renewal.transactionId)
        #expect(try await ledger.purchases(accountId: account).count == 2)
    }

    @Test("Refunds claw back consumable credit once, reversals restore it, in whatever order they arrive", arguments: StoreKind.allCases)
    func refundsInAnyOrder(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        func event(_ type: NotificationTypeV2, _ payload: JWSTransactionDecodedPayload, at signed: Date) -> NotificationEvent {
            NotificationEvent(notificationUUID: UUID().uuidString, type: type, subtype: nil, signedDate: signed, signedPayload: "x", transaction: payload)
        }
        // In order: refund then reversal.
        let a = uniqueId("acct-")
        let bought = transaction(Demo.coins, type: .consumable, purchased: now.addingTimeInterval(-60), signed: now.addingTimeInterval(-60))
        _ = try await ledger.submit(.init(accountId: a, transaction: bought))
        var refunded = bought
        refunded.revocationDate = now.addingTimeInterval(-30)
        refunded.revocationReason = .refundedForOtherReason
        refunded.signedDate = now.addingTimeInterval(-30)
        var reversed = bought
        reversed.signedDate = now.addingTimeInterval(-10)
        _ = try await ledger.apply(event(.refund, refunded, at: refunded.signedDate!))
        #expect(try await ledger.entitlements(accountId: a).balances["coins"] == 0)
        _ = try await ledger.apply(event(.refund, refunded, at: refunded.signedDate!))
        #expect(try await ledger.entitlements(accountId: a).balances["coins"] == 0, "a second REFUND (new UUID) claws back nothing more")
        _ = try await ledger.apply(event(.refundReversed, reversed, at: reversed.signedDate!))
        #expect(try await ledger.entitlements(accountId: a).balances["coins"] == 100)

        // Out of order: the reversal arrives first; the older refund then changes nothing.
        let b = uniqueId("acct-")
        var other = bought
        other.transactionId = uniqueId()
        other.originalTransactionId = other.transactionId
        _ = try await ledger.submit(.init(accountId: b, transaction: other))
        var otherRefunded = refunded
        otherRefunded.transactionId = other.transactionId
        otherRefunded.originalTransactionId = other.transactionId
        var otherReversed = reversed
        otherReversed.transactionId = other.transactionId
        otherReversed.originalTransactionId = other.transactionId
        _ = try await ledger.apply(event(.refundReversed, otherReversed, at: otherReversed.signedDate!))
        _ = try await ledger.apply(event(.refund, otherRefunded, at: otherRefunded.signedDate!))
        #expect(try await ledger.entitlements(accountId: b).balances["coins"] == 100)
    }

    @Test("A receipt line this server cannot take (a product it does not sell, a purchase without its dates) is refused alone: the other paid purchases are granted",
          arguments: StoreKind.allCases)
    func receiptWithAnUnknownProduct(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        var malformed = transaction(Demo.premium, type: .nonConsumable)
        malformed.purchaseDate = nil
        let lines = [transaction(Demo.coins, type: .consumable), transaction("com.example.iapkit.not.in.the.catalog", type: .nonConsumable),
                     malformed, transaction(Demo.premium, type: .nonConsumable)]
        let results = try await ledger.submitAll(lines.map { PurchaseSubmission(accountId: account, transaction: $0, source: .receipt) })
        #expect(results.count == 4)
        #expect((try? results[0].get())?.outcome == .granted)
        #expect(throws: LedgerError(.unknownProduct, "")) { try results[1].get() }
        #expect(throws: LedgerError(.invalidInput, "")) { try results[2].get() }
        #expect((try? results[3].get())?.outcome == .granted)
        let owned = try await ledger.entitlements(accountId: account)
        #expect(owned.balances["coins"] == 100)
        #expect(owned.entitlements.map(\.name) == ["premium"])
        #expect(try await ledger.transaction(lines[1].transactionId!) == nil, "nothing is kept of a product not sold here")
        // What a receipt's look-ups start from: the stored lines, read in chunks of a hundred ids.
        let asked = (0..<150).map { "absent-\($0)" } + lines.compactMap(\.transactionId)
        let stored = try await ledger.transactions(ids: asked)
        #expect(Set(stored.keys) == [lines[0].transactionId!, lines[3].transactionId!])
        #expect(stored[lines[3].transactionId!]?.accountId == account)
    }

    @Test("A transaction's appTransactionId is kept, filled in by later news when first missing, and never replaced", arguments: StoreKind.allCases)
    func appTransactionId(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        var bought = transaction(Demo.premium, type: .nonConsumable, purchased: now.addingTimeInterval(-60), signed: now.addingTimeInterval(-60))
        _ = try await ledger.submit(.init(accountId: account, transaction: bought))
        #expect(try await ledger.transaction(bought.transactionId!)?.appTransactionId == nil)
        bought.appTransactionId = "704289572311075124"
        bought.signedDate = now.addingTimeInterval(-30)
        _ = try await ledger.submit(.init(accountId: account, transaction: bought))
        #expect(try await ledger.transaction(bought.transactionId!)?.appTransactionId == "704289572311075124")
        var later = bought
        later.appTransactionId = "999"
        later.signedDate = now.addingTimeInterval(-10)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil,
                                                     signedDate: later.signedDate!, signedPayload: "x", transaction: later))
        #expect(try await ledger.transaction(bought.transactionId!)?.appTransactionId == "704289572311075124")
        var fresh = transaction(Demo.coins, type: .consumable)
        fresh.appTransactionId = "704289572311075124"
        _ = try await ledger.submit(.init(accountId: account, transaction: fresh))
        #expect(try await ledger.transaction(fresh.transactionId!)?.appTransactionId == "704289572311075124")
    }

    @Test("A prorated refund claws back its share of a consumable once, whatever uploads it later; a reversal restores it", arguments: StoreKind.allCases)
    func proratedRefund(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        let account = uniqueId("acct-")
        let bought = transaction(Demo.coins, type: .consumable, purchased: now.addingTimeInterval(-60), quantity: 3, signed: now.addingTimeInterval(-60))
        _ = try await ledger.submit(.init(accountId: account, transaction: bought))
        var refunded = bought
        (refunded.revocationDate, refunded.revocationReason, refunded.signedDate) = (now.addingTimeInterval(-30), .refundedForOtherReason, now.addingTimeInterval(-30))
        (refunded.revocationType, refunded.revocationPercentage) = (.refundProrated, 33_333)
        for _ in 0..<2 {
            _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil,
                                                         signedDate: refunded.signedDate!, signedPayload: "x", transaction: refunded))
        }
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 200)
        let stored = try #require(try await ledger.transaction(bought.transactionId!))
        #expect(stored.revocationType == .refundProrated)
        #expect(stored.revocationPercentage == 33_333)
        #expect(try await ledger.inconsistencies(limit: 10_000).filter { $0.detail.contains(account) }.isEmpty)
        // The device uploads the refunded transaction afterwards (a restore): nothing moves.
        _ = try await ledger.submit(.init(accountId: account, transaction: refunded))
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 200)
        var reversed = bought
        reversed.signedDate = now.addingTimeInterval(-10)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil,
                                                     signedDate: reversed.signedDate!, signedPayload: "x", transaction: reversed))
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 300)
        #expect(try await ledger.transaction(bought.transactionId!)?.revocationPercentage == nil)
        #expect(try await ledger.inconsistencies(limit: 10_000).filter { $0.detail.contains(account) }.isEmpty)
    }

    @Test("The refund of coins of a pack since dropped from the catalog is stored (no longer a lost race on every retry), and later news of it too", arguments: StoreKind.allCases)
    func refundOfDroppedConsumable(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        let account = uniqueId("acct-")
        let bought = transaction(Demo.coins, type: .consumable, purchased: now.addingTimeInterval(-60), signed: now.addingTimeInterval(-60))
        _ = try await ledger.submit(.init(accountId: account, transaction: bought))
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
        // The operator discontinued the pack (or a replica of an older version does not sell it yet).
        var products = ledger.catalog.products
        products[Demo.coins] = nil
        let withoutPack = Ledger(store: ledger.store, catalog: LedgerCatalog(products: products))
        var refunded = bought
        (refunded.revocationDate, refunded.revocationReason, refunded.signedDate) = (now.addingTimeInterval(-30), .refundedForOtherReason, now.addingTimeInterval(-30))
        let outcome = try await withoutPack.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil,
                                                                    signedDate: refunded.signedDate!, signedPayload: "x", transaction: refunded))
        #expect(outcome == .applied)
        #expect(try await ledger.transaction(bought.transactionId!)?.revocationDate != nil)
        var reversed = bought
        reversed.signedDate = now.addingTimeInterval(-10)
        #expect(try await withoutPack.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refundReversed, subtype: nil,
                                                              signedDate: reversed.signedDate!, signedPayload: "x", transaction: reversed)) == .applied)
        #expect(try await ledger.transaction(bought.transactionId!)?.revocationDate == nil)
        // A catalog without the pack moves no coins for it: the balance is what it was, and the ledger with the pack
        // settles it again on the next news.
        #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
    }

    @Test("A period from Apple's other environment naming a series is refused (Production news of a Sandbox series): the holder keeps access, an unbound series is not claimed; an Xcode one is a series of its own", arguments: StoreKind.allCases)
    func seriesOfOneEnvironment(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        let (holder, forger) = (uniqueId("acct-"), uniqueId("acct-"))
        let real = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 600, expires: now + 3000)
        _ = try await ledger.submit(.init(accountId: holder, transaction: real))
        // A "period" that ended a moment ago, latest of the series: it would judge the holder's access by it.
        var forged = transaction(Demo.monthly, original: real.originalTransactionId, type: .autoRenewableSubscription, purchased: now - 1,
                                 expires: now - 0.5)
        forged.environment = .production
        await #expect(throws: LedgerError(.invalidInput, "")) { try await ledger.submit(.init(accountId: forger, transaction: forged)) }
        #expect(try await ledger.entitlements(accountId: holder).entitlement("pro") != nil)
        #expect(try await ledger.transaction(forged.transactionId!) == nil)
        #expect(try await ledger.purchases(accountId: holder).count == 1)
        // A series Apple told of by notifications only, nobody's yet: a forged period does not claim it.
        let notified = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 600, expires: now + 3000)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .subscribed, subtype: nil, signedDate: now - 600,
                                                     signedPayload: "x", transaction: notified))
        var claim = transaction(Demo.monthly, original: notified.originalTransactionId, type: .autoRenewableSubscription, purchased: now - 1,
                                expires: now + 3000)
        claim.environment = .production
        await #expect(throws: LedgerError(.invalidInput, "")) { try await ledger.submit(.init(accountId: forger, transaction: claim)) }
        #expect(try await ledger.purchases(accountId: forger).isEmpty)
        #expect(try await ledger.entitlements(accountId: forger).entitlement("pro") == nil)
        // The same claim signed as Xcode's (anyone can): a series of its own, under its own key; the notified one stays nobody's.
        claim.environment = .xcode
        #expect(try await ledger.submit(.init(accountId: forger, transaction: claim)).outcome == .granted)
        #expect(try await ledger.transaction(notified.transactionId!)?.accountId == nil)
        #expect(try await ledger.transaction("Xcode:\(claim.transactionId!)")?.originalTransactionId == "Xcode:\(notified.originalTransactionId!)")
    }

    @Test("An EXPIRED of an earlier period is not carried onto the resubscription by later news that states no status", arguments: StoreKind.allCases)
    func oldStatusNotCarriedForward(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let first = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: now - 10_000, expires: now - 6_400)
        _ = try await ledger.submit(.init(accountId: account, transaction: first))
        var lapsed = JWSRenewalInfoDecodedPayload()
        lapsed.originalTransactionId = first.originalTransactionId
        lapsed.autoRenewStatus = .off
        lapsed.signedDate = now - 6_000
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .expired, subtype: .voluntary, signedDate: now - 6_000,
                                                     signedPayload: "x", transaction: first, renewal: lapsed, status: .expired))
        // Resubscribed by upload; then news with renewal info but no status.
        let again = transaction(Demo.monthly, original: first.originalTransactionId, type: .autoRenewableSubscription, purchased: now - 600,
                                expires: now + 3_000)
        _ = try await ledger.submit(.init(accountId: account, transaction: again))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro") != nil)
        var on = lapsed
        on.autoRenewStatus = .on
        on.signedDate = now - 60
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .didChangeRenewalStatus, subtype: .autoRenewEnabled,
                                                     signedDate: now - 60, signedPayload: "x", transaction: again, renewal: on))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro") != nil, "the resubscription's paid period grants")
    }

    @Test("A refunded subscription or non-consumable stops granting; a grace period keeps the subscriber served", arguments: StoreKind.allCases)
    func revocationAndGrace(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let premium = transaction(Demo.premium, type: .nonConsumable, purchased: now.addingTimeInterval(-60))
        _ = try await ledger.submit(.init(accountId: account, transaction: premium))
        var revoked = premium
        revoked.revocationDate = now
        revoked.signedDate = now
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .refund, subtype: nil, signedDate: now,
                                                      signedPayload: "x", transaction: revoked))
        #expect(try await ledger.entitlements(accountId: account).entitlement("premium") == nil)

        let sub = transaction(Demo.yearly, type: .autoRenewableSubscription, purchased: now.addingTimeInterval(-3600), expires: now.addingTimeInterval(-5))
        _ = try await ledger.submit(.init(accountId: account, transaction: sub))
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.gracePeriodExpiresDate = now.addingTimeInterval(600)
        renewal.signedDate = now
        renewal.autoRenewStatus = .on
        var failed = sub
        failed.signedDate = now
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .didFailToRenew, subtype: .gracePeriod, signedDate: now,
                                                      signedPayload: "x", transaction: failed, renewal: renewal, status: .billingGracePeriod))
        let inGrace = try #require(try await ledger.entitlements(accountId: account, now: now).entitlement("pro"))
        #expect(inGrace.state == .gracePeriod)
        #expect(try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(601)).entitlement("pro") == nil)
        // Later news of one transaction that says nothing of the series (no status, no renewal info) keeps the grace
        // period (found by the history explorer, seed 10253).
        var later = sub
        later.signedDate = now.addingTimeInterval(1)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .consumptionRequest, subtype: nil, signedDate: now.addingTimeInterval(1),
                                                      signedPayload: "x", transaction: later), now: now.addingTimeInterval(2))
        #expect(try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(2)).entitlement("pro")?.state == .gracePeriod)
        // Renewal info without a status (auto-renew turned off during the grace period), then a status without renewal
        // info: each keeps what the other left out, and the grace period stands.
        var off = renewal
        off.autoRenewStatus = .off
        off.gracePeriodExpiresDate = nil
        off.signedDate = now.addingTimeInterval(3)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .didChangeRenewalStatus, subtype: .autoRenewDisabled,
                                                      signedDate: now.addingTimeInterval(3), signedPayload: "x", transaction: later, renewal: off),
                                   now: now.addingTimeInterval(4))
        #expect(try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(4)).entitlement("pro")?.state == .gracePeriod)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .didFailToRenew, subtype: .gracePeriod,
                                                      signedDate: now.addingTimeInterval(5), signedPayload: "x", transaction: later,
                                                      status: .billingGracePeriod), now: now.addingTimeInterval(6))
        #expect(try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(6)).entitlement("pro")?.state == .gracePeriod)
        #expect(try await ledger.entitlements(accountId: account, now: now.addingTimeInterval(601)).entitlement("pro") == nil)
    }
}
