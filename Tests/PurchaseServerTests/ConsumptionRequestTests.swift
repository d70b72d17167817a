import AppStoreFormats
import Foundation
import IAPTestSupport
import NIOCore
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// A customer asks Apple for a refund; Apple asks the server (CONSUMPTION_REQUEST); the server answers with Send
/// Consumption Information for customers who consented; Apple decides by it. All over real HTTP against the simulator.
@Suite("Consumption requests: answered from the refund policy, only for customers who consented")
struct ConsumptionRequestTests {
    static let coins = "com.example.iapkit.coins.100"
    static let monthly = "com.example.iapkit.pro.monthly"

    func run(_ kind: LedgerKind, policy: RefundPolicy?, _ body: @Sendable (System) async throws -> Void) async throws {
        var options = System.Options()
        options.kind = kind
        options.refundPolicy = policy
        try await System.run(options, body)
    }

    /// Buys `productId` for a new customer; returns the account, its Apple ID and the transaction id.
    func bought(_ productId: String, _ system: System, prefix: String) async throws -> (account: String, store: String, transactionId: String) {
        let (account, store) = try await system.customer(prefix)
        let (_, purchase, reply) = try await system.buy(productId, account: account, storeAccount: store)
        // Granted by its ONE_TIME_CHARGE notification or by the upload, whichever came first.
        #expect([.granted, .alreadyGranted].contains(reply?.outcome))
        return (account, store, try #require(purchase.transactionId))
    }

    func consent(_ system: System, _ account: String, _ consented: Bool) async throws {
        let (status, reply) = try await system.call(.put, "/v1/consumption-consent", as: account, ConsentRequest(consented: consented))
        #expect(status == .ok)
        #expect(try decode(ConsentReply.self, reply).consented == consented)
    }

    /// The customer asks for a refund; returns what the developer sent Apple (nil: nothing).
    func askForRefund(_ system: System, _ transactionId: String) async throws -> ConsumptionRequest? {
        _ = try await system.device(.post, "/sim/transactions/\(transactionId)/refund-request", ["reason": "UNSATISFIED_WITH_PURCHASE"])
        let request = try SimRefundRequest.read(await system.device(.get, "/sim/transactions/\(transactionId)/refund-request"))
        #expect(request.reason.rawValue == "UNSATISFIED_WITH_PURCHASE")
        return request.consumption
    }

    @Test("Prorated: 40 of 100 coins spent, Apple hears GRANT_PRORATED at 40 %, refunds 60 %, and the ledger claws back 60 coins",
          arguments: LedgerKind.allCases)
    func prorated(_ kind: LedgerKind) async throws {
        try await run(kind, policy: .prorated) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "prorated")
            let (spent, _) = try await system.call(.post, "/v1/consumables/coins/spend", as: account, SpendRequest(amount: 40, idempotencyKey: "k1"))
            #expect(spent == .ok)
            try await consent(system, account, true)
            let sent = try #require(try await askForRefund(system, id))
            #expect(sent.customerConsented == true)
            #expect(sent.deliveryStatus?.rawValue == "DELIVERED")
            #expect(sent.sampleContentProvided == false)
            #expect(sent.refundPreference?.rawValue == "GRANT_PRORATED")
            #expect(sent.consumptionPercentage == 40_000)
            let decided = try decode(SimRefundDecision.self, await system.device(.post, "/sim/transactions/\(id)/refund-request/decide"))
            #expect(decided.decision == "REFUND")
            #expect(decided.revocationPercentage == 60_000)
            #expect(try await system.entitlements(account).balance("coins") == 0, "60 of the 60 left clawed back")
            let timeline = try decode(TimelineReply.self, await system.admin(.get, "/admin/accounts/\(account)/timeline").1)
            let audit = timeline.timeline.filter { $0.kind.rawValue == "audit" }.map(\.detail)
            #expect(audit.contains { $0.contains("consumption-consent-given") } && audit.contains { $0.contains("consumption-request-answered") }, "\(audit)")
        }
    }

    @Test("No consent, no answer: Apple hears nothing and refunds in full by its own judgement", arguments: LedgerKind.allCases)
    func noConsent(_ kind: LedgerKind) async throws {
        try await run(kind, policy: .preferNoRefund) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "silent")
            #expect(try await askForRefund(system, id) == nil)
            // Consent given and withdrawn before the request counts as none.
            let (other, _, otherId) = try await bought(Self.coins, system, prefix: "withdrawn")
            try await consent(system, other, true)
            try await consent(system, other, false)
            #expect(try await askForRefund(system, otherId) == nil)
            let decided = try decode(SimRefundDecision.self, await system.device(.post, "/sim/transactions/\(id)/refund-request/decide"))
            #expect(decided.decision == "REFUND" && decided.revocationPercentage == 100_000)
            #expect(try await system.entitlements(account).balance("coins") == 0)
        }
    }

    @Test("Prefer no refund: DECLINE is sent, Apple declines (REFUND_DECLINED) and the credit stays; an auto-renewable gets no percentage")
    func declined() async throws {
        try await run(.sqlite, policy: .preferNoRefund) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "declined")
            try await consent(system, account, true)
            let sent = try #require(try await askForRefund(system, id))
            #expect(sent.refundPreference?.rawValue == "DECLINE")
            #expect(sent.consumptionPercentage == 0, "nothing spent")
            let decided = try decode(SimRefundDecision.self, await system.device(.post, "/sim/transactions/\(id)/refund-request/decide"))
            #expect(decided.decision == "REFUND_DECLINED")
            #expect(try await system.entitlements(account).balance("coins") == 100)

            let (subscriber, _, renewalId) = try await bought(Self.monthly, system, prefix: "subscriber")
            try await consent(system, subscriber, true)
            let subscription = try #require(try await askForRefund(system, renewalId))
            #expect(subscription.refundPreference?.rawValue == "DECLINE")
            #expect(subscription.consumptionPercentage == nil, "Apple computes an auto-renewable's consumption itself (4000209 otherwise)")
        }
    }

    @Test("RESCIND_CONSENT (a guardian withdrew consent for the app) stops the answers for that customer; a later choice of the customer's stands")
    func rescinded() async throws {
        try await run(.sqlite, policy: .preferRefund) { system in
            let (account, store, id) = try await bought(Self.coins, system, prefix: "minor")
            try await consent(system, account, true)
            _ = try await system.device(.post, "/sim/accounts/\(store)/rescind-consent")
            let held = try decode(ConsentReply.self, await system.call(.get, "/v1/consumption-consent", as: account).1)
            #expect(held.consented == false)
            #expect(held.source == "rescind_consent")
            #expect(try await askForRefund(system, id) == nil)
            // The notice delivered again (Apple retries) after the customer consented anew changes nothing.
            try await system.advance(by: 1)
            try await consent(system, account, true)
            let rescind = try #require(await system.engine.notifications().last { $0.type == .rescindConsent })
            let redelivered = try await system.server.execute(uri: "/v1/notifications/appstore", method: .post,
                                                              body: ByteBuffer(string: #"{"signedPayload":"\#(rescind.signedPayload)"}"#))
            #expect(redelivered.status == .ok)
            #expect(try decode(ConsentReply.self, await system.call(.get, "/v1/consumption-consent", as: account).1).consented == true)
        }
    }

    @Test("Apple unreachable when the request arrives: the notification is taken, the answer stays owed, and the reconciler sends it once",
          arguments: LedgerKind.allCases)
    func appleDownThenReconciled(_ kind: LedgerKind) async throws {
        try await run(kind, policy: .preferRefund) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "outage")
            try await consent(system, account, true)
            let refuseConsumption = FaultPlan(seed: 1, rules: [.init(pathPrefix: "/inApps/v2/transactions/consumption", errorRate: 1.0, errorStatus: 503)])
            try await system.inject(refuseConsumption)
            _ = try await system.device(.post, "/sim/transactions/\(id)/refund-request")
            #expect(try SimRefundRequest.read(await system.device(.get, "/sim/transactions/\(id)/refund-request")).consumption == nil)
            let request = try #require(await system.engine.notifications().last { $0.type == .consumptionRequest })
            #expect(request.attempts.last?.sendAttemptResult == .success, "the notification itself is stored and taken")
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .pending)
            // Still away at the reconciler's pass: owed still. (On PostgreSQL the suite shares one database: a pass may
            // also try other tests' owed answers, so this one's state is what is judged.)
            #expect(try await Reconciler(services: system.services).runOnce().consumptionAnswersTried >= 1)
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .pending)
            _ = try await system.device(.delete, "/sim/faults")
            #expect(try await Reconciler(services: system.services).runOnce().consumptionAnswersTried >= 1)
            let sent = try #require(try SimRefundRequest.read(await system.device(.get, "/sim/transactions/\(id)/refund-request")).consumption)
            #expect(sent.refundPreference?.rawValue == "GRANT_FULL")
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .answered)
            // Answered once: delivered again while Apple would refuse any call, nothing is sent and nothing owed.
            try await system.inject(refuseConsumption)
            let again = try await system.server.execute(uri: "/v1/notifications/appstore", method: .post,
                                                        body: ByteBuffer(string: #"{"signedPayload":"\#(request.signedPayload)"}"#))
            #expect(again.status == .ok)
            _ = try await Reconciler(services: system.services).runOnce()
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .answered, "not owed again")
            _ = try await system.device(.delete, "/sim/faults")
        }
    }
}
