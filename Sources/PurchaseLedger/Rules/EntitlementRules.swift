import AppStoreFormats
import Foundation

/// How an account's transactions become entitlements: pure functions of the records and the time, so the same
/// records always give the same answer whichever order they arrived in.
public enum EntitlementRules {
    /// The entitlements active at `now`:
    /// - non-consumable: for life, unless revoked;
    /// - auto-renewable: until the latest `expiresDate` Apple signed among the series' unrevoked, not-upgraded
    ///   transactions — extended to the grace period's end while Apple reports the series in its billing grace period;
    /// - non-renewing: the product's period from each purchase, purchases stacking end to end.
    /// Several products granting one entitlement merge: lifetime wins, otherwise the latest end.
    public static func entitlements(purchases: [PurchaseRecord], subscriptions: [String: SubscriptionRecord],
                                    catalog: LedgerCatalog, now: Date) -> [Entitlement] {
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
        let live = purchases.filter { $0.revocationDate == nil }
        var stackEnds: [String: Date] = [:]
        for purchase in live.sorted(by: { $0.purchaseDate < $1.purchaseDate }) {
            guard let rule = catalog.rule(for: purchase.productId), let name = rule.entitlement else { continue }
            switch rule.type {
            case .nonConsumable:
                offer(Entitlement(name: name, productId: purchase.productId, transactionId: purchase.transactionId, expiresAt: nil,
                                  state: .active, environment: purchase.environment))
            case .nonRenewingSubscription:
                let start = max(purchase.purchaseDate, stackEnds[name] ?? purchase.purchaseDate)
                let end = start.addingTimeInterval(Double(rule.periodSeconds ?? 0) * Double(purchase.quantity))
                stackEnds[name] = end
                if end > now {
                    offer(Entitlement(name: name, productId: purchase.productId, transactionId: purchase.transactionId, expiresAt: end,
                                      state: .active, environment: purchase.environment))
                }
            case .autoRenewableSubscription:
                guard !purchase.isUpgraded, var end = purchase.expiresDate else { continue }
                var state = Entitlement.State.active
                if let series = subscriptions[purchase.originalTransactionId], series.status == .billingGracePeriod,
                   let grace = series.gracePeriodExpiresDate, grace > end {
                    end = grace
                    state = .gracePeriod
                }
                if end > now {
                    offer(Entitlement(name: name, productId: purchase.productId, transactionId: purchase.transactionId, expiresAt: end,
                                      state: state, environment: purchase.environment))
                }
            default:
                continue
            }
        }
        return best.values.sorted { $0.name < $1.name }
    }
}
