import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

@Suite("The purchase flow end to end over HTTP: app → server, simulator → server", .timeLimit(.minutes(3)))
struct PurchaseFlowTests {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let season = "com.example.iapkit.season.pass"
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    @Test("Each of the four product types: bought, granted, repeated without a second grant, refunded", arguments: LedgerKind.allCases)
    func fourTypes(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let account = "alice-\(UUID().uuidString.prefix(8))"
            let store = "store-\(account)"
            _ = try await system.device(.post, "/sim/accounts", ["id": store])
            var transactionIds: [String] = []
            for product in [Self.coins, Self.premium, Self.season, Self.monthly] {
                let (_, purchase, reply) = try await system.buy(product, account: account, storeAccount: store)
                let jws = try #require(purchase["signedTransaction"] as? String)
                transactionIds.append(try #require(purchase["transactionId"] as? String))
                // The notification may have bound it first: either way it is granted once, and the answer carries it.
                #expect(["granted", "alreadyGranted"].contains(reply["outcome"] as? String))
                let again = try await system.call(.post, "/v1/purchases", as: account, ["signedTransaction": jws])
                #expect(again.0 == .ok)
                #expect(again.1["outcome"] as? String == "alreadyGranted")
            }
            var owned = try await system.entitlements(account)
            #expect(owned.balance("coins") == 100)
            #expect(Set(owned.entitlementNames) == ["premium", "season", "pro"])

            for id in transactionIds { _ = try await system.device(.post, "/sim/transactions/\(id)/refund") }
            owned = try await system.entitlements(account)
            #expect(owned.balance("coins") == 0, "the refund claws the coins back")
            #expect(owned.entitlementNames.isEmpty, "refunds revoke premium, the season pass and pro")
            // The operator's view of the ledger's own checks; the rows this test wrote pass them.
            let (status, consistency) = try await system.admin(.get, "/admin/consistency")
            #expect(status == .ok)
            let problems = consistency["inconsistencies"] as? [[String: Any]] ?? []
            #expect(!problems.contains { ($0["detail"] as? String ?? "").contains(account) }, "\(problems)")
            #expect(kind == .postgres || consistency["consistent"] as? Bool == true, "\(consistency)")
        }
    }
}
