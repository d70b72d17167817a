import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// The answer to a CONSUMPTION_REQUEST on its own: facts in, Send Consumption Information's body out, no database.
@Suite("Consumption rules: what Apple hears when a customer asks for a refund")
struct ConsumptionRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func facts(_ productId: String, _ type: ProductType, account: String? = "ada", consented: Bool = true, credited: Int64? = nil,
               balance: Int64? = nil, period: Int64? = nil, purchased: Date? = nil) throws -> ConsumptionFacts {
        var record = try PurchaseRecord(transaction(productId, id: "2000", type: type, purchased: purchased ?? now - 60,
                                                    expires: type == .autoRenewableSubscription ? now + 86_400 : nil))
        record.accountId = account
        return ConsumptionFacts(transaction: record, accountId: account, consented: consented, credited: credited, balance: balance, periodSeconds: period)
    }

    func answer(_ facts: ConsumptionFacts, _ policy: RefundPolicy) -> ConsumptionRequest? {
        try? ConsumptionRules.answer(facts, policy: policy, sampleContentProvided: true, now: now).get()
    }

    @Test("Nothing is sent for a transaction that reached nobody, or for a customer who did not consent")
    func silence() throws {
        let nobody = ConsumptionRules.answer(try facts(Demo.coins, .consumable, account: nil), policy: .preferRefund, sampleContentProvided: false, now: now)
        #expect(nobody == .failure(.init(.notDelivered)))
        let refused = ConsumptionRules.answer(try facts(Demo.coins, .consumable, consented: false), policy: .preferRefund, sampleContentProvided: false, now: now)
        #expect(refused == .failure(.init(.noConsent)))
    }

    @Test("Prorated by coins spent: none spent is GRANT_FULL, some is GRANT_PRORATED with the share, all is DECLINE",
          arguments: [(Int64(100), RefundPreference.grantFull, 0), (40, .grantProrated, 60_000), (0, .decline, 100_000), (250, .grantFull, 0)])
    func consumable(_ balance: Int64, _ preference: RefundPreference, _ consumed: Int) throws {
        let sent = try #require(answer(try facts(Demo.coins, .consumable, credited: 100, balance: balance), .prorated))
        #expect(sent.customerConsented == true && sent.sampleContentProvided == true && sent.deliveryStatus == .delivered)
        #expect(sent.refundPreference == preference)
        #expect(sent.consumptionPercentage == consumed)
    }

    @Test("A non-renewing subscription's share is the time elapsed; a non-consumable is consumed once delivered")
    func timeAndUnlocks() throws {
        let season = try facts(Demo.season, .nonRenewingSubscription, period: 30 * 86_400, purchased: now - 12 * 86_400)
        #expect(answer(season, .prorated)?.consumptionPercentage == 40_000)
        #expect(answer(season, .prorated)?.refundPreference == .grantProrated)
        let premium = try facts(Demo.premium, .nonConsumable)
        #expect(answer(premium, .prorated)?.refundPreference == .decline)
        #expect(answer(premium, .preferRefund)?.refundPreference == .grantFull)
    }

    @Test("An auto-renewable subscription never carries a percentage (Apple computes it; 4000209 otherwise)")
    func autoRenewable() throws {
        let monthly = try facts(Demo.monthly, .autoRenewableSubscription)
        for policy in RefundPolicy.allCases { #expect(answer(monthly, policy)?.consumptionPercentage == nil) }
        #expect(answer(monthly, .prorated)?.refundPreference == .grantProrated)
        #expect(answer(monthly, .preferNoRefund)?.refundPreference == .decline)
    }
}

@Suite("Consumption consent in the ledger: the customer's choice, a guardian's withdrawal, answers kept once")
struct ConsumptionConsentTests {
    func rescind(_ ledger: Ledger, appTransactionId: String, signed: Date) async throws -> Ledger.NotificationOutcome {
        var event = NotificationEvent(notificationUUID: UUID().uuidString, type: .rescindConsent, subtype: nil, signedDate: signed, signedPayload: "x")
        event.appTransactionId = appTransactionId
        return try await ledger.apply(event, now: signed)
    }

    @Test("RESCIND_CONSENT withdraws consent for every account of that app transaction, unless the customer chose after Apple signed it",
          arguments: StoreKind.allCases)
    func rescinded(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (buyer, presenter, other) = (uniqueId("buyer-"), uniqueId("presenter-"), uniqueId("other-"))
        let appTransactionId = uniqueId("app-")
        var paid = transaction(Demo.premium, type: .nonConsumable)
        paid.appTransactionId = appTransactionId
        _ = try await ledger.submit(.init(accountId: buyer, transaction: paid))
        var app = AppTransactionDecodedPayload()
        app.appTransactionId = appTransactionId
        app.bundleId = "com.example.iapkit"
        try await ledger.recordAppTransaction(app, accountId: presenter)
        let start = Date()
        for account in [buyer, presenter, other] { try await ledger.setConsumptionConsent(accountId: account, consented: true, now: start) }
        #expect(try await rescind(ledger, appTransactionId: appTransactionId, signed: start + 10) == .applied)
        #expect(try await ledger.consumptionConsent(accountId: buyer)?.consented == false)
        #expect(try await ledger.consumptionConsent(accountId: buyer)?.source == "rescind_consent")
        #expect(try await ledger.consumptionConsent(accountId: presenter)?.consented == false)
        #expect(try await ledger.consumptionConsent(accountId: other)?.consented == true, "another customer's consent stands")
        // The customer consents again; a notice Apple signed before that, delivered late, does not undo it.
        try await ledger.setConsumptionConsent(accountId: buyer, consented: true, now: start + 20)
        _ = try await rescind(ledger, appTransactionId: appTransactionId, signed: start + 15)
        #expect(try await ledger.consumptionConsent(accountId: buyer)?.consented == true)
        #expect(try await ledger.consumptionConsent(accountId: presenter)?.consented == false)
        #expect(try await ledger.consumptionConsent(accountId: uniqueId("never-")) == nil)
    }

    @Test("A consumable's facts hold its credit and the balance left; a guardian's withdrawal reaches an account linked to it later",
          arguments: StoreKind.allCases)
    func factsAndLaterLinks(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("spender-")
        let coins = transaction(Demo.coins, type: .consumable, quantity: 2)
        _ = try await ledger.submit(.init(accountId: account, transaction: coins))
        _ = try await ledger.spend(accountId: account, currency: "coins", amount: 50, idempotencyKey: "k")
        let start = Date()
        try await ledger.setConsumptionConsent(accountId: account, consented: true, now: start)
        let facts = try #require(try await ledger.consumptionFacts(transactionId: coins.transactionId!))
        #expect(facts.accountId == account && facts.consented)
        #expect(facts.credited == 200 && facts.balance == 150)
        #expect(try await ledger.consumptionFacts(transactionId: uniqueId()) == nil)
        // A guardian withdraws consent for an app transaction no account presented yet; then this account presents it.
        let appTransactionId = uniqueId("app-")
        _ = try await rescind(ledger, appTransactionId: appTransactionId, signed: start + 5)
        #expect(try await ledger.consumptionFacts(transactionId: coins.transactionId!)?.consented == true)
        var app = AppTransactionDecodedPayload()
        app.appTransactionId = appTransactionId
        app.bundleId = "com.example.iapkit"
        try await ledger.recordAppTransaction(app, accountId: account, now: start + 10)
        #expect(try await ledger.consumptionFacts(transactionId: coins.transactionId!)?.consented == false, "withdrawn, though linked after")
        try await ledger.setConsumptionConsent(accountId: account, consented: true, now: start + 20)
        #expect(try await ledger.consumptionFacts(transactionId: coins.transactionId!)?.consented == true, "the customer's later choice")
    }

    @Test("A consumption request owes an answer from the moment it is stored: one sender at a time, owed again while Apple is away, expired after 12 hours",
          arguments: StoreKind.allCases)
    func owedAnswers(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("asker-")
        let coins = transaction(Demo.coins, type: .consumable)
        _ = try await ledger.submit(.init(accountId: account, transaction: coins))
        let signed = Date()
        let uuid = UUID().uuidString
        let request = NotificationEvent(notificationUUID: uuid, type: .consumptionRequest, subtype: nil, signedDate: signed, signedPayload: "x",
                                        transaction: coins)
        #expect(try await ledger.apply(request, now: signed) == .applied)
        #expect(try await ledger.apply(request, now: signed) == .duplicate)
        let owed = try #require(try await ledger.consumptionAnswer(notificationUUID: uuid))
        #expect(owed.state == .pending && owed.transactionId == coins.transactionId)
        #expect(abs(owed.dueBy.timeIntervalSince(signed + 12 * 3600)) < 0.002)
        #expect(try await ledger.owedConsumptionAnswers(now: signed).map(\.notificationUUID).contains(uuid))

        let first = try #require(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 1))
        #expect(first.transactionId == coins.transactionId)
        #expect(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 2) == nil, "another sender holds it")
        try await ledger.settleConsumptionAnswer(notificationUUID: uuid, claim: first.claim, state: .pending, accountId: account, body: nil, now: signed + 3)
        let slow = try #require(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 4), "owed again")
        // A sender that stalled holding it: its claim lapses and another sender takes it.
        let taker = try #require(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 4 + Ledger.consumptionClaimLease + 1))
        // The stalled sender comes back: what it settles, with its lapsed claim, counts for nothing.
        try await ledger.settleConsumptionAnswer(notificationUUID: uuid, claim: slow.claim, state: .pending, accountId: account, body: nil, now: signed + 190)
        #expect(try await ledger.consumptionAnswer(notificationUUID: uuid)?.state == .sending, "a lapsed claim settles nothing")
        #expect(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 195) == nil, "the taker still holds it")
        try await ledger.settleConsumptionAnswer(notificationUUID: uuid, claim: taker.claim, state: .answered, accountId: account, body: "{}", now: signed + 200)
        try await ledger.settleConsumptionAnswer(notificationUUID: uuid, claim: taker.claim, state: .refused, accountId: account, body: "late", now: signed + 201)
        let answered = try #require(try await ledger.consumptionAnswer(notificationUUID: uuid))
        #expect(answered.state == .answered && answered.body == "{}", "only the claim's holder settles it, once")
        #expect(try await ledger.claimConsumptionAnswer(notificationUUID: uuid, now: signed + 300) == nil)
        #expect(!(try await ledger.owedConsumptionAnswers(now: signed + 300).map(\.notificationUUID).contains(uuid)))

        let late = UUID().uuidString
        _ = try await ledger.apply(NotificationEvent(notificationUUID: late, type: .consumptionRequest, subtype: nil, signedDate: signed,
                                                     signedPayload: "x", transaction: coins), now: signed)
        #expect(try await ledger.claimConsumptionAnswer(notificationUUID: late, now: signed + 13 * 3600) == nil)
        #expect(try await ledger.consumptionAnswer(notificationUUID: late)?.state == .expired)
    }
}
