import AppStoreFormats
import Foundation

/// Customers asking for their money back: a refund request sends the developer a `CONSUMPTION_REQUEST`, the developer
/// may answer with Send Consumption Information, and Apple then decides (`REFUND` or `REFUND_DECLINED`).
///
/// Apple weighs many things the simulator cannot know; it decides by the developer's answer, so that a test sees that
/// answer take effect: `GRANT_FULL` or no answer refunds all, `GRANT_PRORATED` refunds the part not consumed (the
/// time left in the period for an auto-renewable subscription, whose consumption Apple computes itself), `DECLINE`
/// declines.
extension StoreEngine {
    /// What became of a refund request.
    public enum RefundDecision: Sendable, Equatable {
        /// Refunded: `percentage` milliunits of it (100000 is all).
        case refunded(percentage: Int)
        case declined
    }

    /// The customer asks Apple to refund `transactionId`. Returns false when it cannot be asked for: no such
    /// transaction (or, with `account`, not that customer's), already refunded, a family member's copy (only the
    /// purchaser may ask), or a request still open. `fromApp`: asked in the app's refund sheet
    /// (`beginRefundRequest(for:in:)`), after which Apple turns the subscription's auto-renewal off
    /// (DID_CHANGE_RENEWAL_STATUS, AUTO_RENEW_DISABLED, in its table of notifications).
    public func requestRefund(_ transactionId: String, reason: ConsumptionRequestReason = .unintendedPurchase, account: String? = nil,
                              fromApp: Bool = false) throws -> Bool {
        guard let stored = state.transactions[transactionId], stored.payload.revocationDate == nil, stored.sharedFrom == nil,
              account.map({ $0 == stored.account }) ?? true else { return false }
        var requests = state.refundRequests ?? [:]
        guard requests[transactionId].map({ $0.decision != nil }) ?? true else { return false }
        requests[transactionId] = .init(transactionId: transactionId, reason: reason, requestedAt: clock.now)
        state.refundRequests = requests
        try notify(.consumptionRequest, nil, transactionId: transactionId, consumptionRequestReason: reason)
        if fromApp, stored.payload.type == .autoRenewableSubscription, let original = stored.payload.originalTransactionId,
           state.subscriptions[original]?.autoRenewStatus == true {
            _ = try setAutoRenew(originalTransactionId: original, enabled: false)
        }
        try persist()
        return true
    }

    /// Keeps the developer's consumption information for `transactionId` (already checked against Apple's rules by
    /// the Server API route). Apple accepts it for a transaction with no open request too; it then informs nothing.
    public func recordConsumption(_ transactionId: String, _ request: ConsumptionRequest) throws {
        guard var open = state.refundRequests?[transactionId], open.decision == nil else { return }
        open.consumption = request
        open.consumptionSentAt = clock.now
        state.refundRequests?[transactionId] = open
        try persist()
    }

    /// The refund request for `transactionId` as it stands: its reason, what the developer sent, and Apple's decision.
    public func refundRequest(_ transactionId: String) -> (reason: ConsumptionRequestReason, consumption: ConsumptionRequest?, decision: String?)? {
        state.refundRequests?[transactionId].map { ($0.reason, $0.consumption, $0.decision) }
    }

    /// Apple decides the open request for `transactionId` (see the type's note). Nil when none is open.
    public func decideRefund(_ transactionId: String) throws -> RefundDecision? {
        guard var open = state.refundRequests?[transactionId], open.decision == nil, let payload = state.transactions[transactionId]?.payload else {
            return nil
        }
        let decision: RefundDecision
        switch open.consumption?.refundPreference {
        case .decline?:
            decision = .declined
        case .grantProrated?:
            decision = .refunded(percentage: proratedShare(payload, consumed: open.consumption?.consumptionPercentage))
        default:
            decision = .refunded(percentage: 100_000)
        }
        switch decision {
        case .declined:
            open.decision = NotificationTypeV2.refundDeclined.rawValue
            state.refundRequests?[transactionId] = open
            try notify(.refundDeclined, nil, transactionId: transactionId)
            try persist()
        case .refunded(let percentage):
            open.decision = NotificationTypeV2.refund.rawValue
            state.refundRequests?[transactionId] = open
            // Apple's revocation reason for a refund a customer asked for: some other reason (0), not an app issue.
            _ = try refund(transactionId, reason: .refundedForOtherReason, percentage: percentage < 100_000 ? percentage : nil)
        }
        return decision
    }

    /// The part of `payload` to refund when the developer prefers a prorated refund: what was not consumed, by the
    /// developer's measure, or by the time left in the period for a subscription. At least 1 milliunit.
    private func proratedShare(_ payload: JWSTransactionDecodedPayload, consumed: Int?) -> Int {
        if let consumed { return max(1, 100_000 - min(100_000, max(0, consumed))) }
        guard let start = payload.purchaseDate, let end = payload.expiresDate, end > start else { return 100_000 }
        let left = end.timeIntervalSince(clock.now) / end.timeIntervalSince(start)
        return max(1, min(100_000, Int((left * 100_000).rounded())))
    }
}
