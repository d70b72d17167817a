import Foundation

/// What an account owns, as the server answers it (`GET /v1/entitlements`, and in every purchase and restore answer).
public struct Entitlements: Codable, Hashable, Sendable {
    /// One active entitlement.
    public struct Item: Codable, Hashable, Sendable {
        /// Whether the customer is served normally or only while Apple retries a failed renewal. Open: a state a newer
        /// server sends is kept as it came rather than failing the whole answer.
        public struct State: APIOpenEnum {
            public let rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }

            public static let active: Self = "active"
            /// Billing failed; Apple keeps the subscriber served until the grace period ends.
            public static let gracePeriod: Self = "gracePeriod"
        }

        public var name: String
        /// The product whose purchase grants it now (the one lasting longest when several do).
        public var productId: String
        /// As Apple signed it: what the app's StoreKit knows the transaction by.
        public var transactionId: String
        /// The subscription series (or the purchase) it comes from: while the server is unreachable, only the store's
        /// renewals of this series extend the item on a device. Nil from servers before it was sent.
        public var originalTransactionId: String?
        /// The `appAccountToken` of the purchase that grants it: renewals keep it; another account's purchase of the
        /// same subscription on the same Apple ID (a resubscription through its own order) does not.
        public var appAccountToken: UUID?
        /// Nil for life.
        public var expiresAt: Date?
        public var state: State
        /// `Production`, `Sandbox`, `Xcode`… as Apple names it; nil from servers before it was sent.
        public var environment: String?
        /// Auto-renewable subscriptions: Apple's latest renewal info the server holds of the series (will it renew, into
        /// which product, billing retry, price-increase consent, why it expired). Nil for other products, for a series
        /// the server has no renewal info of yet, and from servers before it was sent.
        public var renewalInfo: RenewalInfo?

        public init(name: String, productId: String, transactionId: String, originalTransactionId: String? = nil, appAccountToken: UUID? = nil,
                    expiresAt: Date?, state: State, environment: String? = nil, renewalInfo: RenewalInfo? = nil) {
            self.name = name
            self.productId = productId
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId
            self.appAccountToken = appAccountToken
            self.expiresAt = expiresAt
            self.state = state
            self.environment = environment
            self.renewalInfo = renewalInfo
        }

        /// Whether the subscription renews at the end of its period (Apple's `autoRenewStatus` 1); nil when the server
        /// holds no renewal info of it (or it is not an auto-renewable subscription).
        public var willAutoRenew: Bool? { renewalInfo?.willAutoRenew }

        private enum CodingKeys: String, CodingKey {
            case name, productId, transactionId, originalTransactionId, appAccountToken, expiresAt, state, environment, renewalInfo
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            productId = try container.decode(String.self, forKey: .productId)
            transactionId = try container.decode(String.self, forKey: .transactionId)
            originalTransactionId = try container.decodeIfPresent(String.self, forKey: .originalTransactionId)
            appAccountToken = try container.decodeIfPresent(UUID.self, forKey: .appAccountToken)
            expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
            state = try container.decode(State.self, forKey: .state)
            environment = try container.decodeIfPresent(String.self, forKey: .environment)
            // Lenient: the renewal state is for display, and an answer a newer server shaped otherwise still grants.
            renewalInfo = (try? container.decodeIfPresent(RenewalInfo.self, forKey: .renewalInfo)) ?? nil
        }

        /// The token in lower case, as Apple writes it (Foundation's own encoding is upper case).
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(productId, forKey: .productId)
            try container.encode(transactionId, forKey: .transactionId)
            try container.encodeIfPresent(originalTransactionId, forKey: .originalTransactionId)
            try container.encodeIfPresent(appAccountToken?.lowercased, forKey: .appAccountToken)
            try container.encodeIfPresent(expiresAt, forKey: .expiresAt)
            try container.encode(state, forKey: .state)
            try container.encodeIfPresent(environment, forKey: .environment)
            try container.encodeIfPresent(renewalInfo, forKey: .renewalInfo)
        }
    }

    /// An auto-renewable subscription's renewal state, under the names of Apple's `JWSRenewalInfoDecodedPayload` (and
    /// StoreKit's `Product.SubscriptionInfo.RenewalInfo`): what an app shows as "renews on…", "your plan ends on…",
    /// "update your payment method" or "the price goes up: please confirm". Values as Apple sends them.
    public struct RenewalInfo: Codable, Hashable, Sendable {
        /// 1: the subscription renews at the end of the period; 0: the customer turned automatic renewal off.
        public var autoRenewStatus: Int
        /// The product that renews next (another plan of the group after a downgrade or crossgrade).
        public var autoRenewProductId: String?
        /// Why the subscription expired or will: 1 the customer cancelled, 2 a billing error, 3 the customer did not
        /// consent to a price increase, 4 the product was not available at renewal, 5 another reason.
        public var expirationIntent: Int?
        /// While Apple keeps the subscriber served although the renewal failed to bill.
        public var gracePeriodExpiresDate: Date?
        /// Whether Apple is still trying to bill a renewal that failed.
        public var isInBillingRetryPeriod: Bool?
        /// Only with a price increase: 0 the customer has not yet responded to an increase that needs their consent,
        /// 1 they consented (or were told of an increase that needs no consent).
        public var priceIncreaseStatus: Int?
        /// When Apple signed the renewal info this comes from.
        public var signedDate: Date?

        public init(autoRenewStatus: Int, autoRenewProductId: String? = nil, expirationIntent: Int? = nil, gracePeriodExpiresDate: Date? = nil,
                    isInBillingRetryPeriod: Bool? = nil, priceIncreaseStatus: Int? = nil, signedDate: Date? = nil) {
            self.autoRenewStatus = autoRenewStatus
            self.autoRenewProductId = autoRenewProductId
            self.expirationIntent = expirationIntent
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.isInBillingRetryPeriod = isInBillingRetryPeriod
            self.priceIncreaseStatus = priceIncreaseStatus
            self.signedDate = signedDate
        }

        /// `autoRenewStatus` 1.
        public var willAutoRenew: Bool { autoRenewStatus == 1 }
        /// A price increase awaits the customer's consent (`priceIncreaseStatus` 0): without it the subscription
        /// expires at renewal. StoreKit shows the consent sheet (`Message.Reason.priceIncreaseConsent`).
        public var awaitsPriceIncreaseConsent: Bool { priceIncreaseStatus == 0 }
    }

    public var accountId: String
    public var entitlements: [Item]
    /// Consumable currency → balance.
    public var balances: [String: Int64]
    /// Never sent by the server: set by the SDK when the answer comes from the device's offline copy (the server was
    /// unreachable), to when the server last answered it. Nil for a live answer.
    public var cachedAt: Date?

    public init(accountId: String, entitlements: [Item] = [], balances: [String: Int64] = [:], cachedAt: Date? = nil) {
        self.accountId = accountId
        self.entitlements = entitlements
        self.balances = balances
        self.cachedAt = cachedAt
    }

    /// Whether the entitlement called `name` is active.
    public func has(_ name: String) -> Bool { entitlements.contains { $0.name == name } }

    /// The active entitlement called `name`, if any.
    public func entitlement(_ name: String) -> Item? { entitlements.first { $0.name == name } }
}

/// `GET /v1/entitlements`: what the account owns, and, when the request carried an `X-Entitlements-Nonce`, the same
/// signed by the server (`signedEntitlements`, a JWS) so that a device believes only what the server said for it.
public struct EntitlementsReply: Codable, Hashable, Sendable {
    public var entitlements: Entitlements
    public var signedEntitlements: String?

    public init(entitlements: Entitlements, signedEntitlements: String?) {
        self.entitlements = entitlements
        self.signedEntitlements = signedEntitlements
    }

    private enum Keys: String, CodingKey { case signedEntitlements }

    /// The entitlements' own fields at the top level, beside `signedEntitlements`.
    public init(from decoder: any Decoder) throws {
        entitlements = try Entitlements(from: decoder)
        signedEntitlements = try decoder.container(keyedBy: Keys.self).decodeIfPresent(String.self, forKey: .signedEntitlements)
    }

    public func encode(to encoder: any Encoder) throws {
        try entitlements.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(signedEntitlements, forKey: .signedEntitlements)
    }
}
