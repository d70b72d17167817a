import AppStoreFormats
import Foundation

/// The App Store's own record of what it charged, refunded and renewed: the truth a purchase server is judged against
/// (the history explorer reads it after every history).
extension StoreEngine {
    /// One transaction as the App Store knows it.
    public struct RecordedTransaction: Sendable {
        public var payload: JWSTransactionDecodedPayload
        /// The customer account it belongs to.
        public var account: String
        /// Devices on which it is still unfinished.
        public var unfinishedOn: Set<String>
        /// A family member's copy: the purchaser's transaction id it mirrors (nothing was charged for it).
        public var sharedFrom: String?
    }

    /// An auto-renewable series as the App Store judges it now.
    public struct RecordedSeries: Sendable {
        public var originalTransactionId: String
        public var account: String
        public var latestTransactionId: String
        public var productId: String
        public var expiresDate: Date
        public var status: SubscriptionStatus
        public var gracePeriodExpiresDate: Date?
        public var sharedFrom: String?
    }

    /// An Ask to Buy or interrupted purchase waiting for approval.
    public struct RecordedRequest: Sendable {
        public var requestId: String
        public var account: String
        public var device: String
        public var productId: String
    }

    /// Every transaction in the order it was minted.
    public func recordedTransactions() -> [RecordedTransaction] {
        state.transactionOrder.compactMap { id in
            state.transactions[id].map { RecordedTransaction(payload: $0.payload, account: $0.account, unfinishedOn: $0.unfinishedOn, sharedFrom: $0.sharedFrom) }
        }
    }

    /// Every auto-renewable series, by original transaction id order.
    public func recordedSeries() -> [RecordedSeries] {
        state.subscriptions.values.sorted { $0.originalTransactionId < $1.originalTransactionId }.map {
            RecordedSeries(originalTransactionId: $0.originalTransactionId, account: $0.account, latestTransactionId: $0.latestTransactionId,
                           productId: $0.productId, expiresDate: $0.expiresDate, status: $0.status,
                           gracePeriodExpiresDate: $0.gracePeriodExpiresDate, sharedFrom: $0.sharedFrom)
        }
    }

    /// Purchases waiting for a parent's approval (or for the customer to complete them), oldest request id first.
    public func recordedRequests() -> [RecordedRequest] {
        state.pendingPurchases.sorted { $0.key < $1.key }.map {
            RecordedRequest(requestId: $0.key, account: $0.value.account, device: $0.value.device, productId: $0.value.productId)
        }
    }

    /// Notifications not delivered yet that Apple will still send (due now or at a retry), oldest first.
    public func undeliveredNotifications() -> [(uuid: String, signedPayload: String, failedAttempts: Int)] {
        state.notifications.filter { $0.nextAttempt != nil }.map { ($0.uuid, $0.signedPayload, $0.attempts.count) }
    }
}
