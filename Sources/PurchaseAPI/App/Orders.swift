import Foundation

/// `POST /v1/orders`: an order for a product; the app pays with its `appAccountToken`.
public struct OrderRequest: Codable, Hashable, Sendable {
    public var productId: String
    /// The account the app means to order for: a bearer token of another account is refused (409 `account_mismatch`,
    /// no order made). The app's sign-in may change while it fetches the token for this call; an order made for the
    /// other account would then be paid and journaled for the first one.
    public var expectedAccountId: String?
    /// The device's jailbreak checks, as the purchase upload carries them: under the `refuse` device-integrity policy a
    /// suspicious report is refused here (403 `device_integrity`, no order made), before the customer is charged —
    /// refusing the upload afterwards would leave a paid purchase undelivered.
    public var deviceIntegrity: DeviceIntegrityReport?

    public init(productId: String, expectedAccountId: String? = nil, deviceIntegrity: DeviceIntegrityReport? = nil) {
        self.productId = productId
        self.expectedAccountId = expectedAccountId
        self.deviceIntegrity = deviceIntegrity
    }
}

/// The order made (201): pay with its `appAccountToken` before `expiresAt`.
public struct OrderReply: Codable, Hashable, Sendable {
    public var orderId: String
    public var productId: String
    public var appAccountToken: UUID
    public var expiresAt: Date

    public init(orderId: String, productId: String, appAccountToken: UUID, expiresAt: Date) {
        self.orderId = orderId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.expiresAt = expiresAt
    }

    private enum CodingKeys: String, CodingKey { case orderId, productId, appAccountToken, expiresAt }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(orderId, forKey: .orderId)
        try container.encode(productId, forKey: .productId)
        try container.encode(appAccountToken.lowercased, forKey: .appAccountToken)
        try container.encode(expiresAt, forKey: .expiresAt)
    }
}

/// `POST /v1/orders/{orderId}/abandon`: the app says the order's payment ended with nothing charged, so that the
/// operator's list of lost orders (`stuck`) holds only orders that may have been paid. It changes nothing else: a
/// payment for the order that still arrives (the store was wrong, Ask to Buy approved later) is granted as ever.
public struct OrderAbandonRequest: Codable, Hashable, Sendable {
    /// Closed: the client sends it, and an unknown one is refused (400) rather than recorded.
    public enum Reason: String, Codable, Hashable, Sendable, CaseIterable {
        /// The customer closed the payment sheet.
        case cancelled
        /// The store refused the payment before charging (not sold in the storefront, payments not allowed, an offer
        /// refused…).
        case failed
        /// The app never started the payment (its journal could not be written, the sign-in changed, a signature it
        /// needed was refused).
        case notStarted
        /// The store answered with a transaction the Apple ID already owned (a non-consumable, an active subscription's
        /// same product), bought through another order: nothing was charged for this one.
        case alreadyOwned
    }

    public var reason: Reason

    public init(reason: Reason) { self.reason = reason }
}

/// `POST /v1/orders/{orderId}/abandon`'s answer: whether the report was recorded. It is not for an order no longer open,
/// one already reported, or one a payment was seen for (that evidence wins over the report).
public struct OrderAbandonReply: Codable, Hashable, Sendable {
    public var orderId: String
    /// `created`, `granted` or `settled`.
    public var state: String
    public var recorded: Bool

    public init(orderId: String, state: String, recorded: Bool) {
        self.orderId = orderId
        self.state = state
        self.recorded = recorded
    }
}

/// `POST /v1/consumables/{currency}/spend`: once per idempotency key, never overdrawn.
public struct SpendRequest: Codable, Hashable, Sendable {
    public var amount: Int64
    /// Also accepted as the `Idempotency-Key` header.
    public var idempotencyKey: String?

    public init(amount: Int64, idempotencyKey: String?) {
        self.amount = amount
        self.idempotencyKey = idempotencyKey
    }
}

public struct SpendReply: Codable, Hashable, Sendable {
    public var currency: String
    /// After the spend.
    public var balance: Int64

    public init(currency: String, balance: Int64) {
        self.currency = currency
        self.balance = balance
    }
}

/// `PUT /v1/consumption-consent`.
public struct ConsentRequest: Codable, Hashable, Sendable {
    public var consented: Bool
    public init(consented: Bool) { self.consented = consented }
}

/// `GET|PUT /v1/consumption-consent`: whether the customer agreed to have consumption data sent to Apple with their
/// refund requests.
public struct ConsentReply: Codable, Hashable, Sendable {
    public var consented: Bool
    /// When it last changed; absent when the customer never answered.
    public var changedAt: Date?
    /// `app`, or `rescind_consent` when Apple said a parent or guardian withdrew consent for the app.
    public var source: String?

    public init(consented: Bool, changedAt: Date?, source: String?) {
        self.consented = consented
        self.changedAt = changedAt
        self.source = source
    }
}

/// `POST /v1/notifications/appstore` and Retention Messaging's endpoint: what Apple posts.
public struct SignedPayloadRequest: Codable, Hashable, Sendable {
    public var signedPayload: String
    public init(signedPayload: String) { self.signedPayload = signedPayload }
}

/// `POST /v1/notifications/appstore`'s answer.
public struct NotificationReply: Codable, Hashable, Sendable {
    public enum Result: String, Codable, Hashable, Sendable, CaseIterable { case applied, duplicate }
    public var result: Result
    public init(result: Result) { self.result = result }
}

/// `GET /health`.
public struct HealthReply: Codable, Hashable, Sendable {
    /// `ok`.
    public var status: String
    /// `sqlite` or `postgres`.
    public var store: String
    public init(status: String, store: String) {
        self.status = status
        self.store = store
    }
}
