import Foundation

/// `POST /v1/orders`: an order for a product; the app pays with its `appAccountToken`.
public struct OrderRequest: Codable, Hashable, Sendable {
    public var productId: String
    /// The account the app means to order for: a bearer token of another account is refused (409 `account_mismatch`,
    /// no order made). The app's sign-in may change while it fetches the token for this call; an order made for the
    /// other account would then be paid and journaled for the first one.
    public var expectedAccountId: String?

    public init(productId: String, expectedAccountId: String? = nil) {
        self.productId = productId
        self.expectedAccountId = expectedAccountId
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
