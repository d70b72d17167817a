import Foundation
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import Testing

/// Outgoing webhooks over real HTTP: a scripted history on the simulator and the server, and the app's backend (a
/// receiver in the test) getting every event type, each once by id, signed.
@Suite("Webhooks to the app's backend: every event once, signed, retried until taken", .serialized)
struct WebhookTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"
    static let secret = "webhook-secret-for-tests"

    /// On SQLite: a ledger of its own, whose outbox holds this history's events only. (PostgreSQL's outbox is shared by
    /// every test running, and delivering all of it loads the machine; the ledger's webhook tests run there.)
    @Test("A scripted history makes every event type; each reaches the backend once by id with a valid signature, also when the backend first fails")
    func everyEventOnce() async throws {
        let kind = LedgerKind.sqlite
        let receiver = WebhookReceiver(secret: Self.secret)
        try await receiver.serve { url in
            var options = System.Options()
            options.kind = kind
            options.faults = .init(duplicate: true)  // Apple delivering notifications twice changes nothing
            let settings = WebhookSettings(url: url, secret: Self.secret, maxAttempts: 5)
            options.webhooks = settings
            try await System.run(options) { system in
                let sender = WebhookSender(ledger: system.services.ledger, settings: settings)
                let (account, store) = try await system.customer("hooked")
                // The backend is down for the first deliveries: they are retried, not lost.
                await receiver.setFailing(true)
                let (_, subscription, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
                let original = try #require(subscription.transactionId)
                func drain() async throws { for _ in 0..<20 { if try await sender.deliverDue(limit: 1_000) == 0 { break } } }
                for _ in 0..<50 where await !receiver.deliveries.contains(where: { $0.type == "INITIAL_PURCHASE" && $0.body["accountId"] == account }) {
                    try await drain()
                    try await Task.sleep(for: .milliseconds(50))
                }
                await receiver.setFailing(false)

                try await system.advance(by: 301)                                                     // RENEWAL
                _ = try await system.device(.post, "/sim/purchases", ["account": store, "device": "phone", "productId": Self.yearly])  // PRODUCT_CHANGE (+ the upgrade's RENEWAL)
                _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": false])   // CANCELLATION
                _ = try await system.device(.post, "/sim/subscriptions/\(original)/autoRenew", ["enabled": true])    // UNCANCELLATION
                // A price increase needing consent (PRICE_INCREASE / PENDING), then the customer's consent (/ ACCEPTED).
                let raised = try await system.device(.post, "/sim/products/\(Self.yearly)/price", ["price": 99_990, "consentRequired": true])
                let told = (try? JSONSerialization.jsonObject(with: raised) as? [String: Any])?["subscribersTold"] as? Int
                #expect(told == 1, "the upgraded series renews into the yearly plan: \(text(raised))")        // PRICE_INCREASE_CONSENT_NEEDED
                _ = try await system.device(.post, "/sim/subscriptions/\(original)/priceConsent")                  // PRICE_INCREASE_ACCEPTED
                _ = try await system.device(.post, "/sim/accounts", ["id": store, "billingFails": true])
                try await system.advance(by: 3_601)                                                   // BILLING_ISSUE
                try await system.advance(by: 3 * 60 * 80 / 7)                                        // EXPIRATION (grace, then billing retry)
                _ = try await system.device(.post, "/sim/accounts", ["id": store, "billingFails": false])
                _ = try await system.buy("com.example.iapkit.premium", account: account, storeAccount: store)   // NON_RENEWING_PURCHASE
                let (_, coins, _) = try await system.buy("com.example.iapkit.coins.100", account: account, storeAccount: store)  // CONSUMABLE_CREDIT
                let coinsId = try #require(coins.transactionId)
                _ = try await system.device(.post, "/sim/transactions/\(coinsId)/refund")             // REFUND
                _ = try await system.device(.post, "/sim/transactions/\(coinsId)/refund-reversal")    // REFUND_REVERSED
                // An order whose payment went through without its token (the server stored it from Apple's notification,
                // bound to nobody), settled by the operator with that transaction: TRANSFER, beside the grant's own event.
                let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: "com.example.iapkit.season.pass")).1)
                let paid = try await system.storePurchase(["account": store, "device": "phone", "productId": "com.example.iapkit.season.pass"])
                let settled = try await system.admin(.post, "/admin/orders/\(order.orderId)/settle",
                                                     SettleRequest(transactionId: paid.transactionId ?? "", note: "sent by email"))
                #expect(settled.0 == .ok, "\(text(settled.1))")
                let test = try await system.admin(.post, "/admin/webhooks/test")                  // TEST
                let testId = try decode(WebhookTestReply.self, test.1).queued

                // Everything due now, and the first (failed) ones once their backoff passed.
                try await drain()
                let failedFirst = await receiver.deliveries.filter { !$0.accepted && $0.body["accountId"] == account }
                #expect(failedFirst.contains { $0.type == "INITIAL_PURCHASE" }, "the backend refused the first ones")
                // Those wait for their retry: sent as by a clock past their backoff. (Replaying them instead raced the
                // server's own sender: an event it delivered between the listing and the replay was sent twice — as an
                // operator's replay of a delivered event rightly does.)
                let later = Date().addingTimeInterval(2 * 3_600)   // past the longest backoff, an hour
                for _ in 0..<100 {
                    for _ in 0..<20 { if try await sender.deliverDue(limit: 1_000, dueBy: later) == 0 { break } }
                    if try await system.services.ledger.webhookEvents(state: .pending, limit: 10_000).allSatisfy({ $0.accountId != account }) { break }
                    try await Task.sleep(for: .milliseconds(100))
                }

                let accepted = await receiver.accepted.filter { $0.body["accountId"] == account || $0.eventId == testId }
                let types = Set(accepted.map(\.type))
                #expect(types == Set(WebhookEvent.Kind.allCases.map(\.rawValue)), "missing: \(Set(WebhookEvent.Kind.allCases.map(\.rawValue)).subtracting(types))")
                let ids = accepted.map(\.eventId)
                #expect(ids.count == Set(ids).count, "each event once: \(ids.sorted())")
                #expect(accepted.allSatisfy { $0.signatureValid })
                #expect(accepted.filter { $0.type != "TEST" }.allSatisfy { $0.body["accountId"] == account }, "every event names its account")
                #expect(try await system.services.ledger.webhookEvents(state: .pending, limit: 10_000).filter { $0.accountId == account }.isEmpty)
                let credit = try #require(accepted.first { $0.type == "CONSUMABLE_CREDIT" })
                #expect(credit.body["currency"] == "coins" && credit.body["amount"] == "100")
                // The admin API lists them, delivered.
                let listed = try decode(WebhooksReply.self, await system.admin(.get, "/admin/webhooks?state=delivered&limit=10000").1).events
                #expect(listed.filter { $0.accountId == account }.count == ids.count - 1)
                #expect(try await system.admin(.post, "/admin/webhooks/nope/replay").0 == .notFound)
                #expect(try await system.admin(.get, "/admin/webhooks?state=lost").0 == .badRequest)
            }
        }
    }

    @Test("Out of attempts an event is failed, visible, and a replay delivers it")
    func failedThenReplayed() async throws {
        let receiver = WebhookReceiver(secret: Self.secret)
        try await receiver.serve { url in
            var options = System.Options()
            let settings = WebhookSettings(url: url, secret: Self.secret, maxAttempts: 1)
            options.webhooks = settings
            try await System.run(options) { system in
                let sender = WebhookSender(ledger: system.services.ledger, settings: settings)
                await receiver.setFailing(true)
                #expect(try await system.admin(.post, "/admin/webhooks/test").0 == .ok)
                try await sender.deliverDue()
                let failed = try await system.services.ledger.webhookEvents(state: .failed)
                #expect(failed.count == 1 && failed.first?.lastError == "HTTP 503" && failed.first?.attempts == 1)
                await receiver.setFailing(false)
                try await sender.deliverDue()
                #expect(await receiver.accepted.isEmpty, "a failed event waits for the operator")
                let id = try #require(failed.first?.eventId)
                #expect(try await system.admin(.post, "/admin/webhooks/\(id)/replay").0 == .ok)
                try await sender.deliverDue()
                #expect(await receiver.accepted.map(\.eventId) == [id])
            }
        }
    }

    @Test("Without a receiver URL a purchase writes no event, and the test endpoint says why (400 webhooks_not_configured)")
    func noReceiverNoOutbox() async throws {
        try await System.run(System.Options()) { system in
            let (account, store) = try await system.customer("unhooked")
            _ = try await system.buy(Self.monthly, account: account, storeAccount: store)
            #expect(try await system.services.ledger.webhookEvents().isEmpty)
            // Services made directly (an embedding app, the demo) start with no receiver, so with no events either.
            let made = PurchaseServices(ledger: system.services.ledger, verifier: system.services.verifier,
                                               authenticator: system.services.authenticator)
            #expect(!made.ledger.recordsWebhookEvents)
            let (status, body) = try await system.admin(.post, "/admin/webhooks/test")
            #expect(try status == .badRequest && (errorCode(body)) == "webhooks_not_configured", "\(text(body))")
        }
    }
}
