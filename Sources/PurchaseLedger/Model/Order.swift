import Foundation

/// An order: the server's record that an account set out to buy a product, created before the payment so that the
/// payment can carry the order's `appAccountToken`.
public struct Order: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, CaseIterable {
        /// Created; no payment seen yet.
        case created
        /// A verified transaction is bound to it and granted.
        case granted
        /// Settled by an operator without a transaction (e.g. refunded outside the store).
        case settled
    }

    public var orderId: String
    public var accountId: String
    public var productId: String
    /// Set on the payment (`Product.purchase(options: [.appAccountToken(...)])`); comes back in the signed transaction.
    public var appAccountToken: UUID
    public var state: State
    public var transactionId: String?
    public var createdAt: Date
    /// After this an unpaid order is stale. A payment that still arrives is granted: a paid order is never lost.
    public var expiresAt: Date
    /// When the app reported that the payment ended with nothing charged, and why (``PurchaseAPI/OrderAbandonRequest/Reason``).
    /// Only the operator's lists read it: binding and granting never do.
    public var abandonedAt: Date?
    public var abandonReason: String?

    public init(orderId: String, accountId: String, productId: String, appAccountToken: UUID, state: State, transactionId: String?,
                createdAt: Date, expiresAt: Date, abandonedAt: Date? = nil, abandonReason: String? = nil) {
        self.abandonedAt = abandonedAt
        self.abandonReason = abandonReason
        self.orderId = orderId
        self.accountId = accountId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.state = state
        self.transactionId = transactionId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
