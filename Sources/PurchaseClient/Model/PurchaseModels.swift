import AppStoreFormats
import Foundation

/// What the account owns, as the purchase server answers it.
public struct Entitlements: Codable, Sendable, Hashable {
    public struct Item: Codable, Sendable, Hashable {
        public var name: String
        public var productId: String
        public var transactionId: String
        /// Nil for life.
        public var expiresAt: Date?
        /// `active` or `gracePeriod`.
        public var state: String
    }

    public var accountId: String
    public var entitlements: [Item]
    public var balances: [String: Int64]

    public init(accountId: String, entitlements: [Item] = [], balances: [String: Int64] = [:]) {
        self.accountId = accountId
        self.entitlements = entitlements
        self.balances = balances
    }

    /// Whether the entitlement called `name` is active.
    public func has(_ name: String) -> Bool { entitlements.contains { $0.name == name } }
}

/// How a purchase ended, as the app shows it.
public enum PurchaseOutcome: Sendable, Hashable {
    /// Paid and granted by the server.
    case granted(Entitlements)
    /// Paid and safe in the journal, but not yet granted (the server was unreachable, or is waiting for Apple): it is
    /// delivered later, by the next upload attempt or the next launch. Show "processing", not "failed".
    case paidPendingDelivery(transactionId: String)
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
        /// The server refused the paid transaction for good (e.g. it belongs to another account).
        case rejectedByServer = "rejected_by_server"
        /// A promoted purchase is held until the app calls ``PurchaseClient/readyForPromotedPurchases()``.
        case notReady = "not_ready"
        /// The server or the store answered with more bytes than the SDK reads.
        case responseTooLarge = "response_too_large"
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
    case uploadFailed(transactionId: String, reason: String)
    case rejected(transactionId: String, reason: String)
    case pendingApproval(productId: String)
}
