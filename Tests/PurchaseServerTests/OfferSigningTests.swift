import AppStoreFormats
import Foundation
import IAPTestSupport
import PurchaseAPI
import IAPKit
import PurchaseLedger
import PurchaseServer
import Testing

/// The server signs offers for StoreKit with the app's In-App Purchase key; the SDK redeems them; the simulator checks
/// them as the App Store does. Over real HTTP.
@Suite("Offer signatures made by the server: signed by its rules, redeemed by the SDK, taken by the App Store")
struct OfferSigningTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    func options() -> System.Options {
        var options = System.Options()
        options.promotionalOffers = [
            "pro.yearly.upgrade": PromotionalOfferRule(productIds: [Self.yearly], eligibility: .subscribers),
            "pro.monthly.comeback": PromotionalOfferRule(productIds: [Self.monthly], eligibility: .lapsed),
        ]
        return options
    }

    /// The latest transaction Apple minted for `store` and `productId`.
    func latest(_ system: System, _ store: String, _ productId: String) async -> JWSTransactionDecodedPayload? {
        await system.engine.recordedTransactions().last { $0.account == store && $0.payload.productId == productId }?.payload
    }

    func sign(_ system: System, _ account: String, _ body: [String: String]) async throws -> (Int, Data) {
        let (status, reply) = try await system.call(.post, "/v1/offers/sign", as: account, body)
        return (Int(status.code), reply)
    }

    @Test("A subscriber gets the retention offer its rules allow, signed, and the SDK redeems it; others are refused with a reason")
    func promotional() async throws {
        try await System.run(options()) { system in
            let (account, store) = try await system.customer("retained")
            let app = try App.launch(system, account: account, storeAccount: store)
            // Not yet a subscriber: neither the retention nor the win-back offer.
            #expect(try await sign(system, account, ["kind": "promotionalOffer", "productId": Self.yearly, "offerIdentifier": "pro.yearly.upgrade"]).0 == 403)
            guard case .granted = await app.client.purchase(Self.monthly) else { Issue.record("the subscription was not bought"); return }
            #expect(try await sign(system, account, ["kind": "promotionalOffer", "productId": Self.monthly, "offerIdentifier": "pro.monthly.comeback"]).0 == 403,
                    "the win-back offer is for lapsed subscribers")
            let (unknownStatus, unknown) = try await sign(system, account, ["kind": "promotionalOffer", "productId": Self.yearly, "offerIdentifier": "nope"])
            #expect(try unknownStatus == 404 && (errorCode(unknown)) == "unknown_offer")
            #expect(try await sign(system, account, ["kind": "promotionalOffer", "productId": "com.example.iapkit.premium",
                                                     "offerIdentifier": "pro.yearly.upgrade"]).0 == 404)
            let (status, signed) = try await sign(system, account, ["kind": "promotionalOffer", "productId": Self.yearly, "offerIdentifier": "pro.yearly.upgrade"])
            #expect(try status == 200 && (decode(OfferSignReply.self, signed).signature)?.split(separator: ".").count == 3)

            // The SDK asks for its own signature and redeems it: the upgrade is priced at the offer.
            guard case .granted = await app.client.purchase(Self.yearly, promotionalOffer: "pro.yearly.upgrade") else {
                Issue.record("the offer was not redeemed"); return
            }
            let minted = try #require(await latest(system, store, Self.yearly))
            #expect(minted.offerType == .promotionalOffer && minted.offerIdentifier == "pro.yearly.upgrade")
            // Asked for one the rules refuse, the SDK fails before ordering or paying.
            let before = await system.engine.recordedTransactions().count
            guard case .failed(let failure) = await app.client.purchase(Self.monthly, promotionalOffer: "pro.monthly.comeback") else {
                Issue.record("a refused offer was bought"); return
            }
            #expect(failure.code == .offerRefused)
            #expect(await system.engine.recordedTransactions().count == before)
            await app.client.stop()

            // The original signature names no customer, only the payment's token: it needs this account's order.
            let body: [String: String] = ["kind": "promotionalOffer", "productId": Self.yearly, "offerIdentifier": "pro.yearly.upgrade", "format": "legacy"]
            #expect(try await sign(system, account, body).0 == 409, "no order named")
            let (stranger, _) = try await system.customer("stranger")
            let (_, strangerOrder) = try await system.call(.post, "/v1/orders", as: stranger, OrderRequest(productId: Self.yearly))
            var othersOrder = body
            othersOrder["appAccountToken"] = try decode(OrderReply.self, strangerOrder).appAccountToken.lowercasedString
            #expect(try await sign(system, account, othersOrder).0 == 409, "another account's order")
        }
    }

    @Test("A signature names the buyer: a customer the server knows no transaction of gets none (409), even for an offer open to anyone")
    func namesTheBuyer() async throws {
        var options = System.Options()
        options.promotionalOffers = ["pro.monthly.comeback": PromotionalOfferRule(productIds: [Self.monthly], eligibility: .anyone)]
        try await System.run(options) { system in
            let (newcomer, _) = try await system.customer("unknown")
            let (status, reply) = try await sign(system, newcomer, ["kind": "promotionalOffer", "productId": Self.monthly, "offerIdentifier": "pro.monthly.comeback"])
            #expect(try status == 409 && (errorCode(reply)) == "no_customer_transaction")
        }
    }

    @Test("Introductory-offer eligibility across Apple IDs: a customer who subscribed on one Apple ID gets no free week on another")
    func introductoryAcrossAppleIds() async throws {
        try await System.run(options()) { system in
            let (account, firstStore) = try await system.customer("twoids")
            let first = try App.launch(system, account: account, storeAccount: firstStore)
            guard case .granted = await first.client.purchase(Self.monthly) else { Issue.record("not bought"); return }
            #expect(await latest(system, firstStore, Self.monthly)?.offerType == .introductoryOffer, "the first Apple ID's free week")
            await first.client.stop()

            // The same account on a second Apple ID: its app transaction reaches the server, as the SDK sends it.
            let secondStore = "store-second-\(UUID().uuidString.prefix(6))"
            _ = try await system.device(.post, "/sim/accounts", ["id": secondStore])
            let appTransactionId = try #require(await system.engine.account(secondStore)?.appTransactionId)
            let appTransaction = try #require(try await system.engine.appTransaction(containing: appTransactionId))
            let (presented, _) = try await system.call(.post, "/v1/purchases", as: account, ["appTransaction": try await system.engine.sign(appTransaction)])
            #expect(presented == .ok)
            let (status, eligibility) = try await sign(system, account, ["kind": "introductoryOfferEligibility", "productId": Self.monthly])
            #expect(try status == 200 && (decode(OfferSignReply.self, eligibility).allowIntroductoryOffer) == false)

            let second = try App.launch(system, account: account, storeAccount: secondStore)
            guard case .granted = await second.client.purchase(Self.monthly, promotionalOffer: nil, serverIntroductoryEligibility: true) else {
                Issue.record("not bought on the second Apple ID"); return
            }
            #expect(await latest(system, secondStore, Self.monthly)?.offerType == nil, "no second free week")
            await second.client.stop()

            // A customer the server would let have it gets no signature: StoreKit judges per Apple ID, as without one.
            let (newcomer, _) = try await system.customer("newcomer")
            let (allowedStatus, allowed) = try await sign(system, newcomer, ["kind": "introductoryOfferEligibility", "productId": Self.monthly])
            let allowedReply = try decode(OfferSignReply.self, allowed)
            #expect(allowedStatus == 200 && allowedReply.allowIntroductoryOffer == true && allowedReply.signature == nil)
        }
    }
}
