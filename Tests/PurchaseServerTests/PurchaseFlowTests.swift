import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
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
            let (account, store) = try await system.customer("alice")
            var transactionIds: [String] = []
            for product in [Self.coins, Self.premium, Self.season, Self.monthly] {
                let (_, purchase, reply) = try await system.buy(product, account: account, storeAccount: store)
                let jws = try #require(purchase.signedTransaction)
                transactionIds.append(try #require(purchase.transactionId))
                // The notification may have bound it first: either way it is granted once, and the answer carries it.
                #expect([.granted, .alreadyGranted].contains(reply?.outcome))
                let again = try await system.call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: jws))
                #expect(again.0 == .ok)
                #expect(try decode(PurchaseReply.self, again.1).outcome == .alreadyGranted)
            }
            var owned = try await system.entitlements(account)
            #expect(owned.balance("coins") == 100)
            #expect(Set(owned.entitlementNames) == ["premium", "season", "pro"])

            for id in transactionIds { _ = try await system.device(.post, "/sim/transactions/\(id)/refund") }
            owned = try await system.entitlements(account)
            #expect(owned.balance("coins") == 0, "the refund claws the coins back")
            #expect(owned.entitlementNames.isEmpty, "refunds revoke premium, the season pass and pro")
            // The operator's view of the ledger's own checks; the rows this test wrote pass them.
            let (status, answer) = try await system.admin(.get, "/admin/consistency")
            let consistency = try decode(ConsistencyReply.self, answer)
            #expect(status == .ok)
            let problems = consistency.inconsistencies
            #expect(!problems.contains { $0.detail.contains(account) }, "\(problems)")
            #expect(kind == .postgres || consistency.consistent == true, "\(consistency)")
        }
    }

    @Test("A prorated refund over HTTP: the simulator signs REFUND_PRORATED, the server keeps the part Apple did not refund", arguments: LedgerKind.allCases)
    func proratedRefund(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let (account, store) = try await system.customer("paula")
            let (_, first, _) = try await system.buy(Self.coins, account: account, storeAccount: store)
            let (_, second, _) = try await system.buy(Self.coins, account: account, storeAccount: store)
            #expect(try await system.entitlements(account).balance("coins") == 200)
            let firstId = try #require(first.transactionId)
            let secondId = try #require(second.transactionId)
            // Apple's example of a percentage: 67.932 % of 100 coins is 67.932, so 68 come back and 32 stay.
            _ = try await system.device(.post, "/sim/transactions/\(firstId)/refund", ["revocationPercentage": 67_932, "revocationReason": 1])
            #expect(try await system.entitlements(account).balance("coins") == 132)
            _ = try await system.device(.post, "/sim/transactions/\(secondId)/refund")
            #expect(try await system.entitlements(account).balance("coins") == 32, "a refund without a percentage is a full one")
            let (status, answer) = try await system.admin(.get, "/admin/transactions/\(firstId)")
            let record = try decode(TransactionRecord.self, answer)
            #expect(status == .ok)
            #expect(record.revocationType == "REFUND_PRORATED", "\(record)")
            #expect(record.revocationPercentage == 67_932, "\(record)")
            #expect(record.revocationReason == 1, "\(record)")
            let problems = try decode(ConsistencyReply.self, await system.admin(.get, "/admin/consistency").1).inconsistencies
            #expect(!problems.contains { $0.detail.contains(account) }, "\(problems)")
            // A percentage is in milliunits of a percent: out of range is a typed 400, and nothing is refunded.
            let (_, third, _) = try await system.buy(Self.coins, account: account, storeAccount: store)
            let thirdId = try #require(third.transactionId)
            let refused = try await system.device(.post, "/sim/transactions/\(thirdId)/refund", ["revocationPercentage": 100_001])
            #expect(String(decoding: refused, as: UTF8.self).contains("milliunits"), "\(String(decoding: refused, as: UTF8.self))")
            #expect(try await system.entitlements(account).balance("coins") == 132)
            #expect(try decode(TransactionRecord.self, await system.admin(.get, "/admin/transactions/\(thirdId)").1).revocationDate == nil)
        }
    }
}
