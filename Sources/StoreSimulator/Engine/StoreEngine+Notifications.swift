import AppStoreFormats
import Foundation

/// Minting App Store Server Notifications V2 for what happens in the store.
extension StoreEngine {
    /// Records a notification about a subscription series: its latest transaction, renewal info and status.
    func notify(_ type: NotificationTypeV2, _ subtype: NotificationSubtype?, subscription originalTransactionId: String, at time: Date) throws {
        guard let series = state.subscriptions[originalTransactionId], let latest = state.transactions[series.latestTransactionId]?.payload else { return }
        var data = notificationData()
        data.signedTransactionInfo = try sign(latest, at: time)
        var renewal = renewalInfo(series)
        renewal.signedDate = time
        data.signedRenewalInfo = try minter.sign(renewal)
        data.status = series.status
        try record(type, subtype, data: data, transactionId: series.latestTransactionId, at: time)
        if series.sharedFrom == nil { try mirrorToFamily(originalTransactionId, type, subtype, at: time) }
    }

    /// Records a notification about one transaction (one-time charges, refunds); subscriptions get their renewal info too.
    func notify(_ type: NotificationTypeV2, _ subtype: NotificationSubtype?, transactionId: String,
                consumptionRequestReason: ConsumptionRequestReason? = nil) throws {
        guard let payload = state.transactions[transactionId]?.payload else { return }
        let time = clock.now
        if consumptionRequestReason == nil, let original = payload.originalTransactionId, let series = state.subscriptions[original],
           series.latestTransactionId == transactionId {
            try notify(type, subtype, subscription: original, at: time)
            return
        }
        var data = notificationData()
        data.consumptionRequestReason = consumptionRequestReason
        data.signedTransactionInfo = try sign(payload, at: time)
        if let original = payload.originalTransactionId, let series = state.subscriptions[original] {
            // A past period (a refund of it): the transaction is that period's, the renewal info and status the
            // series' as they stand, as Apple sends them with every subscription notification.
            var renewal = renewalInfo(series)
            renewal.signedDate = time
            data.signedRenewalInfo = try minter.sign(renewal)
            data.status = series.status
        }
        try record(type, subtype, data: data, transactionId: transactionId, at: time)
    }

    /// Records a `RESCIND_CONSENT`: a parent or guardian withdrew consent for the customer's use of the app (the
    /// age-assurance laws of 2026). It speaks of the customer, not a purchase: `appData` with the customer's signed
    /// app transaction, no `data`. False for an unknown account.
    public func rescindConsent(account accountId: String) throws -> Bool {
        guard let appTransactionId = givingAppTransaction(to: accountId)?.appTransactionId,
              let appTransaction = try appTransaction(containing: appTransactionId) else { return false }
        var appData = NotificationAppData()
        appData.appAppleId = catalog.appAppleId
        appData.bundleId = catalog.bundleId
        appData.environment = environment
        appData.signedAppTransactionInfo = try minter.sign(appTransaction)
        try record(.rescindConsent, nil, data: nil, appData: appData, transactionId: nil, at: clock.now)
        try persist()
        return true
    }

    /// Records a `TEST` notification and returns its token.
    public func requestTestNotification() throws -> String {
        let token = UUID().lowercasedString
        try record(.test, nil, data: notificationData(), transactionId: nil, at: clock.now, testToken: token)
        try persist()
        return token
    }

    private func notificationData() -> NotificationData {
        var data = NotificationData()
        data.environment = environment
        data.appAppleId = catalog.appAppleId
        data.bundleId = catalog.bundleId
        data.bundleVersion = "1"
        return data
    }

    private func sign(_ payload: JWSTransactionDecodedPayload, at time: Date) throws -> String {
        var payload = payload
        payload.signedDate = time
        return try minter.sign(stampingAppTransaction(payload))
    }

    func record(_ type: NotificationTypeV2, _ subtype: NotificationSubtype?, data: NotificationData?, appData: NotificationAppData? = nil,
                externalPurchaseToken: ExternalPurchaseToken? = nil, summary: NotificationSummary? = nil, transactionId: String?, at time: Date,
                testToken: String? = nil) throws {
        var payload = ResponseBodyV2DecodedPayload()
        payload.notificationType = type
        payload.subtype = subtype
        payload.notificationUUID = UUID().lowercasedString
        payload.version = "2.0"
        payload.signedDate = time
        payload.data = data
        payload.appData = appData
        payload.summary = summary
        payload.externalPurchaseToken = externalPurchaseToken
        state.notifications.append(.init(
            uuid: payload.notificationUUID!, type: type, subtype: subtype, signedPayload: try minter.sign(payload),
            transactionId: transactionId, createdAt: time, nextAttempt: time, testToken: testToken))
    }

    /// A notification as the simulator recorded it.
    public struct NotificationRecord: Sendable {
        public let uuid: String
        public let type: NotificationTypeV2
        public let subtype: NotificationSubtype?
        public let signedPayload: String
        public let transactionId: String?
        public let createdAt: Date
        public let attempts: [SendAttemptItem]
        public let testToken: String?
    }

    /// Every notification so far, oldest first.
    public func notifications() -> [NotificationRecord] {
        state.notifications.map {
            NotificationRecord(uuid: $0.uuid, type: $0.type, subtype: $0.subtype, signedPayload: $0.signedPayload,
                               transactionId: $0.transactionId, createdAt: $0.createdAt, attempts: $0.attempts, testToken: $0.testToken)
        }
    }
}

extension StoreEngine {
    /// Apple's retry schedule for Notifications V2: hours after the previous attempt (6 attempts in all).
    public static let retryScheduleHours: [Double] = [1, 12, 24, 48, 72]

    /// Notifications whose next delivery attempt is due at the current simulated time, oldest first.
    public func dueNotifications() throws -> [(uuid: String, signedPayload: String)] {
        try processSubscriptions()
        let now = clock.now
        return state.notifications.filter { ($0.nextAttempt ?? .distantFuture) <= now }.map { ($0.uuid, $0.signedPayload) }
    }

    /// Records a delivery attempt and schedules the next one on failure (when `retries`, up to six attempts).
    public func recordAttempt(_ uuid: String, result: SendAttemptResult, retries: Bool = true) throws {
        guard let index = state.notifications.firstIndex(where: { $0.uuid == uuid }) else { return }
        let now = clock.now
        state.notifications[index].attempts.append(SendAttemptItem(attemptDate: now, sendAttemptResult: result))
        let count = state.notifications[index].attempts.count
        if result == .success || !retries || count > Self.retryScheduleHours.count {
            state.notifications[index].nextAttempt = nil
        } else {
            state.notifications[index].nextAttempt = now.addingTimeInterval(Self.retryScheduleHours[count - 1] * 3600)
        }
        try persist()
    }

    /// The transaction ids of the customer owning `transactionId` (for notification history filters).
    func customerTransactionIds(containing transactionId: String) -> Set<String> {
        Set(history(containing: transactionId).compactMap(\.transactionId))
    }

    /// Notification history as the Server API filters it.
    public func notificationHistory(from start: Date, to end: Date, type: NotificationTypeV2?, subtype: NotificationSubtype?,
                                    transactionId: String?, onlyFailures: Bool) -> [NotificationRecord] {
        let customer = transactionId.map(customerTransactionIds(containing:))
        return notifications().filter { record in
            record.createdAt >= start && record.createdAt < end
                && (type == nil || record.type == type) && (subtype == nil || record.subtype == subtype)
                && (customer == nil || record.transactionId.map { customer!.contains($0) } == true)
                // "Only the notifications that haven't reached your server successfully" (those still being retried too).
                && (!onlyFailures || record.attempts.last?.sendAttemptResult != .success)
        }
    }
}
