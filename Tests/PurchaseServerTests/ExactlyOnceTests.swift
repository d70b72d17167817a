import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

@Suite("Exactly once over HTTP: concurrent submissions, replays from other accounts", .timeLimit(.minutes(3)))
struct ExactlyOnceTests {
    static let coins = "com.example.iapkit.coins.100"

    @Test("200 concurrent submissions of one transaction: one grant", arguments: LedgerKind.allCases)
    func concurrentSubmissions(_ kind: LedgerKind) async throws {
        try await System.run(kind, deliver: false) { system in
            let account = "racer-\(UUID().uuidString.prefix(8))"
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-\(account)"])
            let (order, purchase, _) = try await system.buy(Self.coins, account: account, storeAccount: "store-\(account)", submit: false)
            let jws = try #require(purchase.signedTransaction)
            let orderId = order.orderId
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                // Through a client that waits as long as it takes: the test is about one grant, and with the whole suite on
                // two cores 200 requests at once can outlast the test client's 20 s.
                let token = try await system.token(account)
                let url = URL(string: "http://127.0.0.1:\(system.server.port!)/v1/purchases")!
                for index in 0..<200 {
                    group.addTask {
                        let body = PurchaseRequest(signedTransaction: jws, orderId: index.isMultiple(of: 2) ? orderId : nil)
                        var request = URLRequest(url: url, timeoutInterval: 120)
                        request.httpMethod = "POST"
                        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                        request.httpBody = try encodeRequest(body)
                        let (data, response) = try await URLSession.shared.data(for: request)
                        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                        return status == 200 ? try decode(PurchaseReply.self, data).outcome?.rawValue ?? "?" : "HTTP \(status)"
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == "granted" }.count == 1)
            #expect(outcomes.filter { $0 == "alreadyGranted" }.count == 199)
            #expect(try await system.entitlements(account).balance("coins") == 100)
        }
    }

    @Test("Another account replaying a transaction gets 409 and nothing; one paid through the owner's order reaches the owner")
    func replay() async throws {
        try await System.run { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-owner"])
            // Bought without an order (no appAccountToken): the first account to present it owns it.
            let untokened = try await system.storePurchase(["account": "store-owner", "device": "phone", "productId": Self.coins])
            let bare = try #require(untokened.signedTransaction)
            #expect(try await system.call(.post, "/v1/purchases", as: "owner", ["signedTransaction": bare]).0 == .ok)
            let (status, body) = try await system.call(.post, "/v1/purchases", as: "thief", ["signedTransaction": bare])
            #expect(status == .conflict)
            #expect(try errorCode(body) == "transaction_bound_elsewhere")
            #expect(try await system.entitlements("thief").balance("coins") == nil)
            #expect(try await system.entitlements("owner").balance("coins") == 100)

            // Paid through the owner's order: whoever uploads it, it is the owner's, once; the uploader gets nothing.
            let (_, purchase, reply) = try await system.buy(Self.coins, account: "owner", storeAccount: "store-owner", submit: false)
            #expect(reply == nil)
            let jws = try #require(purchase.signedTransaction)
            let (delivered, answered) = try await system.call(.post, "/v1/purchases", as: "thief", PurchaseRequest(signedTransaction: jws))
            #expect(delivered == .ok)
            let answer = try decode(PurchaseReply.self, answered)
            #expect(answer.outcome == .deliveredToOwner)
            #expect(answer.orderId == nil, "the uploader does not learn the owner's order")
            #expect(try await system.entitlements("thief").balance("coins") == nil)
            #expect(try await system.entitlements("owner").balance("coins") == 200)
            let again = try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: "owner", PurchaseRequest(signedTransaction: jws)).1)
            #expect(again.outcome == .alreadyGranted)
            #expect(try await system.entitlements("owner").balance("coins") == 200)
            // /metrics counts the refusal, and names no account.
            let metrics = String(buffer: try await system.server.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(System.adminKey)"]).body)
            #expect(metrics.contains(#"iapkit_purchases_total{outcome="refused"} 1"#))
            #expect(metrics.contains(#"iapkit_purchases_total{outcome="deliveredToOwner"} 1"#))
            #expect(metrics.contains("iapkit_purchase_duration_seconds_bucket"))
            #expect(!metrics.contains("thief") && !metrics.contains("owner"))
        }
    }

    @Test("A receipt whose lines are granted but one, another account's: 200, and the refused line is listed with its code and class, so that a StoreKit 1 client finishing on a 200 does not take it as delivered")
    func receiptWithARefusedLine() async throws {
        try await System.run(.init(deliver: false)) { system in
            let premium = "com.example.iapkit.premium"
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-family"])
            // Ann bought without an order on the family's Apple ID, and presented it first: it is hers.
            let bare = try await system.storePurchase(["account": "store-family", "device": "phone", "productId": premium])
            let bareId = try #require(bare.transactionId)
            #expect(try await system.call(.post, "/v1/purchases", as: "ann", ["signedTransaction": try #require(bare.signedTransaction)]).0 == .ok)
            // Bob, signed in to the app on the same Apple ID, buys a subscription; the device's receipt lists both.
            let (order, purchase, _) = try await system.buy("com.example.iapkit.pro.monthly", account: "bob", storeAccount: "store-family", submit: false)
            let receipt = try #require(purchase.receipt)
            let (status, answer) = try await system.call(.post, "/v1/purchases", as: "bob", PurchaseRequest(receipt: receipt, orderId: order.orderId))
            let reply = try decode(PurchaseReply.self, answer)
            #expect(status == .ok)
            let granted = reply.transactions.map(\.transactionId)
            #expect(granted == [try #require(purchase.transactionId)], "only Bob's own line is granted: \(reply)")
            let refused = reply.refused
            #expect(refused.count == 1, "\(reply)")
            #expect(refused.first?.transactionId == bareId)
            #expect(refused.first?.code == "transaction_bound_elsewhere")
            #expect(refused.first?.class.rawValue == "final", "another account's: the device may finish it")
            #expect(try await system.entitlements("bob").entitlementNames == ["pro"])
            #expect(try await system.entitlements("ann").entitlementNames == ["premium"])
            // An upload granted whole (here Ann's signed transaction, again) lists no refusal.
            let again = try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: "ann", PurchaseRequest(signedTransaction: (try #require(bare.signedTransaction) as String))).1)
            #expect(again.refused.isEmpty, "\(again)")
        }
    }

    @Test("Bad input: no token 401, forged or foreign signatures 422, oversize 413, wrong shapes 400 — nothing recorded")
    func badInput() async throws {
        try await System.run { system in
            #expect(try await system.call(.get, "/v1/entitlements", as: nil).0 == .unauthorized)
            let forged = try await system.call(.post, "/v1/purchases", as: "eve", ["signedTransaction": "eyJhbGciOiJFUzI1NiJ9.e30.AAAA"])
            #expect(forged.0 == .unprocessableContent)
            #expect(try await system.call(.post, "/v1/purchases", as: "eve", ["orderId": "x"]).0 == .badRequest)
            #expect(try await system.call(.post, "/v1/orders", as: "eve", ["productId": "no.such.product"]).0 == .unprocessableContent)
            let notification = try await system.call(.post, "/v1/notifications/appstore", as: nil, ["signedPayload": "not.a.jws"])
            #expect(notification.0 == .unprocessableContent)
            // Last: a 413 refuses the body unread and closes the connection, the test client's only one.
            let huge = String(repeating: "A", count: 2 << 20)
            #expect(try await system.call(.post, "/v1/purchases", as: "eve", ["receipt": huge]).0 == .contentTooLarge)
            #expect(try await system.services.ledger.purchases(accountId: "eve").isEmpty)
        }
    }
}
