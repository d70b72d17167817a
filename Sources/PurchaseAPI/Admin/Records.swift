import Foundation

/// An audit-log entry: who did what to which subject.
public struct AuditEntry: Codable, Hashable, Sendable {
    /// `admin`, `dashboard`, `reconciler`, `apple`…
    public var actor: String
    public var action: AuditAction
    public var subject: String
    public var detail: String
    public var at: Date

    public init(actor: String, action: AuditAction, subject: String, detail: String, at: Date = Date()) {
        self.actor = actor
        self.action = action
        self.subject = subject
        self.detail = detail
        self.at = at
    }
}

/// One line of an account's history.
public struct TimelineEntry: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        case order, transaction, revocation, balance, notification, deviceReport, conflict, audit
    }

    public var at: Date
    public var kind: Kind
    /// The order, transaction, notification or entry it is about.
    public var subject: String
    public var detail: String

    public init(at: Date, kind: Kind, subject: String, detail: String) {
        self.at = at
        self.kind = kind
        self.subject = subject
        self.detail = detail
    }
}

/// An App Store Server Notification as the ledger logged it.
public struct LoggedNotification: Codable, Hashable, Sendable {
    public var notificationUUID: String
    public var notificationType: String
    public var subtype: String?
    public var signedDate: Date
    public var transactionId: String?
    public var originalTransactionId: String?
    public var receivedAt: Date
    /// The body as received; only in reads that ask for it.
    public var signedPayload: String?

    public init(notificationUUID: String, notificationType: String, subtype: String?, signedDate: Date, transactionId: String?,
                originalTransactionId: String?, receivedAt: Date, signedPayload: String?) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.receivedAt = receivedAt
        self.signedPayload = signedPayload
    }
}

/// An outbox row: an event for the app's backend and where its delivery stands.
public struct StoredWebhookEvent: Codable, Hashable, Sendable {
    public enum State: String, Codable, Hashable, Sendable, CaseIterable {
        /// Waiting for (another) delivery attempt.
        case pending
        case delivered
        /// Out of attempts: waits for an operator's replay.
        case failed
    }

    public var eventId: String
    public var type: String
    public var accountId: String?
    /// The JSON the receiver gets.
    public var body: String
    public var state: State
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    public var createdAt: Date
    public var deliveredAt: Date?

    public init(eventId: String, type: String, accountId: String?, body: String, state: State, attempts: Int, nextAttemptAt: Date,
                lastError: String?, createdAt: Date, deliveredAt: Date?) {
        self.eventId = eventId
        self.type = type
        self.accountId = accountId
        self.body = body
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
    }
}
