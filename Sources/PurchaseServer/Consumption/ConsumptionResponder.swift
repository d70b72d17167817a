import AppStoreClient
import AppStoreFormats
import Foundation
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

/// Answers one `CONSUMPTION_REQUEST`, once per notification: the answer (or why none was sent) is kept in the ledger,
/// so a redelivered notification is not answered again. When Apple cannot be reached the error propagates and the
/// notification is answered 503: Apple delivers it again, and the answer is retried then (Apple wants it within
/// 12 hours; its retries come 1 and 12 hours later).
struct ConsumptionResponder {
    let services: PurchaseServer.Services

    func answer(_ event: NotificationEvent) async throws {
        guard event.type == .consumptionRequest, let settings = services.consumption, let serverAPI = services.verifier.apple.serverAPI,
              let transaction = event.transaction, let transactionId = transaction.transactionId else { return }
        let ledger = services.ledger
        guard try await ledger.consumptionAnswer(notificationUUID: event.notificationUUID) == nil,
              let facts = try await ledger.consumptionFacts(transactionId: transactionId) else { return }
        let now = services.now()
        let body: String
        switch ConsumptionRules.answer(facts, policy: settings.policy, sampleContentProvided: settings.sampleContentProvided, now: now) {
        case .failure(let reason):
            body = #"{"silence":"\#(reason.silence.rawValue)"}"#
            services.metrics.consumptionAnswer(reason.silence.rawValue)
        case .success(let request):
            let sent = String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(request), as: UTF8.self)
            do {
                try await serverAPI.serving(transaction.environment).sendConsumptionInformation(transactionId, request)
                body = sent
                services.metrics.consumptionAnswer("sent")
            } catch let error as AppStoreClientError where error.code == .rejected {
                // Apple will not take it: sending it again cannot help. Kept for the operator with Apple's code.
                body = #"{"refused":\#(error.apiErrorCode?.rawValue ?? 0),"sent":\#(sent)}"#
                services.metrics.consumptionAnswer("refused")
            }
        }
        try await ledger.recordConsumptionAnswer(ConsumptionAnswer(notificationUUID: event.notificationUUID, transactionId: transactionId,
                                                                   accountId: facts.accountId, body: body, answeredAt: now))
    }
}
