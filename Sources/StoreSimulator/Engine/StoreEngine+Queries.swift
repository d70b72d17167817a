import AppStoreFormats
import Foundation

extension StoreEngine {
    /// An account's settings, as the device sees them.
    public struct AccountSettings: Sendable, Codable, Hashable {
        public var id: String
        public var storefront: String
        public var canMakePayments: Bool
        public var askToBuy: Bool
        public var billingFails: Bool
        /// The customer's app transaction (every account has one from its creation).
        public var appTransactionId: String?
    }

    /// The settings of account `id`, if it exists.
    public func account(_ id: String) -> AccountSettings? {
        state.accounts[id].map { AccountSettings(id: $0.id, storefront: $0.storefront, canMakePayments: $0.canMakePayments, askToBuy: $0.askToBuy,
                                                  billingFails: $0.billingFails, appTransactionId: $0.appTransactionId) }
    }

    /// Ask to Buy and interrupted requests waiting, oldest first.
    public func pendingRequestIds() -> [String] { state.pendingPurchases.keys.sorted() }

    /// A stored transaction's payload (unsigned).
    public func transaction(_ transactionId: String) -> JWSTransactionDecodedPayload? {
        state.transactions[transactionId]?.payload
    }

    /// The customer whose transaction or app transaction `id` is ("any transactionId, originalTransactionId, or
    /// appTransactionId that belongs to the customer", as Apple's history endpoints take it).
    func customer(containing id: String) -> String? {
        state.transactions[id]?.account ?? state.accounts.values.first { $0.appTransactionId == id }?.id
    }

    /// Every transaction of the customer who owns `transactionId` (any of their ids works, as with Apple), oldest first.
    public func history(containing transactionId: String) -> [JWSTransactionDecodedPayload] {
        guard let account = customer(containing: transactionId) else { return [] }
        return state.transactionOrder.compactMap { state.transactions[$0] }.filter { $0.account == account }.map(\.payload)
    }

    /// Signs `payload` now, as the App Store signs what its Server API returns.
    public func sign(_ payload: JWSTransactionDecodedPayload) throws -> String {
        var payload = payload
        payload.signedDate = clock.now
        return try minter.sign(stampingAppTransaction(payload))
    }

    public enum AppAccountTokenResult: Sendable, Equatable {
        case set
        case notFound
        /// A later transaction of a series: Apple wants the series' original transaction id (4000187).
        case notOriginal
        /// A family member's copy: the token is the purchaser's to set (4000185).
        case familyShared
    }

    /// Sets the `appAccountToken` of every transaction in a series (Set App Account Token), as Apple does: only through
    /// the series' original transaction id, and never on a family member's copy.
    public func setAppAccountToken(originalTransactionId: String, _ token: UUID) throws -> AppAccountTokenResult {
        guard let stored = state.transactions[originalTransactionId] else { return .notFound }
        guard stored.payload.originalTransactionId == originalTransactionId else { return .notOriginal }
        guard stored.sharedFrom == nil, stored.payload.inAppOwnershipType != .familyShared else { return .familyShared }
        // In the order they were minted: each change moves a transaction to the end of the history.
        let ids = state.transactionOrder.filter { state.transactions[$0]?.payload.originalTransactionId == originalTransactionId }
        for id in ids { state.transactions[id]?.payload.appAccountToken = token }
        // Renewals to come carry it too, whatever an earlier change of plan had queued.
        if state.subscriptions[originalTransactionId]?.nextAppAccountToken != nil { state.subscriptions[originalTransactionId]?.nextAppAccountToken = token }
        try persist()
        return .set
    }

    /// Finish Transaction (API 1.20): the app's server delivered it, so it leaves every device's unfinished queue, as
    /// if each had called `finish()`. Returns whether it exists.
    public func finishEverywhere(_ transactionId: String) throws -> Bool {
        guard let stored = state.transactions[transactionId] else { return false }
        if !stored.unfinishedOn.isEmpty {
            state.transactions[transactionId]?.unfinishedOn = []
            try persist()
        }
        return true
    }

    /// The transactions some device still has to finish (Get Transaction History V1 leaves out finished consumables).
    public func unfinishedTransactionIds() -> Set<String> {
        Set(state.transactions.filter { !$0.value.unfinishedOn.isEmpty }.keys)
    }

    /// The customer's app transaction (Get App Transaction Info), found through any of the customer's transaction ids
    /// or its own `appTransactionId` (made with the account; for a state file from before, when first asked for). `nil`
    /// for an unknown id.
    /// Whether `id` is a customer's `appTransactionId` (which some endpoints take in place of a transaction id, and
    /// some refuse).
    /// Whether `id` names a transaction or a customer's app transaction.
    public func knows(_ id: String) -> Bool { customer(containing: id) != nil }

    public func isAppTransactionId(_ id: String) -> Bool {
        state.transactions[id] == nil && state.accounts.values.contains { $0.appTransactionId == id }
    }

    public func appTransaction(containing id: String) throws -> AppTransactionDecodedPayload? {
        guard let accountId = customer(containing: id), let known = state.accounts[accountId] else { return nil }
        let account = givingAppTransaction(to: accountId) ?? known
        if known.appTransactionId == nil { try persist() }
        var payload = AppTransactionDecodedPayload()
        payload.receiptType = environment
        payload.appAppleId = catalog.appAppleId
        payload.bundleId = catalog.bundleId
        payload.applicationVersion = "1"
        payload.originalApplicationVersion = "1"
        payload.originalPurchaseDate = account.appPurchaseDate
        payload.receiptCreationDate = clock.now
        payload.requestDate = clock.now
        payload.appTransactionId = account.appTransactionId
        payload.originalPlatform = .iOS
        return payload
    }

    /// Account `accountId`, given its app transaction if it has none yet (a new customer, or a state file from before
    /// app transactions): an id that stays, and when the customer first had the app.
    func givingAppTransaction(to accountId: String) -> StoreState.Account? {
        guard var account = state.accounts[accountId] else { return nil }
        guard account.appTransactionId == nil else { return account }
        account.appTransactionId = String(state.nextId)
        state.nextId += 1
        account.appPurchaseDate = state.transactions.values.filter { $0.account == accountId }.compactMap(\.payload.purchaseDate).min() ?? clock.now
        state.accounts[accountId] = account
        return account
    }

    /// Signs an app transaction now.
    public func sign(_ appTransaction: AppTransactionDecodedPayload) throws -> String {
        try minter.sign(appTransaction)
    }

    /// Refunds a transaction: it gets a revocation date, reason, type and percentage and stays in history. With a
    /// `percentage` (milliunits, below 100000) Apple refunded part of it, as it does from consumption data or the time
    /// left in a period (`REFUND_PRORATED`); otherwise all of it (`REFUND_FULL`, 100000).
    public func refund(_ transactionId: String, reason: RevocationReason = .refundedForOtherReason, percentage: Int? = nil) throws -> Bool {
        // A family member's copy is not theirs to refund: the purchaser's refund revokes it.
        guard let stored = state.transactions[transactionId], stored.payload.revocationDate == nil, stored.sharedFrom == nil else { return false }
        let percentage = min(100_000, max(0, percentage ?? 100_000))
        state.transactions[transactionId]?.payload.revocationDate = clock.now
        state.transactions[transactionId]?.payload.revocationReason = reason
        state.transactions[transactionId]?.payload.revocationType = percentage < 100_000 ? .refundProrated : .refundFull
        state.transactions[transactionId]?.payload.revocationPercentage = percentage
        if let original = state.transactions[transactionId]?.payload.originalTransactionId, var series = state.subscriptions[original],
           series.latestTransactionId == transactionId {
            // A revoked series has no further events; a reversed refund picks up where it was.
            series.phase = .revoked
            state.subscriptions[original] = series
        }
        try notify(.refund, nil, transactionId: transactionId)
        try revokeCopies(ofRefunded: transactionId)
        try persist()
        return true
    }

    /// A transaction with its place in the order of changes.
    public struct Revised: Sendable {
        public let revision: Int64
        public let payload: JWSTransactionDecodedPayload
    }

    /// Every transaction of the customer who owns `transactionId`, in the order they last changed, as Apple's
    /// history sorts them ("by their recently modified date"): a refund, an upgrade, a renewal extension or an
    /// `appAccountToken` set later moves a transaction to the end.
    public func changes(containing transactionId: String) -> [Revised] {
        guard let account = customer(containing: transactionId) else { return [] }
        // Every stored transaction has a revision of its own (the engine numbers an older state file's when it loads).
        return state.transactions.values.filter { $0.account == account }
            .map { Revised(revision: $0.revision ?? 0, payload: $0.payload) }
            .sorted { $0.revision < $1.revision }
    }

    /// The customer's refunded or revoked transactions, in the order they last changed (Get Refund History's route
    /// pages them by `revocationDate`, as Apple sorts it).
    public func refunds(containing transactionId: String) -> [Revised] {
        changes(containing: transactionId).filter { $0.payload.revocationDate != nil }
    }

    /// The latest transaction of each auto-renewable series of the customer, with its status and renewal info.
    public func subscriptionStatuses(containing transactionId: String) throws -> [(group: String, latest: JWSTransactionDecodedPayload, status: SubscriptionStatus, renewal: JWSRenewalInfoDecodedPayload)] {
        try processSubscriptions()
        guard let account = customer(containing: transactionId) else { return [] }
        return state.subscriptions.values.filter { $0.account == account }.sorted { $0.originalTransactionId < $1.originalTransactionId }.compactMap { series in
            guard let latest = state.transactions[series.latestTransactionId]?.payload else { return nil }
            return (series.group, latest, series.status, renewalInfo(series))
        }
    }

    /// Signs renewal info now.
    public func sign(_ renewal: JWSRenewalInfoDecodedPayload) throws -> String {
        var renewal = renewal
        renewal.signedDate = clock.now
        return try minter.sign(renewal)
    }

    /// What StoreKit holds on the account's devices of each of its auto-renewable series (`Product.SubscriptionInfo
    /// .Status.renewalInfo`): its renewal info as it stands, signed now, by original transaction id.
    public func signedRenewalInfos(account: String) throws -> [String: String] {
        var signed: [String: String] = [:]
        for series in state.subscriptions.values where series.account == account {
            signed[series.originalTransactionId] = try sign(renewalInfo(series))
        }
        return signed
    }

    /// The signed renewal info of the auto-renewable series `transactionId` belongs to, nil for any other transaction.
    public func signedRenewalInfo(transactionId: String) throws -> String? {
        guard let original = state.transactions[transactionId]?.payload.originalTransactionId, let series = state.subscriptions[original] else { return nil }
        return try sign(renewalInfo(series))
    }
}

extension StoreEngine {
    /// What extending a subscription's renewal date came to.
    public enum ExtensionResult: Sendable {
        case extended(JWSTransactionDecodedPayload)
        case notFound
        case ineligible
        /// A family member's copy: only the purchaser's subscription can be extended (4030007).
        case familyShared
        case limitReached
    }

    /// Extends every active subscription whose latest period is `productId` (in `storefronts`, when given) by `days`,
    /// each as a single extension would be (Extend Subscription Renewal Dates for All Active Subscribers). A repeated
    /// `requestIdentifier` does nothing more. Apple runs it in the background; here it is complete when it answers.
    public func massExtendRenewal(productId: String, days: Int, storefronts: [String]?, requestIdentifier: String) throws {
        guard state.massExtensions?[requestIdentifier] == nil else { return }
        var result = StoreState.MassExtension(productId: productId, succeeded: 0, failed: 0, completed: clock.now)
        let now = clock.now
        for series in state.subscriptions.values.sorted(by: { $0.originalTransactionId < $1.originalTransactionId })
        where series.productId == productId && series.expiresDate > now {
            if let storefronts, let storefront = state.accounts[series.account]?.storefront, !storefronts.contains(storefront) { continue }
            guard state.transactions[series.latestTransactionId]?.payload.inAppOwnershipType != .familyShared else { continue }
            switch try extendRenewal(originalTransactionId: series.originalTransactionId, days: days,
                                     requestIdentifier: "\(requestIdentifier):\(series.originalTransactionId)") {
            case .extended: result.succeeded += 1
            default:
                // "The renewal date extension didn't succeed for a specific subscription": told with that subscription.
                result.failed += 1
                try notify(.renewalExtension, .failure, subscription: series.originalTransactionId, at: now)
            }
        }
        state.massExtensions = (state.massExtensions ?? [:]).merging([requestIdentifier: result]) { old, _ in old }
        // "The App Store completed extending the renewal date for all eligible subscribers": the counts, in `summary`.
        var summary = NotificationSummary()
        summary.environment = environment
        summary.appAppleId = catalog.appAppleId
        summary.bundleId = catalog.bundleId
        summary.productId = productId
        summary.requestIdentifier = requestIdentifier
        summary.storefrontCountryCodes = storefronts
        summary.succeededCount = result.succeeded
        summary.failedCount = result.failed
        try record(.renewalExtension, .summary, data: nil, summary: summary, transactionId: nil, at: now)
        try persist()
    }

    /// What a mass extension did, if `requestIdentifier` names one for `productId`.
    public func massExtension(productId: String, requestIdentifier: String) -> (succeeded: Int64, failed: Int64, completed: Date)? {
        guard let found = state.massExtensions?[requestIdentifier], found.productId == productId else { return nil }
        return (found.succeeded, found.failed, found.completed)
    }

    /// Extends the latest period of a series by `days` (scaled by the renewal rate, as sandbox scales them); at most
    /// two extensions per series per 365 days; a repeated `requestIdentifier` answers the first result again.
    public func extendRenewal(originalTransactionId: String, days: Int, requestIdentifier: String) throws -> ExtensionResult {
        let series = state.transactionOrder.compactMap { state.transactions[$0]?.payload }.filter { $0.originalTransactionId == originalTransactionId }
        guard let latest = series.last, let id = latest.transactionId else { return .notFound }
        if state.extensionRequests[requestIdentifier] == originalTransactionId { return .extended(latest) }
        let now = clock.now
        guard latest.inAppOwnershipType != .familyShared else { return .familyShared }
        guard latest.type == .autoRenewableSubscription, latest.revocationDate == nil, let expires = latest.expiresDate, expires > now,
              latest.offerDiscountType != .freeTrial else { return .ineligible }
        let recent = (state.extensions[originalTransactionId] ?? []).filter { now.timeIntervalSince($0) < rate.secondsPerYear }
        guard recent.count < 2 else { return .limitReached }
        state.transactions[id]?.payload.expiresDate = expires.addingTimeInterval(rate.secondsPerDay * Double(days))
        state.extensions[originalTransactionId] = recent + [now]
        state.extensionRequests[requestIdentifier] = originalTransactionId
        if var series = state.subscriptions[originalTransactionId], series.latestTransactionId == id {
            series.expiresDate = state.transactions[id]!.payload.expiresDate!
            state.subscriptions[originalTransactionId] = series
            try notify(.renewalExtended, nil, subscription: originalTransactionId, at: now)
        }
        try persist()
        return .extended(state.transactions[id]!.payload)
    }
}
