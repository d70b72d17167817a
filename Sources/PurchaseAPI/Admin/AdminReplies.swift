import Foundation

/// An order as the admin API lists it.
public struct AdminOrder: Codable, Hashable, Sendable {
    public var orderId: String
    public var accountId: String
    public var productId: String
    public var appAccountToken: String
    /// `created`, `granted`, `settled`, `expired`…
    public var state: String
    public var transactionId: String?
    public var createdAt: Date
    public var expiresAt: Date
    /// When the app said the order's payment ended with nothing charged, and why (`cancelled`, `failed`, `notStarted`).
    public var abandonedAt: Date?
    public var abandonReason: String?

    public init(orderId: String, accountId: String, productId: String, appAccountToken: String, state: String, transactionId: String?,
                createdAt: Date, expiresAt: Date, abandonedAt: Date? = nil, abandonReason: String? = nil) {
        self.orderId = orderId
        self.accountId = accountId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.state = state
        self.transactionId = transactionId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.abandonedAt = abandonedAt
        self.abandonReason = abandonReason
    }
}

/// `GET /admin/orders?state=…`.
public struct AdminOrdersReply: Codable, Hashable, Sendable {
    public var orders: [AdminOrder]
    public init(orders: [AdminOrder]) { self.orders = orders }
}

/// `POST /admin/orders/{id}/settle`: grant a transaction to the order (looked up with the Server API, or given signed),
/// or close it with a note.
public struct SettleRequest: Codable, Hashable, Sendable {
    public var transactionId: String?
    public var signedTransaction: String?
    public var note: String

    public init(transactionId: String? = nil, signedTransaction: String? = nil, note: String) {
        self.transactionId = transactionId
        self.signedTransaction = signedTransaction
        self.note = note
    }
}

public struct SettleReply: Codable, Hashable, Sendable {
    public var orderId: String
    public var state: String
    /// Empty when the order was closed without one.
    public var transactionId: String

    public init(orderId: String, state: String, transactionId: String) {
        self.orderId = orderId
        self.state = state
        self.transactionId = transactionId
    }
}

/// `GET /admin/proofs`: proofs held while Apple could not be asked.
public struct HeldProofsReply: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var proofId: String
        public var accountId: String
        public var orderId: String?
        /// `signedTransaction`, `receipt` or `transactionId`.
        public var kind: String
        public var attempts: Int
        public var lastError: String?

        public init(proofId: String, accountId: String, orderId: String?, kind: String, attempts: Int, lastError: String?) {
            self.proofId = proofId
            self.accountId = accountId
            self.orderId = orderId
            self.kind = kind
            self.attempts = attempts
            self.lastError = lastError
        }
    }

    public var proofs: [Item]
    public init(proofs: [Item]) { self.proofs = proofs }
}

/// `GET /admin/conflicts`: transactions another account tried to claim.
public struct ConflictsReply: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var transactionId: String
        public var claimedBy: String
        public var owner: String
        public var attempts: Int64

        public init(transactionId: String, claimedBy: String, owner: String, attempts: Int64) {
            self.transactionId = transactionId
            self.claimedBy = claimedBy
            self.owner = owner
            self.attempts = attempts
        }
    }

    public var conflicts: [Item]
    public init(conflicts: [Item]) { self.conflicts = conflicts }
}

/// `GET /admin/consistency`: the ledger's own checks.
public struct ConsistencyReply: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var check: String
        public var detail: String
        public init(check: String, detail: String) {
            self.check = check
            self.detail = detail
        }
    }

    public var consistent: Bool
    public var inconsistencies: [Item]
    public init(consistent: Bool, inconsistencies: [Item]) {
        self.consistent = consistent
        self.inconsistencies = inconsistencies
    }
}

/// `GET /admin/audit`.
public struct AuditReply: Codable, Hashable, Sendable {
    public var entries: [AuditEntry]
    public init(entries: [AuditEntry]) { self.entries = entries }
}

/// `POST /admin/reconcile`: what one pass of the reconciliation job did.
public struct ReconcileReport: Codable, Hashable, Sendable {
    public var proofsGranted = 0
    public var proofsRejected = 0
    public var proofsPostponed = 0
    public var subscriptionsRefreshed = 0
    public var ordersRepaired = 0
    /// Notifications read from Apple's notification history that the endpoint had never applied.
    public var notificationsRecovered = 0
    /// Why the notification history could not be read to the present (Apple unavailable, a payload that does not verify
    /// here); the next pass reads it again from where this one stopped.
    public var notificationHistoryStalled: String?
    /// Answers owed to Apple's consumption requests that this pass tried to send.
    public var consumptionAnswersTried = 0

    public init() {}
}

/// A stored transaction as the admin API shows it.
public struct TransactionRecord: Codable, Hashable, Sendable {
    public var transactionId: String
    public var originalTransactionId: String
    public var accountId: String?
    public var orderId: String?
    public var productId: String
    /// Apple's product type: `Auto-Renewable Subscription`, `Consumable`…
    public var type: String
    public var environment: String
    public var quantity: Int
    public var purchaseDate: Date
    public var expiresDate: Date?
    public var revocationDate: Date?
    public var revocationReason: Int?
    public var revocationType: String?
    public var revocationPercentage: Int?
    public var appTransactionId: String?
    public var isUpgraded: Bool
    public var appAccountToken: String?
    public var signedDate: Date
    /// What the customer paid, in milliunits of ``currency`` (10.99 → 10990), as Apple signed it. Absent when unknown
    /// (a purchase known only from a StoreKit 1 receipt); a free trial's is 0.
    public var price: Int64?
    /// ISO 4217 currency of ``price``.
    public var currency: String?
    /// Apple's offer type: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int?
    /// `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`, `ONE_TIME`.
    public var offerDiscountType: String?
    /// The offer's duration, ISO 8601 (`P1W`).
    public var offerPeriod: String?
    /// The App Store storefront, ISO 3166-1 alpha-3 (`USA`).
    public var storefront: String?

    public init(transactionId: String, originalTransactionId: String, accountId: String?, orderId: String?, productId: String, type: String,
                environment: String, quantity: Int, purchaseDate: Date, expiresDate: Date?, revocationDate: Date?, revocationReason: Int?,
                revocationType: String?, revocationPercentage: Int?, appTransactionId: String?, isUpgraded: Bool, appAccountToken: String?,
                signedDate: Date, price: Int64? = nil, currency: String? = nil, offerType: Int? = nil, offerDiscountType: String? = nil,
                offerPeriod: String? = nil, storefront: String? = nil) {
        self.price = price
        self.currency = currency
        self.offerType = offerType
        self.offerDiscountType = offerDiscountType
        self.offerPeriod = offerPeriod
        self.storefront = storefront
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.accountId = accountId
        self.orderId = orderId
        self.productId = productId
        self.type = type
        self.environment = environment
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.appTransactionId = appTransactionId
        self.isUpgraded = isUpgraded
        self.appAccountToken = appAccountToken
        self.signedDate = signedDate
    }
}

/// `GET /admin/transactions`.
public struct TransactionsReply: Codable, Hashable, Sendable {
    public var transactions: [TransactionRecord]
    public init(transactions: [TransactionRecord]) { self.transactions = transactions }
}

/// `GET /admin/subscriptions/{originalTransactionId}`: the series' periods, its latest status and its notifications.
public struct SeriesReply: Codable, Hashable, Sendable {
    public struct Status: Codable, Hashable, Sendable {
        /// Apple's subscription status (1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked).
        public var status: Int?
        public var gracePeriodExpiresDate: Date?
        public var autoRenew: Bool?
        public var autoRenewProductId: String?
        public var signedDate: Date
        /// The latest period's, by purchase date.
        public var productId: String?
        public var expiresDate: Date?

        public init(status: Int?, gracePeriodExpiresDate: Date?, autoRenew: Bool?, autoRenewProductId: String?, signedDate: Date,
                    productId: String?, expiresDate: Date?) {
            self.status = status
            self.gracePeriodExpiresDate = gracePeriodExpiresDate
            self.autoRenew = autoRenew
            self.autoRenewProductId = autoRenewProductId
            self.signedDate = signedDate
            self.productId = productId
            self.expiresDate = expiresDate
        }
    }

    public var originalTransactionId: String
    public var status: Status?
    public var transactions: [TransactionRecord]
    public var notifications: [LoggedNotification]

    public init(originalTransactionId: String, status: Status?, transactions: [TransactionRecord], notifications: [LoggedNotification]) {
        self.originalTransactionId = originalTransactionId
        self.status = status
        self.transactions = transactions
        self.notifications = notifications
    }
}

/// `GET /admin/notifications`.
public struct NotificationsReply: Codable, Hashable, Sendable {
    public var notifications: [LoggedNotification]
    public init(notifications: [LoggedNotification]) { self.notifications = notifications }
}

/// `GET /admin/accounts/{id}/timeline`: oldest first, and what the account owns.
public struct TimelineReply: Codable, Hashable, Sendable {
    public var accountId: String
    public var timeline: [TimelineEntry]
    public var entitlements: Entitlements

    public init(accountId: String, timeline: [TimelineEntry], entitlements: Entitlements) {
        self.accountId = accountId
        self.timeline = timeline
        self.entitlements = entitlements
    }
}

/// `GET /admin/webhooks`: the outbox.
public struct WebhooksReply: Codable, Hashable, Sendable {
    /// Whether a receiver URL is configured.
    public var configured: Bool
    public var events: [StoredWebhookEvent]

    public init(configured: Bool, events: [StoredWebhookEvent]) {
        self.configured = configured
        self.events = events
    }
}

/// `POST /admin/webhooks/test`.
public struct WebhookTestReply: Codable, Hashable, Sendable {
    /// The queued event's id.
    public var queued: String
    public init(queued: String) { self.queued = queued }
}

/// `POST /admin/webhooks/{id}/replay`.
public struct WebhookReplayReply: Codable, Hashable, Sendable {
    public var replayed: String
    public init(replayed: String) { self.replayed = replayed }
}
