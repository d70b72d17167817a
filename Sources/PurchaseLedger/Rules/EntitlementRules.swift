import AppStoreFormats
import Foundation

/// How an account's transactions become entitlements: pure functions of the records and the time, so the same
/// records always give the same answer whichever order they arrived in.
public enum EntitlementRules {
    /// The entitlements active at `now`:
    /// - non-consumable: for life, unless revoked by `now`;
    /// - auto-renewable: judged per series as Apple does — its latest period (the latest transaction purchased by
    ///   `now`) decides the product and the end; an upgrade therefore ends the earlier product at the upgrade's
    ///   purchase date, and a refund of a past period leaves the current one standing. The series' latest status
    ///   (signed no earlier than that period began) can end access early (`EXPIRED`, `REVOKED`) or extend it to the
    ///   grace period's end (`BILLING_GRACE_PERIOD`). Periods are the account's own: when the series' latest period is
    ///   another account's (an upgrade bought under another sign-in on the same Apple ID), this account's access ended;
    /// - non-renewing: the product's period from each unrevoked purchase, purchases stacking end to end.
    /// Several products granting one entitlement merge: lifetime wins, otherwise the latest end.
    ///
    /// `clockLagAllowance`: how far the caller's clock may run behind Apple's (``startsBy(_:now:allowance:)``); 0 judges
    /// exactly at `now`, as a look at the past must. The ledger answers with ``clockLagAllowance``.
    public static func entitlements(purchases: [PurchaseRecord], subscriptions: [String: SubscriptionRecord],
                                    catalog: LedgerCatalog, now: Date, clockLagAllowance: TimeInterval = 0) -> [Entitlement] {
        var best: [String: Entitlement] = [:]
        func offer(_ candidate: Entitlement) {
            guard let current = best[candidate.name] else { best[candidate.name] = candidate; return }
            switch (current.expiresAt, candidate.expiresAt) {
            case (nil, _): return
            case (_, nil): best[candidate.name] = candidate
            case (let a?, let b?) where b > a: best[candidate.name] = candidate
            default: return
            }
        }
        var stackEnds: [String: Date] = [:]
        var series: [String: [PurchaseRecord]] = [:]
        for purchase in purchases.sorted(by: { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) })
        where purchase.purchaseDate <= startsBy(purchase, now: now, allowance: clockLagAllowance) {
            guard let rule = catalog.rule(for: purchase.productId) else { continue }
            switch rule.type {
            case .nonConsumable:
                guard let name = rule.entitlement, !purchase.isRevoked(at: now) else { continue }
                offer(Entitlement(name: name, productId: purchase.productId, transactionId: purchase.transactionId,
                                  originalTransactionId: purchase.originalTransactionId, appAccountToken: purchase.appAccountToken,
                                  expiresAt: nil, state: .active, environment: purchase.environment))
            case .nonRenewingSubscription:
                guard let name = rule.entitlement, !purchase.isRevoked(at: now) else { continue }
                let start = max(purchase.purchaseDate, stackEnds[name] ?? purchase.purchaseDate)
                let end = start.addingTimeInterval(Double(rule.periodSeconds ?? 0) * Double(purchase.quantity))
                stackEnds[name] = end
                if end > now {
                    offer(Entitlement(name: name, productId: purchase.productId, transactionId: purchase.transactionId,
                                      originalTransactionId: purchase.originalTransactionId, appAccountToken: purchase.appAccountToken,
                                      expiresAt: end, state: .active, environment: purchase.environment))
                }
            case .autoRenewableSubscription:
                series[purchase.originalTransactionId, default: []].append(purchase)
            default:
                continue
            }
        }
        for (original, periods) in series {
            if let granted = seriesEntitlement(periods: periods, status: subscriptions[original], catalog: catalog, now: now,
                                               clockLagAllowance: clockLagAllowance) {
                offer(granted)
            }
        }
        return best.values.sorted { $0.name < $1.name }
    }

    /// How far the ledger lets its server's clock run behind Apple's and still count a purchase Apple just signed
    /// (``startsBy(_:now:allowance:)``): five minutes.
    public static let clockLagAllowance: TimeInterval = 300

    /// The latest purchase date that counts as begun at `now`. Apple signs a transaction no earlier than it was bought,
    /// and a server cannot hold it before Apple signed it: a `signedDate` after `now` shows the server's clock behind
    /// Apple's by that much, and the purchase counts as Apple counts it — up to `allowance`, beyond which the clock is
    /// the operator's to fix. Each record is its own evidence (no memory, the same on every replica, a forger's dates
    /// reach only the forger's own account), and it never ends access early. A renewal Apple charged ahead of its
    /// period is signed before its `purchaseDate` and still waits for it. The price: a look at the past from within
    /// `allowance` before a purchase cannot tell it from a slow clock, hence 0 for such looks.
    static func startsBy(_ purchase: PurchaseRecord, now: Date, allowance: TimeInterval) -> Date {
        max(now, min(purchase.signedDate, now.addingTimeInterval(allowance)))
    }

    /// What one auto-renewable series grants at `now`, from its periods purchased by `now` (oldest first) and its
    /// latest known status.
    /// A status signed after `now` is a slow clock's or a look at the past: within `clockLagAllowance` a grace period
    /// Apple gave counts (as a purchase does: access never ends early); what ends access counts only once signed.
    static func seriesEntitlement(periods: [PurchaseRecord], status: SubscriptionRecord?, catalog: LedgerCatalog, now: Date,
                                  clockLagAllowance: TimeInterval = 0) -> Entitlement? {
        guard let latest = periods.last else { return nil }
        return seriesEntitlement(latest: latest, status: status, catalog: catalog, now: now, clockLagAllowance: clockLagAllowance)
    }

    /// The same judgement from the series' latest period alone, which is all of its periods the rule reads (the
    /// business view judges ~28,000 series at once, without an array for each).
    static func seriesEntitlement(latest: PurchaseRecord, status: SubscriptionRecord?, catalog: LedgerCatalog, now: Date,
                                  clockLagAllowance: TimeInterval = 0) -> Entitlement? {
        guard let name = catalog.rule(for: latest.productId)?.entitlement else { return nil }
        // The latest period refunded, or superseded by an upgrade the ledger has not seen yet: no access from it.
        guard !latest.isRevoked(at: now), !latest.isUpgraded, var end = latest.expiresDate else { return nil }
        // The series moved on to a period this account does not hold: another account of the app bought the upgrade or
        // the resubscription on the same Apple ID, and Apple's one subscription per group is now that period.
        if let next = status?.periodPurchaseDate, Millis.of(next) > Millis.of(latest.purchaseDate), Millis.of(next) <= Millis.of(now) {
            return nil
        }
        var state = Entitlement.State.active
        // Apple's dates are milliseconds; so are the stored ones, while `now` is finer: compare at Apple's resolution.
        if let status, let code = status.status,
           Millis.of(status.signedDate) <= Millis.of(code == .billingGracePeriod ? now.addingTimeInterval(clockLagAllowance) : now),
           Millis.of(status.signedDate) >= Millis.of(latest.purchaseDate) {
            switch code {
            case .revoked where Millis.of(latest.signedDate) > Millis.of(status.signedDate):
                // Apple signed the period again, unrevoked, after it said revoked: the refund was reversed or the
                // sharing restored, though the news of it (REFUND_REVERSED) never came. Its latest word stands.
                break
            case .expired, .revoked:
                return nil
            case .billingGracePeriod:
                if let grace = status.gracePeriodExpiresDate, grace > end {
                    end = grace
                    state = .gracePeriod
                }
            default:
                break
            }
        }
        guard end > now else { return nil }
        return Entitlement(name: name, productId: latest.productId, transactionId: latest.transactionId,
                           originalTransactionId: latest.originalTransactionId, appAccountToken: latest.appAccountToken,
                           expiresAt: end, state: state, environment: latest.environment, renewal: status.flatMap(Entitlement.Renewal.init))
    }
}
