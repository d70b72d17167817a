import AppStoreFormats
import Foundation

/// Request Transaction Refund of the Advanced Commerce API.
extension StoreEngine {
    /// Request Transaction Refund: refunds items of one transaction — `FULL`, `PRORATED` (the time left of a
    /// subscription's latest period) or `CUSTOM` (`refundAmount`) — revoking those marked `revoke`. Apple sends REFUND;
    /// the transaction is revoked (access ends, `REFUND_FULL`) only when all its items are; revoked items of a
    /// subscription's current period do not renew. Answers the transaction, signed.
    public func advancedCommerceRequestRefund(transactionId: String, _ request: AdvancedCommerceRequestRefundRequest,
                                              fingerprint: String) throws -> Result<AdvancedCommerceTransactionResponse, AdvancedCommerceRefusal> {
        try processSubscriptions()
        if let refusal = AdvancedCommerceCheck.check(request.requestInfo) { return .failure(refusal) }
        guard request.refundRiskingPreference != nil else { return .failure(.init(.nullRefundRisking, "Refund risking preference is required.")) }
        guard let items = request.items, !items.isEmpty else { return .failure(.init(.atLeastOneItem, "At least one item is required.")) }
        guard items.count <= AdvancedCommerceLimits.maxItems else { return .failure(.init(.itemLimitExceeded, "The number of items exceeds the limit.")) }
        guard let stored = state.transactions[transactionId] else { return .failure(.init(.transactionIdNotFound, "Transaction id not found.")) }
        if let storefront = request.storefront, storefront != state.accounts[stored.account]?.storefront {
            return .failure(.init(.mismatchedStorefront, "The storefront is not the customer's."))
        }
        var payload = stored.payload
        guard var info = payload.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self), var sold = info.items, stored.sharedFrom == nil else {
            return .failure(.init(.subscriptionNotEligible, "Not an Advanced Commerce transaction."))
        }
        let referenceId = request.requestInfo?.requestReferenceId?.lowercased() ?? ""
        if let served = state.advancedCommerceRequests?[referenceId] {
            guard served == fingerprint else { return .failure(.init(.repeatedRequestReferenceId, "The request reference id was used by another request.")) }
            return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
        }
        guard payload.revocationDate == nil else { return .failure(.init(.alreadyRefunded, "The transaction was refunded already.")) }
        // Apple's sandbox declines a whole request or none of it.
        let declines = items.filter { $0.refundReason == "SIMULATE_REFUND_DECLINE" }.count
        guard declines == 0 || declines == items.count else {
            return .failure(.init(.partialSimulateRefundDecline, "A simulated decline covers every item of the request or none."))
        }
        let now = clock.now
        let series = payload.originalTransactionId.flatMap { state.subscriptions[$0] }
        var declined = false
        for change in items {
            guard let sku = change.sku, let index = sold.firstIndex(where: { $0.sku == sku }) else { return .failure(.init(.invalidSKU, "Invalid SKU.")) }
            guard change.revoke != nil else { return .failure(.init(.generalBadRequest, "revoke is required.")) }
            guard let type = change.refundType else { return .failure(.init(.nullRefundType, "Refund type is required.")) }
            guard AdvancedCommerceLimits.refundTypes.contains(type) else { return .failure(.init(.invalidRefundType, "Invalid refund type.")) }
            guard let reason = change.refundReason else { return .failure(.init(.nullRefundReason, "Refund reason is required.")) }
            guard AdvancedCommerceLimits.refundReasons.contains(reason) else { return .failure(.init(.invalidRefundReason, "Invalid refund reason.")) }
            if reason == "SIMULATE_REFUND_DECLINE" {
                guard environment != .production else { return .failure(.init(.simulateRefundDeclineOnlyInSandbox, "A simulated refund decline is for the sandbox only.")) }
                declined = true
                continue
            }
            guard sold[index].revocationDate == nil else { return .failure(.init(.alreadyRefunded, "The item was refunded already.")) }
            let price = sold[index].price ?? 0
            let amount: Int64
            switch type {
            case "CUSTOM":
                guard let custom = change.refundAmount else { return .failure(.init(.nullRefundAmount, "Refund amount is required for a CUSTOM refund.")) }
                guard custom >= 0 else { return .failure(.init(.negativeRefundAmount, "The refund amount is negative.")) }
                amount = min(custom, price)
            case "PRORATED":
                guard change.refundAmount == nil else { return .failure(.init(.refundAmountWithoutCustom, "A refund amount needs refundType CUSTOM.")) }
                guard let series, series.latestTransactionId == transactionId, let start = payload.purchaseDate, let end = payload.expiresDate else {
                    return .failure(.init(.proratedOnlyLatestTransaction, "Prorated refunds are for a subscription's latest transaction."))
                }
                let left = max(0, min(1, end.timeIntervalSince(now) / max(1, end.timeIntervalSince(start))))
                amount = Int64(min((Double(price) * left).rounded(), Double(AdvancedCommerceLimits.maxPrice)))
            default:
                guard change.refundAmount == nil else { return .failure(.init(.refundAmountWithoutCustom, "A refund amount needs refundType CUSTOM.")) }
                amount = price
            }
            // Never more than what is left of the item's price after earlier refunds.
            let left = max(0, price - AdvancedCommerceTerms.sum((sold[index].refunds ?? []).map { $0.refundAmount ?? 0 }))
            guard left > 0 || change.revoke == true else { return .failure(.init(.alreadyRefunded, "The item was refunded in full already.")) }
            sold[index].refunds = (sold[index].refunds ?? []) + [AdvancedCommerceRefund(refundAmount: min(amount, left), refundDate: now, refundReason: reason,
                                                                                         refundType: type)]
            if change.revoke == true { sold[index].revocationDate = now }
        }
        var requests = state.advancedCommerceRequests ?? [:]
        requests[referenceId] = fingerprint
        state.advancedCommerceRequests = requests
        if declined {
            try notify(.refundDeclined, nil, transactionId: transactionId)
            try persist()
            return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
        }
        info.items = sold
        payload.advancedCommerceInfo = try AppStoreJSONValue(encoding: info)
        state.transactions[transactionId]?.payload = payload
        let reason: RevocationReason = items.contains { $0.refundReason == "FULFILLMENT_ISSUE" } ? .refundedDueToIssue : .refundedForOtherReason
        if sold.allSatisfy({ $0.revocationDate != nil }) {
            // Every item revoked: the whole purchase is (REFUND_FULL: a consumable's credit goes, whatever money came
            // back — the items carry the amounts), and the series ends, as any refund of its period ends it.
            _ = try refund(transactionId, reason: reason, percentage: 100_000)
        } else {
            // Revoked items of a subscription's current period do not renew.
            if let original = payload.originalTransactionId, var series = state.subscriptions[original], series.latestTransactionId == transactionId,
               var terms = series.advancedCommerce {
                let revoked = Set(sold.filter { $0.revocationDate != nil }.compactMap(\.sku))
                terms.items.removeAll { revoked.contains($0.sku) }
                series.advancedCommerce = terms
                state.subscriptions[original] = series
            }
            try notify(.refund, nil, transactionId: transactionId)
            try persist()
        }
        return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
    }
}
