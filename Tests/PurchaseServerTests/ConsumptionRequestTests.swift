import Foundation
import NIOCore
import PurchaseLedger
import PurchaseServer
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
        #expect(["granted", "alreadyGranted"].contains(reply["outcome"] as? String))
        return (account, store, try #require(purchase["transactionId"] as? String))
    }

    func consent(_ system: System, _ account: String, _ consented: Bool) async throws {
        let (status, reply) = try await system.call(.put, "/v1/consumption-consent", as: account, ["consented": consented])
        #expect(status == .ok)
        #expect(reply["consented"] as? Bool == consented)
    }

    /// The customer asks for a refund; returns what the developer sent Apple (nil: nothing).
    func askForRefund(_ system: System, _ transactionId: String) async throws -> [String: Any]? {
        _ = try await system.device(.post, "/sim/transactions/\(transactionId)/refund-request", ["reason": "UNSATISFIED_WITH_PURCHASE"])
        let request = try await system.device(.get, "/sim/transactions/\(transactionId)/refund-request")
        #expect(request["reason"] as? String == "UNSATISFIED_WITH_PURCHASE")
        return request["consumption"] as? [String: Any]
    }

    @Test("Prorated: 40 of 100 coins spent, Apple hears GRANT_PRORATED at 40 %, refunds 60 %, and the ledger claws back 60 coins",
          arguments: LedgerKind.allCases)
    func prorated(_ kind: LedgerKind) async throws {
        try await run(kind, policy: .prorated) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "prorated")
            let (spent, _) = try await system.call(.post, "/v1/consumables/coins/spend", as: account, ["amount": 40, "idempotencyKey": "k1"])
            #expect(spent == .ok)
            try await consent(system, account, true)
            let sent = try #require(try await askForRefund(system, id))
            #expect(sent["customerConsented"] as? Bool == true)
            #expect(sent["deliveryStatus"] as? String == "DELIVERED")
            #expect(sent["sampleContentProvided"] as? Bool == false)
            #expect(sent["refundPreference"] as? String == "GRANT_PRORATED")
            #expect(sent["consumptionPercentage"] as? Int == 40_000)
            let decided = try await system.device(.post, "/sim/transactions/\(id)/refund-request/decide")
            #expect(decided["decision"] as? String == "REFUND")
            #expect(decided["revocationPercentage"] as? Int == 60_000)
            #expect(try await system.entitlements(account).balance("coins") == 0, "60 of the 60 left clawed back")
            let timeline = try await system.admin(.get, "/admin/accounts/\(account)/timeline").1
            let audit = (timeline["timeline"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "audit" }.compactMap { $0["detail"] as? String }
            #expect(audit.contains { $0.contains("consumption_consent_given") } && audit.contains { $0.contains("consumption_request_answered") }, "\(audit)")
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
            let decided = try await system.device(.post, "/sim/transactions/\(id)/refund-request/decide")
            #expect(decided["decision"] as? String == "REFUND" && decided["revocationPercentage"] as? Int == 100_000)
            #expect(try await system.entitlements(account).balance("coins") == 0)
        }
    }

    @Test("Prefer no refund: DECLINE is sent, Apple declines (REFUND_DECLINED) and the credit stays; an auto-renewable gets no percentage")
    func declined() async throws {
        try await run(.sqlite, policy: .preferNoRefund) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "declined")
            try await consent(system, account, true)
            let sent = try #require(try await askForRefund(system, id))
            #expect(sent["refundPreference"] as? String == "DECLINE")
            #expect(sent["consumptionPercentage"] as? Int == 0, "nothing spent")
            let decided = try await system.device(.post, "/sim/transactions/\(id)/refund-request/decide")
            #expect(decided["decision"] as? String == "REFUND_DECLINED")
            #expect(try await system.entitlements(account).balance("coins") == 100)

            let (subscriber, _, renewalId) = try await bought(Self.monthly, system, prefix: "subscriber")
            try await consent(system, subscriber, true)
            let subscription = try #require(try await askForRefund(system, renewalId))
            #expect(subscription["refundPreference"] as? String == "DECLINE")
            #expect(subscription["consumptionPercentage"] == nil, "Apple computes an auto-renewable's consumption itself (4000209 otherwise)")
        }
    }

    @Test("RESCIND_CONSENT (a guardian withdrew consent for the app) stops the answers for that customer; a later choice of the customer's stands")
    func rescinded() async throws {
        try await run(.sqlite, policy: .preferRefund) { system in
            let (account, store, id) = try await bought(Self.coins, system, prefix: "minor")
            try await consent(system, account, true)
            _ = try await system.device(.post, "/sim/accounts/\(store)/rescind-consent")
            let held = try await system.call(.get, "/v1/consumption-consent", as: account).1
            #expect(held["consented"] as? Bool == false)
            #expect(held["source"] as? String == "rescind_consent")
            #expect(try await askForRefund(system, id) == nil)
            // The notice delivered again (Apple retries) after the customer consented anew changes nothing.
            try await system.advance(by: 1)
            try await consent(system, account, true)
            let rescind = try #require(await system.engine.notifications().last { $0.type == .rescindConsent })
            let redelivered = try await system.server.execute(uri: "/v1/notifications/appstore", method: .post,
                                                              body: ByteBuffer(string: #"{"signedPayload":"\#(rescind.signedPayload)"}"#))
            #expect(redelivered.status == .ok)
            #expect(try await system.call(.get, "/v1/consumption-consent", as: account).1["consented"] as? Bool == true)
        }
    }

    @Test("Apple unreachable when the request arrives: the notification is taken, the answer stays owed, and the reconciler sends it once",
          arguments: LedgerKind.allCases)
    func appleDownThenReconciled(_ kind: LedgerKind) async throws {
        try await run(kind, policy: .preferRefund) { system in
            let (account, _, id) = try await bought(Self.coins, system, prefix: "outage")
            try await consent(system, account, true)
            let refuseConsumption: [String: Any] = ["seed": 1, "rules": [["pathPrefix": "/inApps/v2/transactions/consumption", "errorRate": 1.0,
                                                                         "errorStatus": 503]]]
            _ = try await system.device(.post, "/sim/faults", refuseConsumption)
            _ = try await system.device(.post, "/sim/transactions/\(id)/refund-request")
            #expect(try await system.device(.get, "/sim/transactions/\(id)/refund-request")["consumption"] == nil)
            let request = try #require(await system.engine.notifications().last { $0.type == .consumptionRequest })
            #expect(request.attempts.last?.sendAttemptResult == .success, "the notification itself is stored and taken")
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .pending)
            // Still away at the reconciler's pass: owed still. (On PostgreSQL the suite shares one database: a pass may
            // also try other tests' owed answers, so this one's state is what is judged.)
            #expect(try await Reconciler(services: system.services).runOnce().consumptionAnswersTried >= 1)
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .pending)
            _ = try await system.device(.delete, "/sim/faults")
            #expect(try await Reconciler(services: system.services).runOnce().consumptionAnswersTried >= 1)
            let sent = try #require(try await system.device(.get, "/sim/transactions/\(id)/refund-request")["consumption"] as? [String: Any])
            #expect(sent["refundPreference"] as? String == "GRANT_FULL")
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .answered)
            // Answered once: delivered again while Apple would refuse any call, nothing is sent and nothing owed.
            _ = try await system.device(.post, "/sim/faults", refuseConsumption)
            let again = try await system.server.execute(uri: "/v1/notifications/appstore", method: .post,
                                                        body: ByteBuffer(string: #"{"signedPayload":"\#(request.signedPayload)"}"#))
            #expect(again.status == .ok)
            _ = try await Reconciler(services: system.services).runOnce()
            #expect(try await system.services.ledger.consumptionAnswer(notificationUUID: request.uuid)?.state == .answered, "not owed again")
            _ = try await system.device(.delete, "/sim/faults")
        }
    }
}
