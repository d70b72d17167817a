import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

/// Issue 33, "Keep the money": every transaction from a signed payload keeps Apple's price, currency, offer and
/// storefront; a receipt-only purchase keeps none (unknown, never 0).
@Suite("The money of a transaction is kept as Apple signed it")
struct TransactionMoneyTests {
    /// A signed transaction with its money.
    static func priced(_ productId: String, id: String = uniqueId(), type: ProductType, price: Int64?, currency: String? = "USD",
                       offer: (OfferType, OfferDiscountType, String)? = nil, purchased: Date = Date(), expires: Date? = nil,
                       signed: Date? = nil) -> JWSTransactionDecodedPayload {
        var payload = transaction(productId, id: id, type: type, purchased: purchased, expires: expires, signed: signed)
        payload.price = price
        payload.currency = price == nil ? nil : currency
        payload.storefront = price == nil ? nil : "USA"
        if let offer {
            payload.offerType = offer.0
            payload.offerDiscountType = offer.1
            payload.offerPeriod = offer.2
        }
        return payload
    }

    @Test("A purchase's price, currency, offer and storefront are stored and read back, through one submission and through a batch",
          arguments: StoreKind.allCases)
    func storedAndReadBack(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        // One submission: on PostgreSQL the server's path, `iapkit_apply` in autocommit.
        let yearly = Self.priced(Demo.yearly, type: .autoRenewableSubscription, price: 39_990,
                                 offer: (.promotionalOffer, .payUpFront, "P1Y"), purchased: now - 60, expires: now + 86_400 * 365)
        #expect(try await ledger.submit(.init(accountId: account, transaction: yearly)).outcome == .granted)
        let stored = try #require(try await ledger.transaction(yearly.transactionId!))
        #expect(stored.price == 39_990)
        #expect(stored.currency == "USD")
        #expect(stored.offerType == .promotionalOffer)
        #expect(stored.offerDiscountType == .payUpFront)
        #expect(stored.offerPeriod == "P1Y")
        #expect(stored.storefront == "USA")
        // A batch (an app receipt's lines): the held transaction's writes.
        let premium = Self.priced(Demo.premium, type: .nonConsumable, price: 9_990, currency: "EUR", purchased: now - 30)
        let coins = Self.priced(Demo.coins, type: .consumable, price: 990, currency: "EUR", purchased: now - 20)
        let results = try await ledger.submitAll([premium, coins].map { PurchaseSubmission(accountId: account, transaction: $0) })
        #expect(results.allSatisfy { (try? $0.get().outcome) == .granted })
        let batch = try await ledger.transactions(ids: [premium.transactionId!, coins.transactionId!])
        #expect(batch[premium.transactionId!]?.price == 9_990)
        #expect(batch[premium.transactionId!]?.currency == "EUR")
        #expect(batch[premium.transactionId!]?.offerType == nil)
        #expect(batch[coins.transactionId!]?.price == 990)
        #expect(batch[coins.transactionId!]?.storefront == "USA")
        // The account's purchases read through the other queries carry them too.
        let listed = try await ledger.transactions(limit: 10_000).filter { $0.accountId == account }
        #expect(Set(listed.map(\.price)) == [39_990, 9_990, 990])
    }

    @Test("A free trial is stored at price 0, with its offer: a real 0, not an unknown", arguments: StoreKind.allCases)
    func freeTrialIsZero(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let trial = Self.priced(Demo.monthly, type: .autoRenewableSubscription, price: 0,
                                offer: (.introductoryOffer, .freeTrial, "P1W"), purchased: now - 60, expires: now + 86_400 * 7)
        #expect(try await ledger.submit(.init(accountId: account, transaction: trial)).outcome == .granted)
        let stored = try #require(try await ledger.transaction(trial.transactionId!))
        #expect(stored.price == 0)
        #expect(stored.currency == "USD")
        #expect(stored.offerType == .introductoryOffer)
        #expect(stored.offerDiscountType == .freeTrial)
        #expect(stored.offerPeriod == "P1W")
    }

    @Test("A receipt-only purchase has no price (unknown); later signed news fills it, and news without one never erases it",
          arguments: StoreKind.allCases)
    func refreshFillsNeverErases(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("acct-")
        let now = Date()
        let id = uniqueId()
        // As a StoreKit 1 receipt's line reaches the ledger: no price, no currency, no offer.
        let receiptLine = transaction(Demo.premium, id: id, type: .nonConsumable, purchased: now - 600, signed: now - 500)
        #expect(try await ledger.submit(.init(accountId: account, transaction: receiptLine, source: .receipt)).outcome == .granted)
        let unknown = try #require(try await ledger.transaction(id))
        #expect(unknown.price == nil)
        #expect(unknown.currency == nil)
        #expect(unknown.offerDiscountType == nil)
        // Later, the same transaction signed: its money fills what was unknown.
        let signed = Self.priced(Demo.premium, id: id, type: .nonConsumable, price: 9_990, purchased: now - 600, signed: now - 400)
        #expect(try await ledger.submit(.init(accountId: account, transaction: signed)).outcome == .alreadyGranted)
        let filled = try #require(try await ledger.transaction(id))
        #expect(filled.price == 9_990)
        #expect(filled.currency == "USD")
        #expect(filled.storefront == "USA")
        #expect(filled.signedDate == Date(timeIntervalSince1970: ((now - 400).timeIntervalSince1970 * 1000).rounded() / 1000))
        // Later still, news without a price (a receipt again, in a batch this time): what is known stays.
        let again = transaction(Demo.premium, id: id, type: .nonConsumable, purchased: now - 600, signed: now - 300)
        let results = try await ledger.submitAll([PurchaseSubmission(accountId: account, transaction: again, source: .receipt),
                                                  PurchaseSubmission(accountId: account, transaction: Self.priced(Demo.coins, type: .consumable, price: 990))])
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        let kept = try #require(try await ledger.transaction(id))
        #expect(kept.price == 9_990)
        #expect(kept.currency == "USD")
        #expect(kept.storefront == "USA")
        #expect(kept.signedDate > filled.signedDate, "the later news was applied, all but the money it lacked")
        // And through the single-submission path too (on PostgreSQL, `iapkit_apply`'s refresh).
        let last = transaction(Demo.premium, id: id, type: .nonConsumable, purchased: now - 600, signed: now - 200)
        _ = try await ledger.submit(.init(accountId: account, transaction: last, source: .receipt))
        let still = try #require(try await ledger.transaction(id))
        #expect(still.price == 9_990)
        #expect(still.currency == "USD")
        #expect(still.signedDate > kept.signedDate)
    }

    @Test("A notification's transaction keeps its money, and a later one fills a stored unknown price", arguments: StoreKind.allCases)
    func notificationsKeepTheMoney(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let now = Date()
        let trial = Self.priced(Demo.monthly, type: .autoRenewableSubscription, price: 0, offer: (.introductoryOffer, .freeTrial, "P1W"),
                                purchased: now - 60, expires: now + 86_400 * 7)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .subscribed, subtype: .initialBuy,
                                                     signedDate: now - 50, signedPayload: "x", transaction: trial))
        let stored = try #require(try await ledger.transaction(trial.transactionId!))
        #expect(stored.price == 0)
        #expect(stored.offerDiscountType == .freeTrial)
        // An unknown price (a receipt's, stored unbound by an older notification here) is filled by a later notification.
        let id = uniqueId()
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .oneTimeCharge, subtype: nil, signedDate: now - 40,
                                                     signedPayload: "x", transaction: transaction(Demo.premium, id: id, type: .nonConsumable,
                                                                                                  purchased: now - 60, signed: now - 40)))
        #expect(try await ledger.transaction(id)?.price == nil)
        _ = try await ledger.apply(NotificationEvent(notificationUUID: UUID().uuidString, type: .oneTimeCharge, subtype: nil, signedDate: now - 30,
                                                     signedPayload: "x", transaction: Self.priced(Demo.premium, id: id, type: .nonConsumable,
                                                                                                  price: 9_990, purchased: now - 60, signed: now - 30)))
        #expect(try await ledger.transaction(id)?.price == 9_990)
    }

    @Test("Money fields longer than any Apple sends are dropped as unknown, not cut into another value")
    func boundedFields() throws {
        var payload = Self.priced(Demo.premium, type: .nonConsumable, price: 1)
        payload.currency = String(repeating: "U", count: 100)
        payload.storefront = ""
        let record = try PurchaseRecord(payload)
        #expect(record.price == 1)
        #expect(record.currency == nil)
        #expect(record.storefront == nil)
    }
}
