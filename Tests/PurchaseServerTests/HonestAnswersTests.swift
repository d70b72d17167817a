import AppStoreTrust
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import Testing

@Suite("Answers that say what happened: a spend over the limit, a payment for another order's product, Sandbox in production",
       .timeLimit(.minutes(3)))
struct HonestAnswersTests {
    static let coins = "com.example.iapkit.coins.100"
    static let season = "com.example.iapkit.season.pass"

    @Test("A payment for a season pass through a coins order: granted to the account by its token, and the answer says not as that order",
          arguments: LedgerKind.allCases)
    func passPaidThroughCoinsOrder(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false)) { system in
            let (account, store) = try await system.customer("pass")
            let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: Self.coins)).1)
            let orderId = order.orderId
            let paid = try await system.storePurchase(["account": store, "device": "phone", "productId": Self.season,
                                                       "appAccountToken": order.appAccountToken.lowercasedString])
            let upload = PurchaseRequest(signedTransaction: paid.signedTransaction ?? "", orderId: orderId)
            let (status, answer) = try await system.call(.post, "/v1/purchases", as: account, upload)
            let reply = try decode(PurchaseReply.self, answer)
            #expect(status == .ok, "\(reply)")
            #expect(reply.outcome == .granted)
            #expect(reply.orderId == nil, "not fulfilled as the coins order")
            let refusal = try #require(reply.orderRefusal, "\(reply)")
            #expect(refusal.orderId == orderId)
            #expect(refusal.code == "order_product_mismatch")
            #expect(refusal.message.contains("granted by its appAccountToken"))
            let item = try #require(reply.transactions.first)
            #expect(item.orderRefusal?.code == "order_product_mismatch")
            #expect(reply.entitlements.entitlementNames.contains("season"), "\(reply)")
            #expect(try await system.entitlements(account).entitlementNames.contains("season"))
            #expect(try await system.entitlements(account).balance("coins") == nil, "no coins were paid for")
            // Sent again (the app's retry): already granted, and still not as that order.
            let (again, second) = try await system.call(.post, "/v1/purchases", as: account, upload)
            let secondReply = try decode(PurchaseReply.self, second)
            #expect(again == .ok && secondReply.outcome == .alreadyGranted, "\(secondReply)")
            #expect(secondReply.orderRefusal?.code == "order_product_mismatch")
            #expect(try await system.services.ledger.order(orderId)?.state == .created, "the coins order stays open")
        }
    }

    @Test("Spending 2^63-1 is refused as over the limit, not as an amount that is not positive")
    func spendOverLimit() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (account, store) = try await system.customer("spender")
            _ = try await system.buy(Self.coins, account: account, storeAccount: store)
            let (status, reply) = try await system.call(.post, "/v1/consumables/coins/spend", as: account,
                                                        SpendRequest(amount: Int64.max, idempotencyKey: "too-much"))
            let error = try decode(ErrorBody.self, reply).error
            #expect(status == .unprocessableContent && error.code == "invalid_input")
            let message = error.message
            #expect(message.contains("over the limit") && !message.contains("positive"), "\(message)")
            let (_, zero) = try await system.call(.post, "/v1/consumables/coins/spend", as: account, SpendRequest(amount: 0, idempotencyKey: "nothing"))
            #expect(try decode(ErrorBody.self, zero).error.message.contains("positive"))
            #expect(try await system.entitlements(account).balance("coins") == 100)
        }
    }

    /// Apple's root for receipts, from `../shared` (or `IAPKIT_SHARED`).
    static func appleRoots() throws -> TrustRoots {
        let shared = ProcessInfo.processInfo.environment["IAPKIT_SHARED"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("shared").path
        return try TrustRoots.load([shared + "/vectors/certs/AppleIncRootCertificate.cer"])
    }

    @Test("Served with Apple's roots, the default environments warn that Sandbox (TestFlight's free) purchases count; Production alone does not")
    func sandboxInProductionWarns() throws {
        let apple = try Self.appleRoots()
        #expect(apple.trustsApple)
        var configuration = ServerConfiguration()
        let warnings = configuration.warnings(trusting: apple)
        #expect(warnings.count == 1 && warnings[0].contains("Sandbox") && warnings[0].contains("TestFlight"), "\(warnings)")
        configuration.environments = ["Production"]
        #expect(configuration.warnings(trusting: apple).isEmpty)
        // Against the simulator's roots nothing is production: Sandbox is all there is.
        var simulator = TrustRoots()
        try simulator.add(certificateData: simulatorAuthority.jws.rootDER, source: "simulator JWS root")
        #expect(ServerConfiguration().warnings(trusting: simulator).isEmpty)
        // A staging server that takes Sandbox alone is not taking production purchases.
        configuration.environments = ["Sandbox"]
        #expect(configuration.warnings(trusting: apple).isEmpty)
    }
}
