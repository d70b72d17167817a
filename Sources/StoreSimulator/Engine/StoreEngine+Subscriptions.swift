import AppStoreFormats
import Foundation

/// The auto-renewable subscription lifecycle on the virtual clock: renewals, billing failure → grace period →
/// billing retry → recovery or expiry, auto-renew changes, upgrades (immediate) and downgrades (at renewal),
/// refunds and their reversal. Every event mints a Notifications V2 payload.
extension StoreEngine {
    /// Sandbox renews a subscription at most this many times, then turns auto-renew off (Apple's sandbox rule).
    static let sandboxRenewalCap = 12

    var gracePeriodLength: TimeInterval { rate.secondsPerDay * 16 }
    var billingRetryLength: TimeInterval { rate.secondsPerDay * 60 }

    /// Handles a purchase in a group where the customer already has a live subscription: the same product is refused
    /// (unless an offer is redeemed: it applies from the next renewal), an upgrade (or same-length crossgrade) replaces
    /// it now, a downgrade (or crossgrade to another length) waits for the next renewal. A redeemed offer turns the
    /// notification into OFFER_REDEEMED. Nil when the purchase is an ordinary first purchase or resubscription.
    /// The change carries the purchase's `appAccountToken` as Apple's does: an upgrade's transaction at once, a
    /// downgrade's from the renewal that makes it.
    func changeSubscriptionIfSameGroup(account: String, productId: String, appAccountToken: UUID? = nil, offer request: OfferRequest?,
                                       withReceipt: Bool) throws -> PurchaseResult? {
        guard let product = catalog.product(productId), product.type == .autoRenewableSubscription, let group = product.subscriptionGroupIdentifier,
              var series = state.subscriptions.values.first(where: {
                  $0.account == account && $0.group == group && $0.sharedFrom == nil && $0.phase != .expired && $0.phase != .revoked
              }),
              let current = catalog.product(series.productId) else { return nil }
        var offer: StoreState.ScheduledOffer?
        if let request, case .success(let terms) = resolve(request, productId: productId, account: account) { offer = terms }
        let now = clock.now
        let unchanged = { [self] () throws -> PurchaseResult in
            // Nothing is charged now: StoreKit hands back the current period's transaction.
            .purchased(signedTransaction: try signedTransaction(series.latestTransactionId), transactionId: series.latestTransactionId,
                       receipt: withReceipt ? try receipt(for: account) : nil)
        }
        guard productId != series.productId else {
            guard let offer else { return .failed(reason: "already subscribed to \(productId)") }
            series.nextOffer = offer
            state.subscriptions[series.originalTransactionId] = series
            try notify(.offerRedeemed, nil, subscription: series.originalTransactionId, at: now)
            try persist()
            return try unchanged()
        }
        let immediate = (product.groupLevel ?? 0) < (current.groupLevel ?? 0)
            || ((product.groupLevel ?? 0) == (current.groupLevel ?? 0) && product.period == current.period)
        if immediate {
            // An upgrade ends a commitment at once (Apple refunds the rest pro rata).
            series.commitment = nil
            state.transactions[series.latestTransactionId]?.payload.isUpgraded = true
            if let appAccountToken { series.nextAppAccountToken = appAccountToken }
            let id = try mintSeriesTransaction(&series, productId: productId, at: now, reason: .purchase, offer: offer)
            series.autoRenewProductId = productId
            series.phase = .active
            state.subscriptions[series.originalTransactionId] = series
            try notify(offer == nil ? .didChangeRenewalPref : .offerRedeemed, .upgrade, subscription: series.originalTransactionId, at: now)
            try persist()
            return .purchased(signedTransaction: try signedTransaction(id), transactionId: id, receipt: withReceipt ? try receipt(for: account) : nil)
        }
        series.autoRenewProductId = productId
        if let offer { series.nextOffer = offer }
        if let appAccountToken { series.nextAppAccountToken = appAccountToken }
        state.subscriptions[series.originalTransactionId] = series
        try notify(offer == nil ? .didChangeRenewalPref : .offerRedeemed, .downgrade, subscription: series.originalTransactionId, at: now)
        try persist()
        return try unchanged()
    }

    /// Mints the next transaction of a series for `productId`, starting at `start`, at `offer`'s terms when given
    /// (what is left of a pay-as-you-go offer carries on to the following renewal).
    func mintSeriesTransaction(_ series: inout StoreState.Subscription, productId: String, at start: Date, reason: TransactionReason,
                               offer: StoreState.ScheduledOffer?) throws -> String {
        guard let product = catalog.product(productId), let period = product.period,
              let first = state.transactions[series.originalTransactionId]?.payload, let account = state.accounts[series.account] else {
            throw SimulatorError.catalog("subscription \(series.originalTransactionId) lost its product or account")
        }
        let id = state.mintId()
        var payload = first
        payload.transactionId = id
        payload.productId = productId
        payload.subscriptionGroupIdentifier = product.subscriptionGroupIdentifier
        payload.webOrderLineItemId = state.mintId()
        payload.purchaseDate = start
        payload.transactionReason = reason
        payload.offerType = nil
        payload.offerDiscountType = nil
        payload.offerPeriod = nil
        payload.offerIdentifier = nil
        payload.isUpgraded = nil
        payload.revocationDate = nil
        payload.revocationReason = nil
        payload.revocationType = nil
        payload.revocationPercentage = nil
        let price = product.storefrontPrices[account.storefront] ?? .init(currency: catalog.currency, price: state.priceOverrides[productId] ?? product.price)
        payload.price = price.price
        payload.currency = price.currency
        var length = rate.duration(of: period)
        payload.billingPlanType = product.monthlyCommitment == nil ? nil : .billedUpfront
        payload.commitmentInfo = nil
        if let commitment = series.commitment, let plan = product.monthlyCommitment {
            length = rate.duration(of: SubscriptionPeriod(value: 1, unit: .month))
            stamp(&payload, commitment: commitment, plan: plan)
        } else {
            series.commitment = nil
        }
        series.nextOffer = nil
        if let offer { (length, series.nextOffer) = apply(offer, to: &payload) }
        if series.advancedCommerce != nil { length = stampAdvancedCommercePeriod(&series, &payload, renewing: reason == .renewal) }
        payload.expiresDate = start.addingTimeInterval(length)
        payload.appAccountToken = series.nextAppAccountToken ?? state.transactions[series.latestTransactionId]?.payload.appAccountToken
        series.nextAppAccountToken = nil
        series.priceIncreaseConsented = nil
        state.transactions[id] = .init(payload: payload, account: series.account, unfinishedOn: account.devices)
        state.transactionOrder.append(id)
        series.latestTransactionId = id
        series.productId = productId
        series.expiresDate = payload.expiresDate!
        series.expirationIntent = nil
        series.gracePeriodExpiresDate = nil
        series.billingRetrySince = nil
        return id
    }

    /// Runs every subscription event due up to now, in time order.
    func processSubscriptions() throws {
        let now = clock.now
        try processExternalPurchaseTokens(until: now)
        for _ in 0..<100_000 {
            let due = state.subscriptions.values.compactMap { series -> (Date, String)? in
                guard let time = nextEvent(series), time <= now else { return nil }
                return (time, series.originalTransactionId)
            }.min { ($0.0, $0.1) < ($1.0, $1.1) }  // ties by id: the same order in every process (a replay mints the same ids)
            guard let (time, id) = due, var series = state.subscriptions[id] else { return }
            try handleEvent(&series, at: time)
            state.subscriptions[id] = series
        }
    }

    private func nextEvent(_ series: StoreState.Subscription) -> Date? {
        // A family member's access follows the purchaser's series (see StoreEngine+Family).
        guard series.sharedFrom == nil else { return nil }
        return switch series.phase {
        case .active: series.expiresDate
        case .gracePeriod: series.gracePeriodExpiresDate
        case .billingRetry: series.billingRetrySince.map { $0.addingTimeInterval(billingRetryLength) }
        case .expired, .revoked: nil
        }
    }

    private func handleEvent(_ series: inout StoreState.Subscription, at time: Date) throws {
        let original = series.originalTransactionId
        switch series.phase {
        case .active:
            if !series.autoRenewStatus {
                series.phase = .expired
                series.expirationIntent = series.expirationIntent ?? .customerCancelled
                state.subscriptions[original] = series
                try notify(.expired, .voluntary, subscription: original, at: time)
            } else if let commitment = series.commitment, commitment.billingPeriodNumber >= 12, !commitment.renews {
                // The commitment ran its 12 payments and the customer cancelled during it.
                series.phase = .expired
                series.autoRenewStatus = false
                series.commitment = nil
                series.expirationIntent = series.expirationIntent ?? .customerCancelled
                state.subscriptions[original] = series
                try notify(.expired, .voluntary, subscription: original, at: time)
            } else if state.accounts[series.account]?.billingFails == true {
                series.billingRetrySince = time
                series.expirationIntent = .billingError
                // A commitment's payments get no grace period.
                if gracePeriodEnabled, series.commitment == nil {
                    series.phase = .gracePeriod
                    series.gracePeriodExpiresDate = time.addingTimeInterval(gracePeriodLength)
                    state.subscriptions[original] = series
                    try notify(.didFailToRenew, .gracePeriod, subscription: original, at: time)
                } else {
                    series.phase = .billingRetry
                    state.subscriptions[original] = series
                    try notify(.didFailToRenew, nil, subscription: original, at: time)
                }
            } else if series.priceIncreaseConsented == false {
                series.phase = .expired
                series.autoRenewStatus = false
                series.expirationIntent = .customerDidNotConsentToPriceIncrease
                state.subscriptions[original] = series
                try notify(.expired, .priceIncrease, subscription: original, at: time)
            } else {
                // Within a commitment the same plan renews, whatever the customer chose for after it; at its end, the
                // next commitment (or plan) begins with payment 1.
                let productId = advanceCommitment(&series, at: series.expiresDate) ? series.productId : series.autoRenewProductId
                _ = try mintSeriesTransaction(&series, productId: productId, at: series.expiresDate, reason: .renewal, offer: series.nextOffer)
                series.renewals += 1
                if environment != .production, series.renewals >= Self.sandboxRenewalCap {
                    if series.commitment != nil { series.commitment?.renews = false } else { series.autoRenewStatus = false }
                }
                state.subscriptions[original] = series
                try notify(.didRenew, nil, subscription: original, at: time)
            }
        case .gracePeriod:
            series.phase = .billingRetry
            state.subscriptions[original] = series
            try notify(.gracePeriodExpired, nil, subscription: original, at: time)
        case .billingRetry:
            series.phase = .expired
            state.subscriptions[original] = series
            try notify(.expired, .billingRetry, subscription: original, at: time)
        case .expired, .revoked:
            break
        }
    }

    /// Billing works again: every series of the account in grace or retry renews now.
    func recoverBilling(account: String) throws {
        try processSubscriptions()
        let now = clock.now
        for var series in state.subscriptions.values.sorted(by: { $0.originalTransactionId < $1.originalTransactionId })
        where series.account == account && series.sharedFrom == nil && (series.phase == .gracePeriod || series.phase == .billingRetry) {
            // A recovered commitment ends later by the time billing was down.
            series.commitment?.expires.addTimeInterval(now.timeIntervalSince(series.expiresDate))
            let productId = advanceCommitment(&series, at: now) ? series.productId : series.autoRenewProductId
            _ = try mintSeriesTransaction(&series, productId: productId, at: now, reason: .renewal, offer: series.nextOffer)
            series.phase = .active
            state.subscriptions[series.originalTransactionId] = series
            try notify(.didRenew, .billingRecovery, subscription: series.originalTransactionId, at: now)
        }
    }

    /// The customer turns auto-renew on or off. Returns whether the series exists.
    public func setAutoRenew(originalTransactionId: String, enabled: Bool) throws -> Bool {
        try processSubscriptions()
        guard var series = state.subscriptions[originalTransactionId], series.sharedFrom == nil else { return false }
        if let commitment = series.commitment, series.autoRenewStatus {
            // During a commitment the payments continue: cancelling stops the next commitment only, and autoRenewStatus
            // stays on (Apple's commitmentAutoRenewStatus turns off).
            guard commitment.renews != enabled else { return true }
            series.commitment?.renews = enabled
            state.subscriptions[originalTransactionId] = series
            try notify(.didChangeRenewalStatus, enabled ? .autoRenewEnabled : .autoRenewDisabled, subscription: originalTransactionId, at: clock.now)
            try persist()
            return true
        }
        guard series.autoRenewStatus != enabled else { return true }
        series.autoRenewStatus = enabled
        series.expirationIntent = enabled ? nil : .customerCancelled
        state.subscriptions[originalTransactionId] = series
        try notify(.didChangeRenewalStatus, enabled ? .autoRenewEnabled : .autoRenewDisabled, subscription: originalTransactionId, at: clock.now)
        try persist()
        return true
    }

    /// Sets the account's billing switch (as a sandbox tester's "Allow Purchases & Renewals").
    public func setBillingFails(account: String, _ fails: Bool) throws -> Bool {
        guard let existing = state.accounts[account] else { return false }
        try createAccount(account, storefront: existing.storefront, canMakePayments: existing.canMakePayments, askToBuy: existing.askToBuy, billingFails: fails)
        return true
    }

    /// Undoes a refund (a dispute won by the developer). Returns whether the transaction was refunded.
    public func reverseRefund(_ transactionId: String) throws -> Bool {
        guard state.transactions[transactionId]?.payload.revocationDate != nil else { return false }
        state.transactions[transactionId]?.payload.revocationDate = nil
        state.transactions[transactionId]?.payload.revocationReason = nil
        state.transactions[transactionId]?.payload.revocationType = nil
        state.transactions[transactionId]?.payload.revocationPercentage = nil
        if let original = state.transactions[transactionId]?.payload.originalTransactionId, var series = state.subscriptions[original],
           series.latestTransactionId == transactionId, series.phase == .revoked {
            series.phase = series.expiresDate > clock.now ? .active : .expired
            state.subscriptions[original] = series
        }
        try notify(.refundReversed, nil, transactionId: transactionId)
        try persist()
        return true
    }

    /// The developer raises a subscription's price from the next renewal. With `consentRequired`, every live series
    /// renewing into it gets PRICE_INCREASE / PENDING and expires at renewal unless the customer consents; without,
    /// PRICE_INCREASE / ACCEPTED. Returns how many subscribers were told.
    public func raisePrice(productId: String, to price: Int64, consentRequired: Bool = true) throws -> Int {
        try processSubscriptions()
        guard catalog.product(productId)?.type == .autoRenewableSubscription, price > 0 else { return 0 }
        state.priceOverrides[productId] = price
        var told = 0
        for var series in state.subscriptions.values where series.autoRenewProductId == productId && series.sharedFrom == nil && series.phase == .active && series.autoRenewStatus {
            series.priceIncreaseConsented = !consentRequired
            state.subscriptions[series.originalTransactionId] = series
            try notify(.priceIncrease, consentRequired ? .pending : .accepted, subscription: series.originalTransactionId, at: clock.now)
            told += 1
        }
        try persist()
        return told
    }

    /// The customer consents to a pending price increase. Returns whether one was pending.
    public func consentToPriceIncrease(originalTransactionId: String) throws -> Bool {
        guard var series = state.subscriptions[originalTransactionId], series.priceIncreaseConsented == false else { return false }
        series.priceIncreaseConsented = true
        state.subscriptions[originalTransactionId] = series
        try notify(.priceIncrease, .accepted, subscription: originalTransactionId, at: clock.now)
        try persist()
        return true
    }

    /// The renewal info of a series as it stands.
    func renewalInfo(_ series: StoreState.Subscription) -> JWSRenewalInfoDecodedPayload {
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.originalTransactionId = series.originalTransactionId
        renewal.productId = series.productId
        renewal.autoRenewProductId = series.autoRenewProductId
        renewal.autoRenewStatus = series.autoRenewStatus ? .on : .off
        renewal.expirationIntent = series.expirationIntent
        renewal.isInBillingRetryPeriod = series.phase == .gracePeriod || series.phase == .billingRetry
        renewal.gracePeriodExpiresDate = series.gracePeriodExpiresDate
        renewal.environment = environment
        renewal.renewalDate = series.expiresDate
        renewal.recentSubscriptionStartDate = state.transactions[series.originalTransactionId]?.payload.purchaseDate
        renewal.appAccountToken = state.transactions[series.latestTransactionId]?.payload.appAccountToken
        if let product = catalog.product(series.autoRenewProductId) {
            renewal.renewalPrice = state.priceOverrides[series.autoRenewProductId] ?? product.price
            renewal.currency = catalog.currency
        }
        if let offer = series.nextOffer {
            renewal.offerType = offer.type
            renewal.offerIdentifier = offer.identifier
            renewal.offerDiscountType = offer.discountType
            renewal.offerPeriod = offer.period
            renewal.renewalPrice = offer.price
        }
        if let commitment = series.commitment, let plan = catalog.product(series.productId)?.monthlyCommitment {
            renewal.renewalBillingPlanType = .monthly
            renewal.renewalPrice = plan.monthlyPrice
            let next = catalog.product(series.autoRenewProductId)
            let nextPlan = next?.monthlyCommitment
            renewal.commitmentInfo = try? AppStoreJSONValue(encoding: RenewalCommitmentInfo(
                commitmentAutoRenewProductId: series.autoRenewProductId, commitmentAutoRenewStatus: commitment.renews ? .on : .off,
                commitmentRenewalBillingPlanType: nextPlan == nil ? .billedUpfront : .monthly, commitmentRenewalDate: commitment.expires,
                commitmentRenewalPrice: nextPlan?.monthlyPrice ?? next?.price))
        } else if catalog.product(series.productId)?.monthlyCommitment != nil {
            renewal.renewalBillingPlanType = .billedUpfront
        }
        if let terms = series.advancedCommerce {
            renewal.renewalPrice = terms.renewalPrice
            renewal.currency = terms.currency
            renewal.advancedCommerceInfo = try? AppStoreJSONValue(encoding: terms.renewalInfo)
        }
        // A lapsed subscriber's renewal info names the win-back offers they may redeem (API 1.13); the purchaser's own
        // history decides, so a family member's copy names none.
        if series.sharedFrom == nil, series.phase == .expired || series.phase == .revoked {
            let eligible = eligibleWinBackOfferIds(account: series.account, productId: series.productId)
            if !eligible.isEmpty { renewal.eligibleWinBackOfferIds = eligible }
        }
        if let consented = series.priceIncreaseConsented {
            renewal.priceIncreaseStatus = consented ? .customerConsentedOrWasNotifiedWithoutClaimingConsent : .customerHasNotResponded
        }
        return renewal
    }

    /// Moves a commitment to its next payment: true while the same commitment goes on (the same plan renews), false at
    /// its end, where a new commitment starts at payment 1 when the customer kept it (on the product they chose, if
    /// that product is paid monthly too).
    func advanceCommitment(_ series: inout StoreState.Subscription, at start: Date) -> Bool {
        guard var commitment = series.commitment else { return false }
        if commitment.billingPeriodNumber < 12 {
            commitment.billingPeriodNumber += 1
            series.commitment = commitment
            return true
        }
        let month = rate.duration(of: SubscriptionPeriod(value: 1, unit: .month))
        series.commitment = catalog.product(series.autoRenewProductId)?.monthlyCommitment == nil ? nil
            : .init(billingPeriodNumber: 1, expires: start.addingTimeInterval(month * 12), renews: true)
        return false
    }

    /// A monthly period's plan fields: `billingPlanType` `MONTHLY`, the month's price, and which payment it is.
    func stamp(_ payload: inout JWSTransactionDecodedPayload, commitment: StoreState.Subscription.Commitment, plan: SimulatorCatalog.MonthlyCommitment) {
        payload.billingPlanType = .monthly
        payload.price = plan.monthlyPrice
        payload.commitmentInfo = try? AppStoreJSONValue(encoding: TransactionCommitmentInfo(
            billingPeriodNumber: commitment.billingPeriodNumber, totalBillingPeriods: 12, commitmentExpiresDate: commitment.expires,
            commitmentPrice: plan.commitmentPrice))
    }
}
