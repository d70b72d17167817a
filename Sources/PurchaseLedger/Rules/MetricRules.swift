import AppStoreFormats
import Foundation

/// The business view's rules: what a transaction adds to each day's counts and money, and what a subscription series
/// is at an instant — judged by ``EntitlementRules`` itself, so that the operator's count and the accounts' own pages
/// cannot disagree. Pure functions of the records; the ledger only reads and sums (docs/METRICS.md).
public enum MetricRules {
    /// What one transaction adds to a day (``contributions(of:catalog:)``), or one notification (``contribution(ofNotification:)``).
    enum Kind: String, CaseIterable, Sendable {
        /// Money charged: every transaction with a known price, by the day of its `purchaseDate` (amount: the price).
        case sale
        /// A transaction Apple signed no price for (a purchase known only from a receipt): counted, money unknown.
        case unpriced
        /// A consumable, non-consumable or non-renewing subscription bought.
        case oneTime
        /// The first period of an auto-renewable series, paid.
        case newSubscription
        /// A free-trial period began (`offerDiscountType` `FREE_TRIAL`): the day it starts, and the sweep's start.
        case trialStart
        /// The first period of a series, free (a new customer's trial; ``trialStart`` counts it too).
        case newTrial
        /// A free-trial period's end (`expiresDate`), for the sweep of active trials.
        case trialEnd
        /// A later period of an auto-renewable series.
        case renewal
        /// A paid auto-renewable period: its start and its end (amount: its price normalised to a month,
        /// ``monthlyAmount(_:productId:offerDiscountType:offerPeriod:catalog:signedLength:)``), for the sweep of active
        /// subscriptions and MRR.
        case paidStart, paidEnd
        /// `EXPIRED` notifications by Apple's subtype: the customer turned renewal off or declined a price increase;
        /// billing never recovered; anything else (the product left sale).
        case churnVoluntary, churnBilling, churnOther
        /// `DID_FAIL_TO_RENEW`: a renewal's payment failed.
        case billingIssue
    }

    /// One row of the daily rollup: a UTC day, a product, a currency (empty where no money is involved), a kind.
    struct Contribution: Hashable, Sendable {
        var day: Int64
        var productId: String
        var currency: String
        var kind: Kind
        var count: Int64
        var amount: Int64
    }

    static let dayMillis: Int64 = 86_400_000

    /// The facts of one transaction the rollup needs.
    struct TransactionFacts: Sendable {
        var transactionId: String
        var originalTransactionId: String
        var productId: String
        var productType: ProductType
        var purchaseDate: Int64
        var expiresDate: Int64?
        var price: Int64?
        var currency: String?
        var ownership: InAppOwnershipType?
        var offerDiscountType: OfferDiscountType?
        var offerPeriod: String?
    }

    /// What a transaction adds. A Family Sharing member's copy adds nothing: nobody paid for it, and the purchaser's
    /// own transaction is counted.
    static func contributions(of facts: TransactionFacts, catalog: LedgerCatalog) -> [Contribution] {
        guard facts.ownership != .familyShared else { return [] }
        let day = Self.day(facts.purchaseDate)
        func item(_ kind: Kind, day: Int64, currency: String = "", count: Int64 = 1, amount: Int64 = 0) -> Contribution {
            Contribution(day: day, productId: facts.productId, currency: currency, kind: kind, count: count, amount: amount)
        }
        var items: [Contribution] = []
        if let price = facts.price, let currency = facts.currency {
            items.append(item(.sale, day: day, currency: currency, amount: price))
        } else {
            items.append(item(.unpriced, day: day))
        }
        guard facts.productType == .autoRenewableSubscription else {
            items.append(item(.oneTime, day: day))
            return items
        }
        let trial = facts.offerDiscountType == .freeTrial
        if facts.transactionId == facts.originalTransactionId {
            items.append(item(trial ? .newTrial : .newSubscription, day: day))
        } else {
            // A trial's conversion depends on the period before, which may arrive after this one: it is counted from
            // the rows (``Ledger``'s trial conversions), not summed here.
            items.append(item(.renewal, day: day))
        }
        if trial { items.append(item(.trialStart, day: day)) }
        if let expires = facts.expiresDate, expires > facts.purchaseDate {
            if trial {
                items.append(item(.trialEnd, day: Self.day(expires)))
            } else if let currency = facts.currency, let price = facts.price {
                let monthly = Int64(monthlyAmount(price, productId: facts.productId, offerDiscountType: facts.offerDiscountType,
                                                  offerPeriod: facts.offerPeriod, catalog: catalog,
                                                  signedLength: expires - facts.purchaseDate).rounded())
                items.append(item(.paidStart, day: day, currency: currency, amount: monthly))
                items.append(item(.paidEnd, day: Self.day(expires), currency: currency, amount: monthly))
            } else {
                items.append(item(.paidStart, day: day))
                items.append(item(.paidEnd, day: Self.day(expires)))
            }
        }
        return items
    }

    /// What a notification adds: churn by Apple's `EXPIRED` subtype, billing issues.
    static func contribution(ofNotification type: String, subtype: String?, signedDate: Int64, productId: String?) -> Contribution? {
        let kind: Kind
        switch (type, subtype) {
        case ("EXPIRED", "VOLUNTARY"), ("EXPIRED", "PRICE_INCREASE"): kind = .churnVoluntary
        case ("EXPIRED", "BILLING_RETRY"): kind = .churnBilling
        case ("EXPIRED", _): kind = .churnOther
        case ("DID_FAIL_TO_RENEW", _): kind = .billingIssue
        default: return nil
        }
        return Contribution(day: day(signedDate), productId: productId ?? "", currency: "", kind: kind, count: 1, amount: 0)
    }

    static func day(_ millis: Int64) -> Int64 { millis >= 0 ? millis / dayMillis : (millis - dayMillis + 1) / dayMillis }

    // MARK: A series at an instant

    /// What a subscription series is at `at`.
    public enum SeriesState: Sendable, Hashable {
        /// Entitled and paying (or in a paid offer period): its price normalised to a month counts in MRR.
        case paid
        /// Entitled in a free trial.
        case trial
        /// Entitled only by Apple's billing grace period.
        case gracePeriod
        /// Not entitled: Apple is retrying the failed renewal.
        case billingRetry
    }

    /// The series' state by ``EntitlementRules``: its latest period (purchased by `at`, as the entitlement counts it)
    /// and its status. Nil when the series grants nothing and is not in billing retry. A Family Sharing copy is the
    /// purchaser's series counted once: nil.
    public static func seriesState(latest: PurchaseRecord, status: SubscriptionRecord?, catalog: LedgerCatalog, at: Date,
                                   clockLagAllowance: TimeInterval) -> SeriesState? {
        guard latest.ownership != .familyShared else { return nil }
        if let entitlement = EntitlementRules.seriesEntitlement(latest: latest, status: status, catalog: catalog, now: at,
                                                                clockLagAllowance: clockLagAllowance) {
            if entitlement.state == .gracePeriod { return .gracePeriod }
            return latest.offerDiscountType == .freeTrial ? .trial : .paid
        }
        if let status, status.status == .billingRetry, Millis.of(status.signedDate) <= Millis.of(at),
           Millis.of(status.signedDate) >= Millis.of(latest.purchaseDate), !latest.isRevoked(at: at) {
            return .billingRetry
        }
        return nil
    }

    // A series' latest period at `at`: of its periods that have begun (``hasBegun(_:at:clockLagAllowance:)``), the
    // later by ``isLater(_:than:)``. The reads apply both to the rows as they come.

    /// Whether `period` counts as begun at `at` (the entitlement's own test: a slow clock's allowance applies).
    static func hasBegun(_ period: PurchaseRecord, at: Date, clockLagAllowance: TimeInterval) -> Bool {
        period.purchaseDate <= EntitlementRules.startsBy(period, now: at, allowance: clockLagAllowance)
    }

    /// Of two periods of a series, whether `period` is the later: by purchase date, then by transaction id.
    static func isLater(_ period: PurchaseRecord, than other: PurchaseRecord) -> Bool {
        (period.purchaseDate, period.transactionId) > (other.purchaseDate, other.transactionId)
    }

    // MARK: Money

    /// `price` (milliunits) of one period normalised to a month, as MRR counts it: yearly ÷ 12, weekly × 52 ÷ 12,
    /// n months ÷ n, n days × 12 ÷ 365 ÷ n. The period is the offer's when it was paid up front for its whole length
    /// (`PAY_UP_FRONT`, Apple's `offerPeriod`), otherwise the product's (``ProductRule/subscriptionPeriod``); without
    /// either, the length Apple signed for this period (`signedLength`, milliseconds) rounded to the nearest of a week,
    /// a month, three or six months, a year.
    public static func monthlyAmount(_ price: Int64, productId: String, offerDiscountType: OfferDiscountType?, offerPeriod: String?,
                                     catalog: LedgerCatalog, signedLength: Int64?) -> Double {
        Double(price) / monthsPerPeriod(productId: productId, offerDiscountType: offerDiscountType, offerPeriod: offerPeriod,
                                        catalog: catalog, signedLength: signedLength)
    }

    static func monthsPerPeriod(productId: String, offerDiscountType: OfferDiscountType?, offerPeriod: String?, catalog: LedgerCatalog,
                                signedLength: Int64?) -> Double {
        if offerDiscountType == .payUpFront, let period = offerPeriod.flatMap(SubscriptionPeriod.init(iso8601:)) {
            return months(period)
        }
        if let text = catalog.rule(for: productId)?.subscriptionPeriod, let period = SubscriptionPeriod(iso8601: text) {
            return months(period)
        }
        guard let signedLength, signedLength > 0 else { return 1 }
        let days = Double(signedLength) / Double(dayMillis)
        let candidates: [(days: Double, months: Double)] = [(7, 12.0 / 52), (30.44, 1), (91.3, 3), (182.6, 6), (365.25, 12)]
        return candidates.min { abs(log($0.days / days)) < abs(log($1.days / days)) }!.months
    }

    static func months(_ period: SubscriptionPeriod) -> Double {
        let value = Double(period.value)
        switch period.unit {
        case .day: return value * 12 / 365
        case .week: return value * 12 / 52
        case .month: return value
        case .year: return value * 12
        }
    }

    /// The refunded share of `price`: all of it, or Apple's `revocationPercentage` (milliunits of a percent) of a
    /// prorated refund.
    static func refunded(price: Int64, percentage: Int?) -> Int64 {
        guard let percentage, (0..<100_000).contains(percentage) else { return price }
        return price * Int64(percentage) / 100_000
    }
}
