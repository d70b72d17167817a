import AppStoreFormats
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPKit
import IAPTestSupport
import StoreSimulator
import Testing

/// The SDK's simulator adapter against a real simulator on loopback: the StoreAdapter paths StoreKit has and a test
/// cannot tap through — win-back offers, the App Store's sheets (refund, manage subscriptions, offer codes),
/// `Transaction.all`, and the errors StoreKit throws.
@Suite("SimulatorStore: win-back offers, the App Store's sheets, Transaction.all and StoreKit's errors", .timeLimit(.minutes(2)))
struct SimulatorStoreToolsTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let premium = "com.example.iapkit.premium"
    static let coins = "com.example.iapkit.coins.100"

    /// A simulator alone (no purchase server) on loopback, and a SimulatorStore for `account` on it.
    func withSimulator(_ body: @Sendable (StoreEngine, URL) async throws -> Void) async throws {
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: simulatorAuthority))
        let authenticator = APIAuthenticator(keyId: "TESTKEY001", issuerId: "test-issuer", publicKey: P256.Signing.PrivateKey().publicKey,
                                             bundleId: "com.example.iapkit")
        try await SimulatorServer.application(.init(engine: engine, authenticator: authenticator), port: 0).test(.live) { client in
            try await body(engine, URL(string: "http://127.0.0.1:\(try #require(client.port))")!)
        }
    }

    func store(_ url: URL, _ account: String, device: String = "phone") -> SimulatorStore {
        SimulatorStore(baseURL: url, account: account, device: device, pollInterval: .milliseconds(20))
    }

    func payload(_ transaction: StoreTransaction) throws -> JWSTransactionDecodedPayload {
        try CompactJWS(transaction.signedTransaction).unverifiedPayload(as: JWSTransactionDecodedPayload.self)
    }

    func request(_ productId: String, winBackOfferId: String? = nil) -> StorePurchaseRequest {
        StorePurchaseRequest(productId: productId, appAccountToken: UUID(), winBackOfferId: winBackOfferId)
    }

    /// What StoreKit-like error `body` threw, if a StoreError.
    func thrown(_ body: () async throws -> Void) async -> StoreError? {
        do { try await body(); return nil } catch { return error as? StoreError }
    }

    @Test("A win-back offer through the adapter: redeemed by a lapsed payer at its terms; .ineligibleForOffer for another; .productUnavailable")
    func winBack() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("lapsed")
            guard case .purchased(_, let original, _) = try await engine.purchase(account: "lapsed", device: "phone", productId: Self.monthly) else {
                Issue.record("the first subscription failed"); return
            }
            try await engine.advanceClock(by: 200)
            #expect(try await engine.setAutoRenew(originalTransactionId: original, enabled: false))
            try await engine.advanceClock(by: 400)

            let lapsed = store(url, "lapsed")
            guard case .purchased(let transaction) = try await lapsed.purchase(request(Self.monthly, winBackOfferId: "pro.monthly.winback")) else {
                Issue.record("the win-back purchase did not complete"); return
            }
            let paid = try payload(transaction)
            #expect(paid.offerType == .winBackOffer && paid.offerIdentifier == "pro.monthly.winback")
            #expect(paid.offerDiscountType == .payUpFront && paid.price == 5990)
            #expect(transaction.originalTransactionId == original)

            try await engine.createAccount("fresh")
            let fresh = store(url, "fresh")
            #expect(await thrown { _ = try await fresh.purchase(request(Self.monthly, winBackOfferId: "pro.monthly.winback")) } == .ineligibleForOffer)
            #expect(try await fresh.transactionHistory()?.isEmpty == true, "nothing charged")
            #expect(await thrown { _ = try await fresh.purchase(request(Self.monthly, winBackOfferId: "NOPE")) } == .invalidOfferIdentifier)
            #expect(await thrown { _ = try await fresh.purchase(request("com.example.iapkit.nothing")) } == .productUnavailable)
        }
    }

    @Test("The refund sheet: the simulator records it and holds the request (.success); a subscription stops renewing; closed unsubmitted: .userCancelled")
    func refundRequest() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("asker")
            let asker = store(url, "asker")
            guard case .purchased(let premium) = try await asker.purchase(request(Self.premium)),
                  case .purchased(let coins) = try await asker.purchase(request(Self.coins)),
                  case .purchased(let monthly) = try await asker.purchase(request(Self.monthly)) else {
                Issue.record("a purchase failed"); return
            }
            #expect(try await asker.beginRefundRequest(for: premium.transactionId, in: nil) == .success)
            #expect(await engine.refundRequest(premium.transactionId)?.reason == .unintendedPurchase, "Apple holds the request until it decides")
            #expect(await engine.notifications().last?.type == .consumptionRequest)

            // Asked from the app, Apple turns the subscription's auto-renewal off.
            #expect(try await asker.beginRefundRequest(for: monthly.transactionId, in: nil) == .success)
            let told = await engine.notifications().suffix(2).map { "\($0.type.rawValue)/\($0.subtype?.rawValue ?? "")" }
            #expect(told == ["CONSUMPTION_REQUEST/", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"])

            await asker.setRefundRequestAction(.close)
            #expect(try await asker.beginRefundRequest(for: coins.transactionId, in: nil) == .userCancelled)
            #expect(await engine.refundRequest(coins.transactionId) == nil, "closed without submitting: nothing asked")
            #expect(try await asker.beginRefundRequest(for: coins.transactionId, in: nil) == .success, "the script was for one sheet")

            // Another customer's purchase is not this customer's to ask about.
            try await engine.createAccount("other")
            #expect(await thrown { _ = try await store(url, "other").beginRefundRequest(for: premium.transactionId, in: nil) } != nil)

            let sheets = try #require(await engine.sheets(account: "asker"))
            #expect(sheets.map(\.sheet) == Array(repeating: .refundRequest, count: 4))
            #expect(sheets.map(\.transactionId) == [premium.transactionId, monthly.transactionId, coins.transactionId, coins.transactionId])
        }
    }

    @Test("The manage-subscriptions sheet: recorded; the scripted cancellation turns auto-renew off in the simulator; unscripted, nothing changes")
    func manageSubscriptions() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("manager")
            let manager = store(url, "manager")
            guard case .purchased(let monthly) = try await manager.purchase(request(Self.monthly)) else { Issue.record("purchase failed"); return }
            let original = try #require(monthly.originalTransactionId)

            let before = await engine.notifications().count
            try await manager.showManageSubscriptions(in: nil)
            #expect(await engine.notifications().count == before, "looked and closed: nothing changed")

            await manager.setManageSubscriptionsAction(.turnOffAutoRenew(original))
            try await manager.showManageSubscriptions(in: nil)
            let last = try #require(await engine.notifications().last)
            #expect(last.type == .didChangeRenewalStatus && last.subtype == .autoRenewDisabled)
            #expect(try await engine.subscriptionStatuses(containing: original).first?.renewal.autoRenewStatus == .off)
            #expect(await engine.sheets(account: "manager")?.map(\.sheet) == [.manageSubscriptions, .manageSubscriptions])
        }
    }

    @Test("The offer-code sheet: the scripted code is redeemed without the app's token and arrives through updates(); unscripted, nothing")
    func offerCode() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("coder")
            let coder = store(url, "coder")
            try await coder.presentOfferCodeRedeemSheet(in: nil)
            #expect(try await coder.unfinished().isEmpty, "the customer closed the sheet")

            await coder.setOfferCodeToRedeem(productId: Self.monthly, offerId: "PRO-FRIENDS")
            try await coder.presentOfferCodeRedeemSheet(in: nil)
            var delivered: StoreTransaction?
            for await transaction in coder.updates() {
                delivered = transaction
                break
            }
            let transaction = try #require(delivered)
            #expect(transaction.productId == Self.monthly && transaction.appAccountToken == nil)
            let paid = try payload(transaction)
            #expect(paid.offerType == .offerCode && paid.offerIdentifier == "PRO-FRIENDS")
            #expect(await engine.sheets(account: "coder")?.map(\.sheet) == [.offerCodeRedemption, .offerCodeRedemption])
        }
    }

    @Test("canMakePayments: the account's switch; an account the simulator lacks and an unreachable simulator throw instead of answering false")
    func canMakePayments() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("payer")
            try await engine.createAccount("child", canMakePayments: false)
            #expect(try await store(url, "payer").canMakePayments())
            #expect(try await store(url, "child").canMakePayments() == false)
            guard case .systemError(let text)? = await thrown({ _ = try await store(url, "ghost").canMakePayments() }) else {
                Issue.record("an unknown account did not throw systemError"); return
            }
            #expect(text.contains("no store account ghost"))
        }
        let nowhere = store(URL(string: "http://127.0.0.1:\(try FreePort.pick())")!, "payer")
        guard case .networkError(let text)? = await thrown({ _ = try await nowhere.canMakePayments() }) else {
            Issue.record("an unreachable simulator did not throw networkError"); return
        }
        #expect(text.count < 200, "a short text: \(text)")
    }

    @Test("products: type and displayPrice; Transaction.all leaves finished consumables out")
    func productsAndHistory() async throws {
        try await withSimulator { engine, url in
            try await engine.createAccount("shopper")
            let shopper = store(url, "shopper")
            let (products, invalid) = try await shopper.products([Self.monthly, Self.coins, "com.example.iapkit.nothing"])
            #expect(invalid == ["com.example.iapkit.nothing"])
            let monthly = try #require(products.first { $0.productId == Self.monthly })
            #expect(monthly.type == .autoRenewableSubscription && monthly.price == 4990)
            #expect(monthly.displayPrice == StoreProduct.format(price: 4990, currency: "USD") && monthly.displayPrice.contains("4.99"))
            #expect(monthly.introductoryOffer?.discountType == "FREE_TRIAL")
            #expect(products.first { $0.productId == Self.coins }?.type == .consumable)

            guard case .purchased(let coins) = try await shopper.purchase(request(Self.coins)),
                  case .purchased(let premium) = try await shopper.purchase(request(Self.premium)) else { Issue.record("a purchase failed"); return }
            #expect(try await shopper.transactionHistory()?.map(\.transactionId) == [coins.transactionId, premium.transactionId])
            try await shopper.finish(coins)
            try await shopper.finish(coins)  // finished already: done, no error
            #expect(try await shopper.transactionHistory()?.map(\.transactionId) == [premium.transactionId], "finished consumables are left out")
        }
    }
}
