import AppStoreFormats
import Foundation

/// A verified App Store Server Notification V2, with its nested signed data already verified and decoded.
public struct NotificationEvent: Sendable {
    public var notificationUUID: String
    public var type: NotificationTypeV2
    public var subtype: NotificationSubtype?
    public var signedDate: Date
    /// The body as received, kept for audit and replay.
    public var signedPayload: String
    public var transaction: JWSTransactionDecodedPayload?
    public var renewal: JWSRenewalInfoDecodedPayload?
    public var status: SubscriptionStatus?
    /// The customer's app transaction, for notifications about the customer rather than a purchase (`RESCIND_CONSENT`).
    public var appTransactionId: String?

    public init(notificationUUID: String, type: NotificationTypeV2, subtype: NotificationSubtype?, signedDate: Date, signedPayload: String,
                transaction: JWSTransactionDecodedPayload? = nil, renewal: JWSRenewalInfoDecodedPayload? = nil, status: SubscriptionStatus? = nil) {
        self.notificationUUID = notificationUUID
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.signedPayload = signedPayload
        self.transaction = transaction
        self.renewal = renewal
        self.status = status
    }
}

extension Ledger {
    /// What applying a notification came to.
    public enum NotificationOutcome: String, Sendable, Hashable {
        case applied
        /// Its `notificationUUID` was seen before: nothing changed.
        case duplicate
    }

    /// Stores a notification and applies what it says, once per `notificationUUID`.
    ///
    /// It needs no case per notification type: the transaction it carries is stored or refreshed (later `signedDate`
    /// wins, so renewals, expiries, upgrades, refunds, revocations and reversals land right in any arrival order), bound
    /// to its series' account (or, by `appAccountToken`, to its order's), consumable balances are settled to the
    /// transaction's state, and the series keeps its latest status (by `signedDate`) and its latest period (by
    /// purchase date) — the two things Apple judges a subscription by.
    public func apply(_ event: NotificationEvent, now: Date = Date()) async throws -> NotificationOutcome {
        guard !event.notificationUUID.isEmpty, event.notificationUUID.utf8.count <= 64 else {
            throw LedgerError(.invalidInput, "notificationUUID must be 1 to 64 bytes")
        }
        let record = try event.transaction.map { try PurchaseRecord($0) }
        let catalog = catalog
        return try await write { session in
            guard try await session.insertNotification(event, record: record, at: now) else { return .duplicate }
            if event.type == .rescindConsent, let appTransactionId = event.appTransactionId {
                try await session.rescindConsent(appTransactionId: appTransactionId, signedDate: event.signedDate)
            }
            guard let record else { return .applied }
            if event.type == .consumptionRequest {
                try await session.oweConsumptionAnswer(notificationUUID: event.notificationUUID, transactionId: record.transactionId, signedDate: event.signedDate)
            }
            try await session.lockSeries(record.originalTransactionId)
            let facts = try await session.facts(for: record, namedOrderId: nil, catalog: catalog)
            if let refusal = SubmissionRules.environmentRefusal(record, facts) { throw refusal }
            try await session.apply(SubmissionRules.notified(record, facts: facts, catalog: catalog, now: now))
            // The series' news, decided on the series as the transaction's effects left it (read only when there is
            // an event to judge).
            let told = NotificationRules.candidateEvent(event, record: record, owner: facts.owner, now: now)
            let series = told == nil ? nil : try await session.series(record.originalTransactionId)
            var previousSeriesKnown = false
            if let previous = SubmissionRules.migratedFrom(record) { previousSeriesKnown = try await session.knowsSeries(previous) }
            try await session.apply(NotificationRules.seriesNews(event, record: record, told: told, series: series, previousSeriesKnown: previousSeriesKnown))
            return .applied
        }
    }

    /// How many notifications the ledger holds (for metrics and tests).
    public func notificationCount() async throws -> Int {
        try await read { Int(try await $0.notificationCount()) }
    }
}
