import AppStoreFormats
import Foundation
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// A subscription bought outside the app's flow (an offer code redeemed in the App Store, a promotion): the server
/// sets the account's token at Apple (Set App Account Token), so Apple's later transactions of the series name it.
@Suite("Set App Account Token: purchases made outside the app's flow are named at Apple")
struct AppAccountTokenTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let premium = "com.example.iapkit.premium"

    /// The token Apple's record holds for `transactionId`, waited for (the server sets it after answering): up to 15 s,
    /// as 2 s was not enough for the server's background call on CI's two cores with the whole suite running.
    func appleToken(_ system: System, _ transactionId: String, expecting: Bool = true) async throws -> UUID? {
        for _ in 0..<750 {
            if let token = await system.engine.transaction(transactionId)?.appAccountToken { return token }
            if !expecting { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return await system.engine.transaction(transactionId)?.appAccountToken
    }

    @Test("Bought in the App Store without the app's order, uploaded by an account: Apple's renewals then carry that account's token",
          arguments: LedgerKind.allCases)
    func namedAtApple(_ kind: LedgerKind) async throws {
        var options = System.Options()
        options.kind = kind
        options.setAppAccountTokens = true
        try await System.run(options) { system in
            let (account, store) = try await system.customer("offercode")
            let bought = try await system.storePurchase(["account": store, "device": "phone", "productId": Self.monthly])
            let jws = try #require(bought.signedTransaction)
            let id = try #require(bought.transactionId)
            #expect(await system.engine.transaction(id)?.appAccountToken == nil)
            let (status, _) = try await system.call(.post, "/v1/purchases", as: account, ["signedTransaction": jws])
            #expect(status == .ok)
            let token = try #require(try await appleToken(system, id), "the server set a token at Apple")
            let order = try #require(try await system.services.ledger.order(appAccountToken: token))
            #expect(order.accountId == account && order.state == .granted && order.transactionId == id)
            // Asked again for the series (another upload), the same token: one order per account and series.
            #expect(try await system.services.ledger.appAccountToken(accountId: account, forTransaction: id) == token)
            // The renewal Apple mints carries it, and the account keeps pro through it.
            try await system.advance(by: 180 + 300 + 300)
            let latest = try #require(await system.engine.recordedTransactions().last { $0.payload.originalTransactionId == id }?.payload)
            #expect(latest.transactionId != id)
            #expect(latest.appAccountToken == token)
            let pro = try await system.entitlements(account).entitlements.entitlement("pro")
            #expect(pro?.transactionId == latest.transactionId)
        }
    }

    @Test("Off by default; a purchase made through the app's order, and a family member's copy, are left as they are")
    func leftAlone() async throws {
        try await System.run(.sqlite) { system in
            let (account, store) = try await system.customer("default")
            let bought = try await system.storePurchase(["account": store, "device": "phone", "productId": Self.monthly])
            _ = try await system.call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: (try #require(bought.signedTransaction) as String)))
            #expect(try await appleToken(system, try #require(bought.transactionId), expecting: false) == nil, "not configured")
        }
        var options = System.Options()
        options.setAppAccountTokens = true
        try await System.run(options) { system in
            let (account, store) = try await system.customer("ordered")
            let (order, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let id = try #require(purchase.transactionId)
            try await Task.sleep(for: .milliseconds(200))
            #expect(await system.engine.transaction(id)?.appAccountToken?.lowercasedString == order.appAccountToken.lowercasedString)

            let (_, parentStore) = try await system.customer("parent")
            let (child, childStore) = try await system.customer("child")
            _ = try await system.device(.put, "/sim/accounts/\(parentStore)/family", ["members": [childStore]])
            _ = try await system.device(.post, "/sim/purchases", ["account": parentStore, "device": "ipad", "productId": Self.premium])
            let shared = try decode(SimulatedSignedTransactions.self, await system.device(.post, "/sim/accounts/\(childStore)/restore"))
            let jws = try #require(shared.signedTransactions.first)
            let copy = try #require(await system.engine.recordedTransactions().first { $0.account == childStore && $0.sharedFrom != nil }?.payload)
            #expect(copy.inAppOwnershipType == .familyShared)
            let copyId = try #require(copy.transactionId)
            let (status, _) = try await system.call(.post, "/v1/purchases", as: child, ["signedTransaction": jws])
            #expect(status == .ok)
            try await Task.sleep(for: .milliseconds(200))
            #expect(await system.engine.transaction(copyId)?.appAccountToken == nil, "Apple refuses a copy's token (4000185)")
            #expect(try await system.services.ledger.appAccountToken(accountId: child, forTransaction: copyId) == nil)
        }
    }
}
