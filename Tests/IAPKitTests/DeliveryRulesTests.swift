import Foundation
@testable import IAPKit
import Testing

/// What follows from each answer to an upload, decided without a server: the promise is that a payment leaves the
/// journal and is finished only once it reached its owner or was refused for good.
@Suite("DeliveryRules: each answer's consequence, without a server")
struct DeliveryRulesTests {
    static let entry = JournalEntry(kind: .paid, orderId: "o1", productId: "p.coins", appAccountToken: UUID(), transactionId: "t1",
                                    signedTransaction: "jws", accountId: "ann")
    static let owned = Entitlements(accountId: "ann")

    @Test("Granted and delivered to the owner: the entry goes, the transaction is finished, the event names the product")
    func settled() {
        let granted = DeliveryRules.decide(Self.entry, .success(.granted(Self.owned)))
        #expect(granted.journal == .remove && granted.finish)
        #expect(granted.event == .granted(productId: "p.coins", transactionId: "t1"))
        #expect(granted.publish == Self.owned)
        let delivered = DeliveryRules.decide(Self.entry, .success(.deliveredToOwner(Self.owned)))
        #expect(delivered.journal == .remove && delivered.finish && delivered.result == .deliveredToOwner)
    }

    @Test("Refused as final: the entry goes and the transaction is finished; refused for the operator or to retry: kept, unfinished")
    func refusals() {
        let final = DeliveryRules.decide(Self.entry, .success(.rejected(code: "transaction_revoked", message: "refunded", refusal: .final)))
        #expect(final.journal == .remove && final.finish)
        #expect(final.event == .rejected(productId: "p.coins", transactionId: "t1", reason: "transaction_revoked: refunded"))
        let fixable = DeliveryRules.decide(Self.entry, .success(.rejected(code: "apple_unauthorized", message: "key", refusal: .operator)))
        #expect(!fixable.finish && fixable.result == .delayed("apple_unauthorized: key"))
        #expect(fixable.event == .deliveryDelayed(productId: "p.coins", transactionId: "t1", reason: "apple_unauthorized: key"))
        let later = DeliveryRules.decide(Self.entry, .success(.rejected(code: "storage", message: "busy", refusal: .retry)))
        #expect(!later.finish && later.journal == .reschedule(reason: "storage: busy"))
    }

    @Test("No answer, held for Apple, another account's token: kept and retried, never finished")
    func kept() {
        for answer: Result<PurchaseServerClient.Submission, PurchaseFailure> in [
            .failure(PurchaseFailure(.networkUnreachable, "offline")), .success(.held),
            .success(.rejected(code: .accountMismatch, message: "", refusal: .final)),
        ] {
            let decision = DeliveryRules.decide(Self.entry, answer)
            #expect(!decision.finish && decision.journal != .remove, "\(answer)")
        }
    }

    @Test("An order refusal with an order id: uploaded again without it; without one, judged by its class")
    func orderRefusal() {
        #expect(DeliveryRules.decide(Self.entry, .success(.rejected(code: .orderNotFound, message: "", refusal: .final))).journal == .retryWithoutOrder)
        var withoutOrder = Self.entry
        withoutOrder.orderId = nil
        #expect(DeliveryRules.decide(withoutOrder, .success(.rejected(code: .orderNotFound, message: "", refusal: .final))).journal == .remove)
    }

    @Test("The queue sleeps until the next due time, at least 50 ms, at most ten minutes")
    func queueSleep() {
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(DeliveryRules.sleep(dueTimes: [now.addingTimeInterval(2), now.addingTimeInterval(9)], now: now) == 2)
        #expect(DeliveryRules.sleep(dueTimes: [], now: now) == 600)
        #expect(DeliveryRules.sleep(dueTimes: [now.addingTimeInterval(-1)], now: now) == 0.05, "what is due is looked at again at once")
    }

    @Test("Only the account that paid uploads its payment; backoff follows the delays and the later of two due times")
    func ownerAndBackoff() {
        #expect(DeliveryRules.waiting(Self.entry, signedIn: "ann") == nil)
        #expect(DeliveryRules.waiting(Self.entry, signedIn: "bea") != nil)
        #expect(DeliveryRules.waiting(Self.entry, signedIn: nil) != nil)
        var unnamed = Self.entry
        unnamed.accountId = nil
        #expect(DeliveryRules.waiting(unnamed, signedIn: "bea") == nil, "a payment nothing names the payer of is the signed-in account's to upload")
        #expect(DeliveryRules.waiting(unnamed, signedIn: nil) == "nobody is signed in")
        let now = Date(timeIntervalSince1970: 1_000)
        let delays: [Duration] = [.seconds(2), .seconds(10)]
        #expect(DeliveryRules.nextAttempt(after: 1, delays: delays, now: now) == now.addingTimeInterval(2))
        #expect(DeliveryRules.nextAttempt(after: 7, delays: delays, now: now) == now.addingTimeInterval(10))
        var entry = Self.entry
        entry.nextAttemptAt = now.addingTimeInterval(5)
        #expect(!DeliveryRules.isDue(entry, memory: now.addingTimeInterval(-5), at: now))
        #expect(DeliveryRules.isDue(entry, memory: nil, at: now.addingTimeInterval(5)))
    }
}
