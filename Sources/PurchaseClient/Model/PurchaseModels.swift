import AppStoreFormats
import Foundation
// The contract's types (Entitlements, RefusalClass, ErrorCode…) are the SDK's own: an app imports PurchaseClient alone.
@_exported import PurchaseAPI

/// How a purchase ended, as the app shows it.
public enum PurchaseOutcome: Sendable, Hashable {
    /// Paid and granted by the server.
    case granted(Entitlements)
    /// Paid and safe in the journal, but not yet granted (the server was unreachable, or is waiting for Apple): it is
    /// delivered later, by the next upload attempt or the next launch. Show "processing", not "failed".
    case paidPendingDelivery(transactionId: String)
    /// Paid, but the server refused it for a reason its operator can fix (its configuration or policy): the
    /// transaction stays journaled and unfinished and is uploaded again with backoff. Show "paid — we will deliver it".
    case paidDeliveryDelayed(transactionId: String, reason: String)
    /// Paid, but the journal could not be written (disk full, locked keychain). The transaction stays unfinished in
    /// the store's queue, which this client retries from while it runs and at every launch. Show "processing".
    case paidNotJournaled(transactionId: String, reason: String)
    /// Paid with an order of another account (its `appAccountToken`): the server granted it to that account, which
    /// is not the one signed in. Nothing was granted here; the transaction is finished because it reached its owner.
    case deliveredToOwner(transactionId: String)
    /// Ask to Buy: a parent has to approve; the transaction arrives later through ``PurchaseClient/start()``.
    case pendingApproval
    case cancelled
    case failed(PurchaseFailure)
}

/// Why a purchase did not happen.
public struct PurchaseFailure: CodedError {
    public enum Code: String, Sendable, Hashable {
        /// Payments are disabled on this device (parental controls, MDM).
        case paymentsNotAllowed = "payments_not_allowed"
        case unknownProduct = "unknown_product"
        /// The store refused or failed the payment.
        case storeFailed = "store_failed"
        /// The server could not create the order (nothing was charged).
        case orderFailed = "order_failed"
        /// The server would not sign the offer asked for (the customer may not have it, or it is not set up): nothing
        /// was charged.
        case offerRefused = "offer_refused"
        /// The server refused the paid transaction for good (e.g. it belongs to another account).
        case rejectedByServer = "rejected_by_server"
        /// A promoted purchase is held until the app calls ``PurchaseClient/readyForPromotedPurchases()``.
        case notReady = "not_ready"
        /// The server or the store answered with more bytes than the SDK reads.
        case responseTooLarge = "response_too_large"
        /// An entitlements answer whose signature, account or nonce did not verify against the configured key: it
        /// is not believed (a proxy on the device may have forged it).
        case untrustedAnswer = "untrusted_answer"
        /// The server answered for another account than the one signed in (the app's token and ``PurchaseClient/logIn(_:)``
        /// disagree): the answer is not shown.
        case accountMismatch = "account_mismatch"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

}

/// Progress of the purchase flow, for a spinner or a log.
public enum PurchaseEvent: Sendable, Hashable {
    case creatingOrder(productId: String)
    case awaitingPayment(orderId: String)
    case journaled(transactionId: String)
    case uploading(transactionId: String, attempt: Int)
    case granted(transactionId: String)
    case finished(transactionId: String)
    /// The store refused to finish a delivered transaction: it stays in the store's queue (nothing is lost) and the
    /// client finishes it again with backoff.
    case finishFailed(transactionId: String, reason: String)
    case uploadFailed(transactionId: String, reason: String)
    case rejected(transactionId: String, reason: String)
    case pendingApproval(productId: String)
    /// Refused for a reason the server's operator can fix: kept, retried with backoff. "Paid — we will deliver it."
    case deliveryDelayed(transactionId: String, reason: String)
    /// The journal could not be written or read; the store's unfinished queue carries the purchase meanwhile.
    case journalFailed(transactionId: String?, reason: String)
    /// The server granted the transaction to the account whose order it was paid for, not the one signed in.
    case deliveredToOwner(transactionId: String)
    /// Another account's paid transaction waits on this device until that account signs in.
    case waitingForAccount(transactionId: String, accountId: String)
    /// The signed-in account changed (nil: signed out); what the previous account saw is cleared.
    case accountChanged(accountId: String?)
}
