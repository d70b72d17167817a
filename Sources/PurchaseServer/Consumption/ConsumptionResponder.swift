import AppStoreClient
import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger

/// How the server answers Apple's `CONSUMPTION_REQUEST` (a customer asked for a refund): with Send Consumption
/// Information (API 1.19), for customers who consented, as the configured policy prefers.
public struct ConsumptionSettings: Sendable, Hashable {
    public var policy: RefundPolicy
    /// Whether the app offered a free sample, a trial or a description of what a purchase brings before it was made.
    public var sampleContentProvided: Bool
    public init(policy: RefundPolicy, sampleContentProvided: Bool = false) {
        self.policy = policy
        self.sampleContentProvided = sampleContentProvided
    }
}

/// Sends the answers owed to Apple for `CONSUMPTION_REQUEST`s. The ledger writes each owed answer with its notification;
/// a sender claims it (one at a time across replicas), reads the customer's consent and the facts just before sending,
/// and settles it: answered, silent (no consent, or nobody here got the purchase), refused by Apple, or owed again when
/// Apple could not be reached — then the reconciler sends it on its next passes until Apple's 12 hours are up.
struct ConsumptionResponder {
    let services: PurchaseServices

    /// Sends the answer owed for `notificationUUID`, if it is owed and unclaimed. Never throws for Apple being away: the
    /// answer stays owed. With `deadline`, one attempt of at most that long instead of the configured retries.
    func answer(notificationUUID: String, within deadline: Duration? = nil) async throws {
        guard let settings = services.consumption, let serverAPI = services.verifier.apple.serverAPI else { return }
        let ledger = services.ledger
        guard let held = try await ledger.claimConsumptionAnswer(notificationUUID: notificationUUID, now: services.now()) else { return }
        let transactionId = held.transactionId
        let settle = { (state: ConsumptionAnswer.State, accountId: String?, body: String?, metric: String) in
            try await services.ledger.settleConsumptionAnswer(notificationUUID: notificationUUID, claim: held.claim, state: state,
                                                              accountId: accountId, body: body, now: services.now())
            services.metrics.consumptionAnswer(metric)
        }
        guard let facts = try await ledger.consumptionFacts(transactionId: transactionId) else {
            try await settle(.silent, nil, #"{"silence":"not_delivered"}"#, "not_delivered")
            return
        }
        switch ConsumptionRules.answer(facts, policy: settings.policy, sampleContentProvided: settings.sampleContentProvided, now: services.now()) {
        case .failure(let reason):
            try await settle(.silent, facts.accountId, #"{"silence":"\#(reason.silence.rawValue)"}"#, reason.silence.rawValue)
        case .success(let request):
            let sent = String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(request), as: UTF8.self)
            do {
                let client = serverAPI.serving(facts.transaction.environment)
                try await (deadline.map { client.retrying(RetryPolicy(attempts: 1, timeout: $0)) } ?? client).sendConsumptionInformation(transactionId, request)
                try await settle(.answered, facts.accountId, sent, "sent")
            } catch let error as AppStoreClientError where error.code == .rejected {
                // Apple will not take it: sending it again cannot help. Kept for the operator with Apple's code.
                try await settle(.refused, facts.accountId, #"{"refused":\#(error.apiErrorCode?.rawValue ?? 0),"sent":\#(sent)}"#, "refused")
            } catch {
                try await settle(.pending, facts.accountId, nil, "postponed")
            }
        }
    }

    /// One pass over the answers still owed (the reconciler's).
    func answerOwed() async throws -> Int {
        guard services.consumption != nil, services.verifier.apple.serverAPI != nil else { return 0 }
        let owed = try await services.ledger.owedConsumptionAnswers(now: services.now())
        for answer in owed { try await self.answer(notificationUUID: answer.notificationUUID) }
        return owed.count
    }

}
