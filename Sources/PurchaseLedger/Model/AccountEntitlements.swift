import AppStoreFormats
import Foundation

/// What an account owns right now: entitlements and consumable balances.
public struct AccountEntitlements: Codable, Sendable, Hashable {
    public var accountId: String
    /// Active entitlements, by name.
    public var entitlements: [Entitlement]
    /// Currency → balance.
    public var balances: [String: Int64]

    public init(accountId: String, entitlements: [Entitlement], balances: [String: Int64]) {
        self.accountId = accountId
        self.entitlements = entitlements
        self.balances = balances
    }

    /// The active entitlement called `name`, if any.
    public func entitlement(_ name: String) -> Entitlement? { entitlements.first { $0.name == name } }
}

/// One active entitlement.
public struct Entitlement: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable {
        case active
        /// Billing failed; Apple keeps the subscriber served until the grace period ends.
        case gracePeriod
    }

    public var name: String
    /// The product whose purchase grants it now (the one lasting longest when several do).
    public var productId: String
    public var transactionId: String
    /// The subscription series (or the purchase) it comes from: what a device matches the store's renewals to while
    /// the server is unreachable.
    public var originalTransactionId: String?
    /// The `appAccountToken` of the purchase that grants it (a renewal keeps its series' token; a resubscription
    /// through a new order carries that order's): with ``originalTransactionId``, what tells a device's offline copy
    /// this account's renewals from another account's purchase on the same Apple ID. Lower case, as Apple writes it.
    public var appAccountToken: String?
    /// Nil for life.
    public var expiresAt: Date?
    public var state: State
    public var environment: AppStoreEnvironment

    public init(name: String, productId: String, transactionId: String, originalTransactionId: String? = nil, appAccountToken: UUID? = nil,
                expiresAt: Date?, state: State, environment: AppStoreEnvironment) {
        self.name = name
        self.productId = productId
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.appAccountToken = appAccountToken?.lowercasedString
        self.expiresAt = expiresAt
        self.state = state
        self.environment = environment
    }

    private enum CodingKeys: String, CodingKey {
        case name, productId, transactionId, originalTransactionId, appAccountToken, expiresAt, state, environment
    }

    /// Apps are told the ids as they were signed (what their StoreKit knows), not the ledger's keys (``TransactionKey``).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(productId, forKey: .productId)
        try container.encode(TransactionKey.signedId(transactionId, in: environment), forKey: .transactionId)
        try container.encodeIfPresent(originalTransactionId.map { TransactionKey.signedId($0, in: environment) }, forKey: .originalTransactionId)
        try container.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
        try container.encodeIfPresent(expiresAt, forKey: .expiresAt)
        try container.encode(state, forKey: .state)
        try container.encode(environment, forKey: .environment)
    }
}
