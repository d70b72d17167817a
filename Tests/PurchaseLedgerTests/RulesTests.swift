import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// The ledger's rules on their own: value types in, decisions out, no database.
@Suite("Subscription rules: a series judged as Apple judges it")
struct SubscriptionRulesTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    let month: TimeInterval = 30 * 86_400

    func period(_ productId: String, id: String, original: String = "1000", from: Date, to: Date, signed: Date? = nil,
                revoked: Date? = nil, account: String = "zoe") throws -> PurchaseRecord {
        var record = try PurchaseRecord(transaction(productId, id: id, original: original, type: .autoRenewableSubscription, purchased: from,
                                                    expires: to, signed: signed, revoked: revoked))
        record.accountId = account
        return record
    }

    func owned(_ purchases: [PurchaseRecord], status: SubscriptionRecord? = nil, at now: Date) -> [Entitlement] {
        EntitlementRules.entitlements(purchases: purchases, subscriptions: status.map { [$0.originalTransactionId: $0] } ?? [:],
                                      catalog: .demo, now: now)
    }

    @Test("An upgrade ends the earlier product at the upgrade's purchase date, though its transaction never says isUpgraded")
    func upgradeEndsEarlierProduct() throws {
        let monthly = try period(Demo.monthly, id: "1000", from: start, to: start + month)
        let upgradeAt = start + 10 * 86_400
        let yearly = try period(Demo.yearly, id: "1001", from: upgradeAt, to: upgradeAt + 365 * 86_400)
        let before = owned([monthly, yearly], at: upgradeAt - 1)
        #expect(before.first?.productId == Demo.monthly)
        let after = owned([monthly, yearly], at: upgradeAt + 60)
        #expect(after.count == 1)
        #expect(after.first?.productId == Demo.yearly)
        #expect(after.first?.transactionId == "1001")
        // After the upgrade is refunded, the monthly's nominal expiry does not bring it back.
        let refundedUpgrade = try period(Demo.yearly, id: "1001", from: upgradeAt, to: upgradeAt + 365 * 86_400, revoked: upgradeAt + 86_400)
        #expect(owned([monthly, refundedUpgrade], at: upgradeAt + 2 * 86_400).isEmpty)
    }

    @Test("EXPIRED ends access whatever an older transaction's nominal expiry says")
    func expiredStatusEndsAccess() throws {
        let current = try period(Demo.monthly, id: "1000", from: start, to: start + month)
        let expiredAt = start + 5 * 86_400
        let status = SubscriptionRecord(originalTransactionId: "1000", status: .expired, signedDate: expiredAt)
        #expect(owned([current], status: status, at: expiredAt - 1).first?.name == "pro", "before Apple said so, still entitled")
        #expect(owned([current], status: status, at: expiredAt + 1).isEmpty)
        let revoked = SubscriptionRecord(originalTransactionId: "1000", status: .revoked, signedDate: expiredAt)
        #expect(owned([current], status: revoked, at: expiredAt + 1).isEmpty)
    }

    @Test("A revoked status gives way to the period signed again, unrevoked, after it (a reversed refund whose notification never came); an expired one does not")
    func revokedStatusGivesWayToLaterSignature() throws {
        let refundedAt = start + 5 * 86_400
        let revoked = SubscriptionRecord(originalTransactionId: "1000", status: .revoked, signedDate: refundedAt)
        let before = try period(Demo.monthly, id: "1000", from: start, to: start + month, signed: start)
        #expect(owned([before], status: revoked, at: refundedAt + 60).isEmpty)
        let resigned = try period(Demo.monthly, id: "1000", from: start, to: start + month, signed: refundedAt + 3600)
        #expect(owned([resigned], status: revoked, at: refundedAt + 7200).first?.name == "pro")
        let expired = SubscriptionRecord(originalTransactionId: "1000", status: .expired, signedDate: refundedAt)
        #expect(owned([resigned], status: expired, at: refundedAt + 7200).isEmpty, "EXPIRED is the series' word, not the period's")
    }

    @Test("A status signed before the latest period began does not judge it (resubscribe after expiry)")
    func olderStatusIgnored() throws {
        let first = try period(Demo.monthly, id: "1000", from: start, to: start + month)
        let expired = SubscriptionRecord(originalTransactionId: "1000", status: .expired, signedDate: start + month + 60)
        let resubscribed = try period(Demo.monthly, id: "1002", from: start + month + 3600, to: start + 2 * month + 3600)
        let owned = owned([first, resubscribed], status: expired, at: start + month + 7200)
        #expect(owned.first?.transactionId == "1002")
    }

    @Test("A refund of a past period leaves the current period standing")
    func refundOfPastPeriod() throws {
        let past = try period(Demo.monthly, id: "1000", from: start, to: start + month, signed: start + month + 86_400, revoked: start + month + 86_400)
        let current = try period(Demo.monthly, id: "1001", from: start + month, to: start + 2 * month)
        let entitled = owned([past, current], at: start + month + 2 * 86_400)
        #expect(entitled.first?.transactionId == "1001")
        #expect(entitled.first?.expiresAt == start + 2 * month)
        // A refund of the current period ends it at the refund's date, not before.
        let refundedNow = try period(Demo.monthly, id: "1001", from: start + month, to: start + 2 * month, revoked: start + month + 3 * 86_400)
        #expect(owned([past, refundedNow], at: start + month + 2 * 86_400).first?.transactionId == "1001")
        #expect(owned([past, refundedNow], at: start + month + 4 * 86_400).isEmpty)
    }

    @Test("The billing grace period extends access to its end; billing retry does not")
    func graceAndRetry() throws {
        let current = try period(Demo.monthly, id: "1000", from: start, to: start + month)
        let grace = SubscriptionRecord(originalTransactionId: "1000", status: .billingGracePeriod, gracePeriodExpiresDate: start + month + 6 * 86_400,
                                       signedDate: start + month)
        let inGrace = owned([current], status: grace, at: start + month + 86_400)
        #expect(inGrace.first?.state == .gracePeriod)
        #expect(owned([current], status: grace, at: start + month + 7 * 86_400).isEmpty)
        let retry = SubscriptionRecord(originalTransactionId: "1000", status: .billingRetry, signedDate: start + month + 6 * 86_400)
        #expect(owned([current], status: retry, at: start + month + 86_400).isEmpty)
    }

    @Test("A non-consumable stops granting at its revocation date, not before")
    func revocationDate() throws {
        var premium = try PurchaseRecord(transaction(Demo.premium, id: "7", type: .nonConsumable, purchased: start, revoked: start + 100))
        premium.accountId = "zoe"
        #expect(owned([premium], at: start + 50).first?.name == "premium")
        #expect(owned([premium], at: start + 150).isEmpty)
    }
}

@Suite("Binding rules: which account a transaction belongs to")
struct SubmissionRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func order(_ account: String, _ productId: String = Demo.premium) -> Order {
        Order(orderId: "order-\(account)", accountId: account, productId: productId, appAccountToken: UUID(), state: .created, transactionId: nil,
              createdAt: now, expiresAt: now + 3600)
    }

    @Test("A transaction whose token names another account's order is delivered to that account, whoever uploads it")
    func deliveredToOwner() throws {
        let alice = order("alice")
        let record = try PurchaseRecord(transaction(Demo.premium, id: "42", type: .nonConsumable, token: alice.appAccountToken))
        let decision = SubmissionRules.submit(record, uploader: "bob", orderId: nil, source: .signedTransaction, facts: TransactionFacts(tokenOrder: alice),
                                                  catalog: .demo, now: now)
        #expect(decision.outcome == .deliveredToOwner("alice"))
        var bound = record
        bound.accountId = "alice"
        bound.orderId = alice.orderId
        #expect(decision.effects == [
            .requireFacts(FactsGuard(originalTransactionId: "42", transactionId: "42", seriesOwner: .some(nil), seriesEnvironment: .some(nil),
                                     entryCount: nil, storedSignedDate: nil)),
            .insertPurchase(bound, source: .signedTransaction, at: now), .fulfilOrder(orderId: alice.orderId, transactionId: "42", at: now),
            .emitEvent(try #require(decision.effects.compactMap { if case .emitEvent(let e) = $0 { e } else { nil } }.first))])
        // Its event is alice's: the owner's backend hears of it, not the uploader's.
        guard case .emitEvent(let event)? = decision.effects.last else { Issue.record("no event"); return }
        #expect(event.id == "NON_RENEWING_PURCHASE.42" && event.accountId == "alice" && event.orderId == alice.orderId)
    }

    @Test("Another account's transaction without an order of the uploader's is refused, the attempt recorded")
    func refusedElsewhere() throws {
        var stored = try PurchaseRecord(transaction(Demo.coins, id: "43", type: .consumable))
        stored.accountId = "alice"
        let decision = SubmissionRules.submit(stored, uploader: "mallory", orderId: nil, source: .signedTransaction, facts: TransactionFacts(stored: stored),
                                                  catalog: .demo, now: now)
        #expect(decision.outcome == .refused(owner: "alice"))
        #expect(decision.effects.dropFirst() == [.recordConflict(transactionId: "43", claimedBy: "mallory", owner: "alice", at: now)])
    }

    @Test("A transaction id alone binds only what is already the uploader's: nobody's transaction is refused (possession_required), the uploader's order's or series' is granted, another's is refused as another's")
    func idIsNoProofOfPossession() throws {
        let record = try PurchaseRecord(transaction(Demo.premium, id: "45", type: .nonConsumable))
        func decide(_ facts: TransactionFacts, orderId: String? = nil, source: PurchaseSource = .serverAPI) -> SubmissionDecision {
            SubmissionRules.submit(record, uploader: "bob", orderId: orderId, source: source, facts: facts, catalog: .demo, now: now)
        }
        let byIdAlone = decide(TransactionFacts())
        #expect(byIdAlone.outcome == .rejected(LedgerError(.possessionRequired, "")) && byIdAlone.effects.isEmpty)
        #expect(decide(TransactionFacts(namedOrder: order("bob")), orderId: "order-bob").outcome == .rejected(LedgerError(.possessionRequired, "")),
                "an order of the uploader's named beside the id is no proof either")
        #expect(decide(TransactionFacts(), source: .signedTransaction).outcome == .granted, "what Apple signed, from the device, is")
        #expect(decide(TransactionFacts(tokenOrder: order("bob"))).outcome == .granted, "paid through the uploader's own order")
        var owned = record
        owned.accountId = "bob"
        #expect(decide(TransactionFacts(stored: owned)).outcome == .alreadyGranted)
        owned.accountId = "alice"
        #expect(decide(TransactionFacts(stored: owned)).outcome == .refused(owner: "alice"))
    }

    @Test("A named order must be the uploader's and for the transaction's product: otherwise rejected, as a value, with nothing to apply")
    func namedOrderChecks() throws {
        let record = try PurchaseRecord(transaction(Demo.premium, id: "44", type: .nonConsumable))
        func decide(_ orderId: String, _ facts: TransactionFacts) -> SubmissionDecision {
            SubmissionRules.submit(record, uploader: "bob", orderId: orderId, source: .signedTransaction, facts: facts, catalog: .demo, now: now)
        }
        for (decision, code) in [(decide("missing", TransactionFacts()), LedgerError.Code.orderNotFound),
                                 (decide("order-alice", TransactionFacts(namedOrder: order("alice"))), .orderAccountMismatch),
                                 (decide("order-bob", TransactionFacts(namedOrder: order("bob", Demo.coins))), .orderProductMismatch)] {
            guard case .rejected(let refusal) = decision.outcome else { Issue.record("\(code.rawValue): \(decision.outcome)"); continue }
            #expect(refusal.code == code && decision.effects.isEmpty)
        }
        // Another environment's payload under a stored id is rejected the same way.
        var stored = record
        stored.environment = .production
        #expect(SubmissionRules.submit(record, uploader: "bob", orderId: nil, source: .signedTransaction, facts: TransactionFacts(stored: stored),
                                       catalog: .demo, now: now).outcome == .rejected(LedgerError(.invalidInput, "")))
    }

    @Test("A renewal follows its series' account; a stored bound transaction grants nothing more")
    func seriesAndRepeat() throws {
        let renewal = try PurchaseRecord(transaction(Demo.monthly, id: "51", original: "50", type: .autoRenewableSubscription, expires: now + 3600))
        let decision = SubmissionRules.submit(renewal, uploader: "alice", orderId: nil, source: .signedTransaction,
                                                  facts: TransactionFacts(seriesOwner: "alice"), catalog: .demo, now: now)
        #expect(decision.outcome == .granted)
        var stored = renewal
        stored.accountId = "alice"
        let again = SubmissionRules.submit(renewal, uploader: "alice", orderId: nil, source: .signedTransaction, facts: TransactionFacts(stored: stored),
                                               catalog: .demo, now: now)
        #expect(again.outcome == .alreadyGranted)
        #expect(again.effects.dropFirst() == [.refreshPurchase(renewal), .updateSeriesPeriod(
            originalTransactionId: "50", productId: Demo.monthly, purchaseDate: renewal.purchaseDate, expiresDate: renewal.expiresDate)])
        // Decided on the stored row as read: a newer write to it in between makes the store decide again. A subscription
        // moves no balance, so its movements were not read and are no precondition.
        #expect(again.effects.first == .requireFacts(FactsGuard(originalTransactionId: "50", transactionId: "51", seriesOwner: nil, entryCount: nil,
                                                                 storedSignedDate: stored.signedDate)))
    }

    @Test("Consumable credit follows refunds and reversals, each movement keyed once")
    func consumableSettlement() throws {
        var coins = try PurchaseRecord(transaction(Demo.coins, id: "60", type: .consumable, quantity: 2))
        coins.accountId = "zoe"
        let credit = ConsumableRules.settle(coins, entries: [], catalog: .demo, now: now)
        #expect(credit == [.moveBalance(BalanceMove(key: "grant:60", accountId: "zoe", currency: "coins", delta: 200, transactionId: "60", at: now))])
        let granted = [BalanceEntry(key: "grant:60", accountId: "zoe", currency: "coins", delta: 200, transactionId: "60", at: now)]
        #expect(ConsumableRules.settle(coins, entries: granted, catalog: .demo, now: now).isEmpty, "credited once")
        var refunded = coins
        refunded.revocationDate = now
        #expect(ConsumableRules.settle(refunded, entries: granted, catalog: .demo, now: now)
            == [.moveBalance(BalanceMove(key: "adjust:60:1", accountId: "zoe", currency: "coins", delta: -200, transactionId: "60", at: now))])
        #expect(ConsumableRules.settle(refunded, entries: [], catalog: .demo, now: now).isEmpty, "refunded before it was credited: never credited")
    }

    @Test("A prorated refund claws back its percentage of the credit, rounded to the nearest unit; a full refund all of it")
    func proratedCredit() throws {
        var packs = try PurchaseRecord(transaction(Demo.coins, id: "61", type: .consumable, quantity: 3))
        #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 300)
        packs.revocationDate = now
        packs.revocationType = .refundProrated
        // Apple's example: 1 of 3 packs refunded is 33.333 %; exactly one pack comes back, not 99.999 coins.
        packs.revocationPercentage = 33_333
        #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 200)
        packs.revocationPercentage = 67_932
        #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 96, "203.796 clawed back rounds to 204")
        packs.revocationPercentage = 15
        #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 300, "0.045 coins rounds to none")
        packs.revocationPercentage = 100_000
        #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 0)
        // Amounts too large to multiply by 100,000 do not overflow.
        packs.revocationPercentage = 50_000
        #expect(ConsumableRules.standingCredit(of: packs, amount: Int64.max / 4) == Int64.max / 4 * 3 - (Int64.max / 4 * 3 + 1) / 2, "half a unit clawed back rounds up")
        // Not prorated (full, a family revocation, a type this version does not know) or a percentage out of range:
        // nothing stands.
        for (type, percentage) in [(RevocationType.refundFull, 100_000), (.familyRevoke, nil), (RevocationType(rawValue: "REFUND_LATER"), 50_000),
                                   (.refundProrated, nil), (.refundProrated, 100_001), (.refundProrated, -1)] as [(RevocationType, Int?)] {
            packs.revocationType = type
            packs.revocationPercentage = percentage
            #expect(ConsumableRules.standingCredit(of: packs, amount: 100) == 0, "\(type.rawValue) \(String(describing: percentage))")
        }
    }

    @Test("Consumable credit follows a prorated refund, a later full one and a reversal, one movement each")
    func proratedSettlement() throws {
        var coins = try PurchaseRecord(transaction(Demo.coins, id: "62", type: .consumable, quantity: 2))
        coins.accountId = "zoe"
        var entries = [BalanceEntry(key: "grant:62", accountId: "zoe", currency: "coins", delta: 200, transactionId: "62", at: now)]
        var prorated = coins
        (prorated.revocationDate, prorated.revocationType, prorated.revocationPercentage) = (now, .refundProrated, 25_000)
        let claw = ConsumableRules.settle(prorated, entries: entries, catalog: .demo, now: now)
        #expect(claw == [.moveBalance(BalanceMove(key: "adjust:62:1", accountId: "zoe", currency: "coins", delta: -50, transactionId: "62", at: now))])
        entries.append(BalanceEntry(key: "adjust:62:1", accountId: "zoe", currency: "coins", delta: -50, transactionId: "62", at: now))
        #expect(ConsumableRules.settle(prorated, entries: entries, catalog: .demo, now: now).isEmpty, "the same news twice moves nothing")
        var full = prorated
        (full.revocationType, full.revocationPercentage) = (.refundFull, 100_000)
        #expect(ConsumableRules.settle(full, entries: entries, catalog: .demo, now: now)
            == [.moveBalance(BalanceMove(key: "adjust:62:2", accountId: "zoe", currency: "coins", delta: -150, transactionId: "62", at: now))])
        #expect(ConsumableRules.settle(coins, entries: entries, catalog: .demo, now: now)
            == [.moveBalance(BalanceMove(key: "adjust:62:2", accountId: "zoe", currency: "coins", delta: 50, transactionId: "62", at: now))],
                "reversed: the whole credit stands again")
        // Refunded in part before it was ever credited: the part Apple did not refund is credited.
        #expect(ConsumableRules.settle(prorated, entries: [], catalog: .demo, now: now)
            == [.moveBalance(BalanceMove(key: "grant:62", accountId: "zoe", currency: "coins", delta: 150, transactionId: "62", at: now))])
    }
}

@Suite("Entitlement rules on a server clock behind Apple's")
struct ClockLagRulesTests {
    @Test("A purchase counts from Apple's signature when that is after the server's now, by five minutes at most; a renewal Apple charged ahead waits for its period")
    func startsBySignature() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let catalog = LedgerCatalog.demo
        func owned(purchased: Date, signed: Date, type: ProductType = .nonConsumable, product: String = "com.example.iapkit.premium", expires: Date? = nil) throws -> [String] {
            var record = try PurchaseRecord(transaction(product, type: type, purchased: purchased, expires: expires, signed: signed))
            record.accountId = "zoe"
            return EntitlementRules.entitlements(purchases: [record], subscriptions: [:], catalog: catalog, now: now,
                                                 clockLagAllowance: EntitlementRules.clockLagAllowance).map(\.name)
        }
        #expect(try owned(purchased: now + 59, signed: now + 60) == ["premium"], "the server's clock a minute behind")
        #expect(try owned(purchased: now + 299, signed: now + 300) == ["premium"])
        #expect(try owned(purchased: now + 599, signed: now + 600).isEmpty, "ten minutes behind is past the allowance")
        #expect(try owned(purchased: now + 59, signed: now - 1).isEmpty, "signed before now: no sign of a slow clock")
        var exact = try PurchaseRecord(transaction("com.example.iapkit.premium", type: .nonConsumable, purchased: now + 59, signed: now + 60))
        exact.accountId = "zoe"
        #expect(EntitlementRules.entitlements(purchases: [exact], subscriptions: [:], catalog: catalog, now: now).isEmpty,
                "a look at the past (no allowance) judges exactly at now")
        // Charged a day ahead, the renewal's period begins at the current one's end: signed before it, not yet begun.
        #expect(try owned(purchased: now + 60, signed: now + 30, type: .autoRenewableSubscription, product: "com.example.iapkit.pro.monthly",
                          expires: now + 60 + 30 * 86_400).isEmpty)
    }

    @Test("A grace period Apple signed a minute ahead of the server's clock serves the subscriber now; an expiry signed ahead waits for its signature")
    func graceOnASlowClock() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var period = try PurchaseRecord(transaction("com.example.iapkit.pro.monthly", type: .autoRenewableSubscription, purchased: now - 86_400,
                                                    expires: now - 30, signed: now - 86_400))
        period.accountId = "zoe"
        func judged(_ status: SubscriptionStatus, allowance: TimeInterval = EntitlementRules.clockLagAllowance) -> Entitlement? {
            let series = SubscriptionRecord(originalTransactionId: period.originalTransactionId, status: status, gracePeriodExpiresDate: now + 3_600,
                                            signedDate: now + 60)
            return EntitlementRules.entitlements(purchases: [period], subscriptions: [period.originalTransactionId: series], catalog: .demo, now: now,
                                                 clockLagAllowance: allowance).first
        }
        #expect(judged(.billingGracePeriod)?.state == .gracePeriod, "the period ended 30 s ago by this clock; Apple's grace is already signed")
        #expect(judged(.billingGracePeriod, allowance: 0) == nil, "a look at the past judges exactly at now")
        let renewed = try PurchaseRecord(transaction("com.example.iapkit.pro.monthly", type: .autoRenewableSubscription, purchased: now - 86_400,
                                                     expires: now + 600, signed: now - 86_400))
        var current = renewed
        current.accountId = "zoe"
        period = current
        #expect(judged(.expired)?.state == .active, "an expiry signed ahead of this clock does not end access early")
    }
}

@Suite("Spend and settle rules: a balance spent once per key, a lost order settled and audited")
struct SpendAndSettleRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func request(_ amount: Int64 = 40, key: String = "k1", currency: String = "coins") -> SpendRules.Request {
        SpendRules.Request(accountId: "zoe", currency: currency, amount: amount, idempotencyKey: key)
    }

    @Test("A spend is a debit the balance must cover; a repeat takes nothing more; the key for another spend, or a short balance, is refused as a value")
    func spend() throws {
        let first = request()
        guard case .spend(let effects) = SpendRules.decide(first, earlier: nil, balance: 100, now: now) else { Issue.record("not spent"); return }
        #expect(effects == [.moveBalance(BalanceMove(key: "spend:3:zoe:k1", accountId: "zoe", currency: "coins", delta: -40, transactionId: nil,
                                                     at: now, requiresCover: true))])
        let stored = BalanceEntry(key: SpendRules.key(first), accountId: "zoe", currency: "coins", delta: -40, transactionId: nil, at: now)
        guard case .repeated = SpendRules.decide(first, earlier: stored, balance: 60, now: now) else { Issue.record("not a repeat"); return }
        // The repeat answers even when the balance no longer covers it: it spends nothing.
        guard case .repeated = SpendRules.decide(first, earlier: stored, balance: 0, now: now) else { Issue.record("not a repeat"); return }
        for other in [request(41), request(currency: "gems")] {
            guard case .refused(let refusal) = SpendRules.decide(other, earlier: stored, balance: 100, now: now) else { Issue.record("taken"); continue }
            #expect(refusal.code == .idempotencyKeyReused)
        }
        guard case .refused(let short) = SpendRules.decide(request(101, key: "k2"), earlier: nil, balance: 100, now: now) else {
            Issue.record("overdrawn"); return
        }
        #expect(short.code == .insufficientBalance)
        #expect(SpendRules.check(request(0))?.code == .invalidInput && SpendRules.check(request(SpendRules.largestSpend + 1))?.code == .invalidInput)
        #expect(SpendRules.check(request(key: "")) != nil && SpendRules.check(request(key: String(repeating: "k", count: 201))) != nil)
        #expect(SpendRules.check(request(currency: "")) != nil && SpendRules.check(request()) == nil)
        // No account and key spell another's.
        #expect(SpendRules.key(SpendRules.Request(accountId: "a", currency: "c", amount: 1, idempotencyKey: "b:c"))
                != SpendRules.key(SpendRules.Request(accountId: "a:b", currency: "c", amount: 1, idempotencyKey: "c")))
    }

    func order(_ state: Order.State = .created) -> Order {
        Order(orderId: "order-zoe", accountId: "zoe", productId: Demo.premium, appAccountToken: UUID(), state: state, transactionId: nil,
              createdAt: now - 3600, expiresAt: now + 3600)
    }

    @Test("Settled with a transaction: granted to the order's account with a transfer event and an audit entry; already granted, no transfer; another's, refused")
    func settleWithTransaction() throws {
        let record = try PurchaseRecord(transaction(Demo.premium, id: "70", type: .nonConsumable))
        let open = order()
        let decision = SettleRules.settle(open, with: record, note: "paid, app crashed", actor: "ops", facts: TransactionFacts(namedOrder: open),
                                              catalog: .demo, now: now)
        #expect(decision.outcome == .granted)
        let events = decision.effects.compactMap { if case .emitEvent(let event) = $0 { event } else { nil } }
        #expect(events.map(\.type) == [.nonRenewingPurchase, .transfer])
        #expect(events.last?.id == "TRANSFER.70.order-zoe" && events.last?.accountId == "zoe" && events.last?.occurredAt == now)
        #expect(decision.effects.last == .audit(actor: "ops", action: .settleWithTransaction, subject: "order-zoe",
                                                detail: "transaction 70: granted; paid, app crashed", at: now))
        var stored = record
        stored.accountId = "zoe"
        let again = SettleRules.settle(open, with: record, note: "again", actor: "ops", facts: TransactionFacts(namedOrder: open, stored: stored),
                                           catalog: .demo, now: now)
        #expect(again.outcome == .alreadyGranted)
        #expect(!again.effects.contains { if case .emitEvent(let event) = $0 { event.type == .transfer } else { false } })
        stored.accountId = "mallory"
        let elsewhere = SettleRules.settle(open, with: record, note: "", actor: "ops", facts: TransactionFacts(namedOrder: open, stored: stored),
                                           catalog: .demo, now: now)
        #expect(elsewhere.outcome == .rejected(LedgerError(.transactionBoundElsewhere, "")) && elsewhere.effects.isEmpty,
                "no conflict recorded, no audit: an operator's mistake is answered, not written")
    }

    @Test("Settled without a transaction: an open order is closed and audited; one granted or settled before is left as it is, audited as such")
    func settleWithoutTransaction() {
        #expect(SettleRules.settle(order(), note: "refunded by support", actor: "ops", now: now) == [
            .settleOrder(orderId: "order-zoe", note: "refunded by support", at: now),
            .audit(actor: "ops", action: .settle, subject: "order-zoe", detail: "refunded by support", at: now)])
        for state in [Order.State.granted, .settled] {
            #expect(SettleRules.settle(order(state), note: "late", actor: "ops", now: now) == [
                .audit(actor: "ops", action: .settleNotOpen, subject: "order-zoe",
                       detail: "the order was \(state.rawValue) already; nothing changed: late", at: now)])
        }
    }
}

@Suite("Notification rules: a series' news judged against what the ledger holds of it")
struct NotificationRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func event(_ type: NotificationTypeV2, _ subtype: NotificationSubtype? = nil, signed: Date, status: SubscriptionStatus? = nil,
               renewal: Bool = false) -> NotificationEvent {
        var info: JWSRenewalInfoDecodedPayload?
        if renewal {
            var payload = JWSRenewalInfoDecodedPayload()
            payload.autoRenewStatus = .off
            payload.signedDate = signed
            info = payload
        }
        return NotificationEvent(notificationUUID: "n-\(type.rawValue)", type: type, subtype: subtype, signedDate: signed, signedPayload: "x",
                                 renewal: info, status: status)
    }

    func period(_ signed: Date) throws -> PurchaseRecord {
        try PurchaseRecord(transaction(Demo.monthly, id: "80", type: .autoRenewableSubscription, purchased: now - 86_400, expires: now + 86_400,
                                       signed: signed))
    }

    @Test("Auto-renew turned off, newer than the series: the account hears it and the status is kept; older news makes no event; nobody's series, no event")
    func cancellationNews() throws {
        let record = try period(now - 86_400)
        let off = event(.didChangeRenewalStatus, .autoRenewDisabled, signed: now, status: .active, renewal: true)
        let told = try #require(NotificationRules.candidateEvent(off, record: record, owner: "zoe", now: now))
        #expect(told.type == .cancellation && told.accountId == "zoe")
        let stored = SubscriptionRecord(originalTransactionId: "80", status: .active, signedDate: now - 3_600, periodPurchaseDate: now - 86_400)
        let news = NotificationRules.seriesNews(off, record: record, told: told, series: stored, previousSeriesKnown: false)
        #expect(news.first == .emitEvent(told))
        guard case .updateSeriesStatus(let status)? = news.last else { Issue.record("\(news)"); return }
        #expect(status.autoRenew == false && status.signedDate == now && news.count == 2)
        // The ledger holds something newer of the series: history, no event; the status effect still goes (the store
        // keeps the newer one by its date).
        let newer = SubscriptionRecord(originalTransactionId: "80", status: .active, signedDate: now + 60, periodPurchaseDate: now - 86_400)
        #expect(NotificationRules.seriesNews(off, record: record, told: told, series: newer, previousSeriesKnown: false).count == 1)
        #expect(NotificationRules.candidateEvent(off, record: record, owner: nil, now: now) == nil)
    }

    @Test("A reconciled status is news only when it changed or the stored one is about an earlier period; news without status or renewal info changes no status")
    func reconciledAndSilentNews() throws {
        let record = try period(now - 86_400)
        let expired = event(.reconciled, signed: now, status: .expired)
        let told = try #require(NotificationRules.candidateEvent(expired, record: record, owner: "zoe", now: now))
        let same = SubscriptionRecord(originalTransactionId: "80", status: .expired, signedDate: now - 60, periodPurchaseDate: now - 86_400)
        #expect(!NotificationRules.seriesNews(expired, record: record, told: told, series: same, previousSeriesKnown: false).contains(.emitEvent(told)))
        let aboutEarlier = SubscriptionRecord(originalTransactionId: "80", status: .expired, signedDate: now - 2 * 86_400, periodPurchaseDate: now - 86_400)
        #expect(NotificationRules.seriesNews(expired, record: record, told: told, series: aboutEarlier, previousSeriesKnown: false).contains(.emitEvent(told)))
        let changed = SubscriptionRecord(originalTransactionId: "80", status: .active, signedDate: now - 60, periodPurchaseDate: now - 86_400)
        #expect(NotificationRules.seriesNews(expired, record: record, told: told, series: changed, previousSeriesKnown: false).contains(.emitEvent(told)))
        // A refund's news carries the transaction alone: nothing about the series' status.
        #expect(NotificationRules.seriesNews(event(.refund, signed: now), record: record, told: nil, series: nil, previousSeriesKnown: false).isEmpty)
    }

    @Test("A migrated subscription's first period ends the series it continues, dated at the migration — only a series the ledger holds")
    func migratedSeries() throws {
        var payload = transaction(Demo.monthly, id: "90", type: .autoRenewableSubscription, purchased: now, expires: now + 30 * 86_400)
        payload.previousOriginalTransactionId = "70"
        let record = try PurchaseRecord(payload)
        let previous = try #require(SubmissionRules.migratedFrom(record))
        let news = event(.subscribed, .initialBuy, signed: now)
        #expect(NotificationRules.seriesNews(news, record: record, told: nil, series: nil, previousSeriesKnown: true) == [
            .updateSeriesStatus(SubscriptionRecord(originalTransactionId: previous, status: .expired, autoRenew: false, signedDate: now))])
        #expect(NotificationRules.seriesNews(news, record: record, told: nil, series: nil, previousSeriesKnown: false).isEmpty)
    }
}
