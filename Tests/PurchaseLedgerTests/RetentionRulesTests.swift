import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("Retention rules: which message a customer who may cancel is offered")
struct RetentionRulesTests {
    static let catalog = LedgerCatalog(products: ["month": .autoRenewable("pro"), "year": .autoRenewable("pro"), "basic": .autoRenewable("basic"),
                                                  "coins": .consumable(currency: "c", amount: 1)])
    static let offers = ["stay": PromotionalOfferRule(productIds: ["month"], eligibility: .subscribers),
                         "upgrade": PromotionalOfferRule(productIds: ["year"], eligibility: .subscribers),
                         "comeback": PromotionalOfferRule(productIds: ["month"], eligibility: .lapsed),
                         "elsewhere": PromotionalOfferRule(productIds: ["basic", "year"], eligibility: .anyone)]
    let a = UUID(), b = UUID(), c = UUID()

    func purchase(_ productId: String) throws -> PurchaseRecord {
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = UUID().uuidString
        payload.originalTransactionId = payload.transactionId
        payload.productId = productId
        payload.type = .autoRenewableSubscription
        payload.purchaseDate = Date()
        payload.expiresDate = Date().addingTimeInterval(3600)
        return try PurchaseRecord(payload)
    }

    var subscriber: AccountEntitlements {
        AccountEntitlements(accountId: "x", entitlements: [Entitlement(name: "pro", productId: "month", transactionId: "1", expiresAt: Date().addingTimeInterval(3600), state: .active, environment: .sandbox)],
                            balances: [:])
    }
    var nobody: AccountEntitlements { AccountEntitlements(accountId: "", entitlements: [], balances: [:]) }

    func choose(_ rules: [RetentionMessageRule], product: String = "month", locale: String = "en-US", owned: AccountEntitlements? = nil,
                purchases: [PurchaseRecord]? = nil) throws -> RetentionChoice? {
        RetentionRules.choose(productId: product, locale: locale, rules: rules, offers: Self.offers, catalog: Self.catalog,
                              purchases: try purchases ?? [purchase("month")], owned: owned ?? subscriber)
    }

    @Test("The first rule that fits the product and locale wins; empty lists fit any; none fitting leaves Apple's default")
    func order() throws {
        let rules = [RetentionMessageRule(messageIdentifier: a, productIds: ["year"]), RetentionMessageRule(messageIdentifier: b, locales: ["de-DE"]),
                     RetentionMessageRule(messageIdentifier: c, productIds: [], locales: [])]
        #expect(try choose(rules) == .message(c))
        #expect(try choose(rules, locale: "de-DE") == .message(b))
        #expect(try choose(rules, product: "year", locale: "de-DE") == .message(a))
        #expect(try choose(Array(rules.prefix(2))) == nil)
    }

    @Test("An offer goes only to whom its rule allows, signed for the current plan when set up for it, else for a plan of its group")
    func offers() throws {
        let stay = RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "stay")
        let upgrade = RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "upgrade")
        let comeback = RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "comeback")
        let fallback = RetentionMessageRule(messageIdentifier: c)
        #expect(try choose([stay, fallback]) == .promotionalOffer(a, productId: "month", offerIdentifier: "stay"))
        #expect(try choose([upgrade, fallback]) == .promotionalOffer(a, productId: "year", offerIdentifier: "upgrade"))
        // A customer the ledger does not know still holds the plan Apple asks about: Apple asks only for an active one.
        #expect(try choose([stay, fallback], owned: nobody, purchases: []) == .promotionalOffer(a, productId: "month", offerIdentifier: "stay"))
        // A current subscriber is not lapsed — and Apple asks only about an active subscription, so the request itself
        // says so even when a late renewal notification left the ledger believing the customer lapsed.
        #expect(try choose([comeback, fallback]) == .message(c))
        #expect(try choose([comeback, fallback], owned: nobody) == .message(c))
        // An offer is signed only for a plan of the customer's group: the first such of the offer's products.
        let elsewhere = RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "elsewhere")
        #expect(try choose([elsewhere, fallback]) == .promotionalOffer(a, productId: "year", offerIdentifier: "elsewhere"))
        #expect(try choose([RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "upgrade"), fallback], product: "basic") == .message(c))
        // An offer the server does not sign is skipped, not answered unsigned.
        #expect(try choose([RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "nope"), fallback]) == .message(c))
    }

    @Test("Another plan is suggested only when it is another plan")
    func alternate() throws {
        let rule = RetentionMessageRule(messageIdentifier: b, alternateProductId: "year", billingPlanType: .monthly)
        #expect(try choose([rule]) == .alternateProduct(b, productId: "year", billingPlanType: .monthly))
        #expect(try choose([rule], product: "year") == nil)
        #expect(try choose([rule], product: "basic") == nil, "another group's plan is not suggested")
    }

    @Test("A rule that cannot work is named at start-up")
    func problems() {
        func problem(_ rule: RetentionMessageRule) -> String? { rule.problem(catalog: Self.catalog, offers: Self.offers) }
        #expect(problem(RetentionMessageRule(messageIdentifier: a, productIds: ["coins"]))?.contains("not an auto-renewable") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, alternateProductId: "nope"))?.contains("alternateProductId") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, alternateProductId: "year", promotionalOfferIdentifier: "stay"))?.contains("not both") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, promotionalOfferIdentifier: "nope"))?.contains("promotionalOffers") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, billingPlanType: .monthly))?.contains("billingPlanType") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, productIds: ["basic"], alternateProductId: "year"))?.contains("same group") == true)
        #expect(problem(RetentionMessageRule(messageIdentifier: a, productIds: ["month"], locales: ["en-US"], promotionalOfferIdentifier: "stay")) == nil)
    }
}
