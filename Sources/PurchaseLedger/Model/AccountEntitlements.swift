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
    /// Auto-renewable subscriptions: the latest renewal info the ledger holds of the series; nil before any came.
    public var renewal: Renewal?

    /// An auto-renewable series' renewal state, from Apple's latest renewal info (notifications, the Server API's
    /// statuses): Apple's `JWSRenewalInfoDecodedPayload` fields an app shows.
    public struct Renewal: Codable, Sendable, Hashable {
        public var autoRenewStatus: AutoRenewStatus
        public var autoRenewProductId: String?
        public var expirationIntent: ExpirationIntent?
        public var gracePeriodExpiresDate: Date?
        public var isInBillingRetryPeriod: Bool?
        public var priceIncreaseStatus: PriceIncreaseStatus?
        public var signedDate: Date?

        public init(autoRenewStatus: AutoRenewStatus, autoRenewProductId: String? = nil, expirationIntent: ExpirationIntent? = nil,
                    gracePeriodExpiresDate: Date? = nil, isInBillingRetryPeriod: Bool? = nil, priceIncreaseStatus: PriceIncreaseStatus? = nil,
                    signedDate: Date? = nil) {
            self.autoRenewStatus = autoRenewStatus
            self.autoRenewProductId = autoRenewProductId
            self.expirationIntent = expirationIntent
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.isInBillingRetryPeriod = isInBillingRetryPeriod
            self.priceIncreaseStatus = priceIncreaseStatus
            self.signedDate = signedDate
        }

        /// What the ledger holds of a series, when it holds renewal info (its auto-renew status) at all.
        init?(_ series: SubscriptionRecord) {
            guard let autoRenew = series.autoRenew else { return nil }
            self.init(autoRenewStatus: autoRenew ? .on : .off, autoRenewProductId: series.autoRenewProductId,
                      expirationIntent: series.expirationIntent, gracePeriodExpiresDate: series.gracePeriodExpiresDate,
                      isInBillingRetryPeriod: series.isInBillingRetryPeriod, priceIncreaseStatus: series.priceIncreaseStatus,
                      // A series whose status alone is known (or only its period) carries the epoch.
                      signedDate: series.signedDate.timeIntervalSince1970 > 0 ? series.signedDate : nil)
        }
    }

    public init(name: String, productId: String, transactionId: String, originalTransactionId: String? = nil, appAccountToken: UUID? = nil,
                expiresAt: Date?, state: State, environment: AppStoreEnvironment, renewal: Renewal? = nil) {
        self.renewal = renewal
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
        case renewal = "renewalInfo"
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
        try container.encodeIfPresent(renewal, forKey: .renewal)
    }
}
