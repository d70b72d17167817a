import AppStoreFormats
import Foundation

/// Family Sharing: an account's family-shareable non-consumables and auto-renewable subscriptions reach each of its
/// family members as `FAMILY_SHARED` copies with their own transaction ids. A shared subscription follows the
/// purchaser's series — each renewal, failure and expiry reaches the member as their own transaction and
/// notification — and access ends with `REVOKE` when the member leaves the family or the purchaser is refunded.
extension StoreEngine {
    /// Notifications that a member's copy of a subscription receives when the purchaser's series gets them.
    static let mirroredToFamily: Set<NotificationTypeV2> = [
        .subscribed, .didRenew, .didFailToRenew, .gracePeriodExpired, .expired, .didChangeRenewalPref, .didChangeRenewalStatus, .renewalExtended,
    ]

    /// Sets the family members who share `organizer`'s purchases. Members who join get access at once; members who
    /// leave lose it. Returns false when an account is unknown or the organizer is listed as a member.
    public func setFamily(organizer: String, members: [String]) throws -> Bool {
        try processSubscriptions()
        guard var account = state.accounts[organizer], members.allSatisfy({ $0 != organizer && state.accounts[$0] != nil }) else { return false }
        var unique: [String] = []
        for member in members where !unique.contains(member) { unique.append(member) }
        let leaving = account.familyMembers.filter { !unique.contains($0) }
        account.familyMembers = unique
        state.accounts[organizer] = account
        for member in leaving {
            try revokeCopies { copy, source in copy.account == member && source.account == organizer }
        }
        try shareWithFamily(of: organizer)
        try persist()
        return true
    }

    /// Gives each family member of `purchaser` a copy of every shareable purchase they lack.
    func shareWithFamily(of purchaser: String) throws {
        guard let members = state.accounts[purchaser]?.familyMembers, !members.isEmpty else { return }
        let shareable = { [catalog] (productId: String?) in productId.flatMap { catalog.product($0)?.familyShareable } == true }
        for member in members {
            for id in state.transactionOrder {
                guard let stored = state.transactions[id], stored.account == purchaser, stored.sharedFrom == nil, stored.payload.type == .nonConsumable,
                      stored.payload.revocationDate == nil, shareable(stored.payload.productId),
                      !state.transactions.values.contains(where: { $0.account == member && $0.sharedFrom == id && $0.payload.revocationDate == nil })
                else { continue }
                let copy = copyTransaction(id, for: member, originalTransactionId: nil)
                try notify(.oneTimeCharge, nil, transactionId: copy)
            }
            let live = state.subscriptions.values.filter {
                $0.account == purchaser && $0.sharedFrom == nil && shareable($0.productId) && ($0.phase == .active || $0.phase == .gracePeriod)
            }
            for series in live.sorted(by: { $0.originalTransactionId < $1.originalTransactionId })
            where !state.subscriptions.values.contains(where: { $0.account == member && $0.sharedFrom == series.originalTransactionId && $0.phase != .revoked }) {
                let hadGroup = state.subscriptions.values.contains { $0.account == member && $0.group == series.group }
                let id = copyTransaction(series.latestTransactionId, for: member, originalTransactionId: nil)
                var copy = series
                copy.originalTransactionId = id
                copy.account = member
                copy.latestTransactionId = id
                copy.sharedFrom = series.originalTransactionId
                copy.nextOffer = nil
                state.subscriptions[id] = copy
                try notify(.subscribed, hadGroup ? .resubscribe : .initialBuy, subscription: id, at: clock.now)
            }
        }
    }

    /// After a notification about a purchaser's series, brings each member's copy up to date and tells its app too.
    func mirrorToFamily(_ purchaserOriginal: String, _ type: NotificationTypeV2, _ subtype: NotificationSubtype?, at time: Date) throws {
        // Members redeem nothing: the purchaser's redeemed offer reaches them as the change it made.
        var (type, subtype) = (type, subtype)
        if type == .offerRedeemed {
            switch subtype {
            case .initialBuy?, .resubscribe?: (type, subtype) = (.subscribed, .resubscribe)
            case .upgrade?, .downgrade?: type = .didChangeRenewalPref
            default: return
            }
        }
        guard Self.mirroredToFamily.contains(type), let purchaser = state.subscriptions[purchaserOriginal], purchaser.sharedFrom == nil else { return }
        // In a fixed order, so a seeded history mints the same copies every run.
        for var copy in state.subscriptions.values.sorted(by: { $0.originalTransactionId < $1.originalTransactionId })
        where copy.sharedFrom == purchaserOriginal && copy.phase != .revoked {
            let previous = copy.latestTransactionId
            if let source = state.transactions[previous]?.sharedFrom {
                let upgraded = state.transactions[source]?.payload.isUpgraded
                state.transactions[previous]?.payload.isUpgraded = upgraded
            }
            if state.transactions[previous]?.sharedFrom == purchaser.latestTransactionId {
                state.transactions[previous]?.payload.expiresDate = purchaser.expiresDate
            } else {
                copy.latestTransactionId = copyTransaction(purchaser.latestTransactionId, for: copy.account, originalTransactionId: copy.originalTransactionId)
            }
            copy.productId = purchaser.productId
            copy.autoRenewProductId = purchaser.autoRenewProductId
            copy.autoRenewStatus = purchaser.autoRenewStatus
            copy.expiresDate = purchaser.expiresDate
            copy.phase = purchaser.phase
            copy.expirationIntent = purchaser.expirationIntent
            copy.gracePeriodExpiresDate = purchaser.gracePeriodExpiresDate
            copy.billingRetrySince = purchaser.billingRetrySince
            copy.renewals = purchaser.renewals
            state.subscriptions[copy.originalTransactionId] = copy
            try notify(type, subtype, subscription: copy.originalTransactionId, at: time)
        }
    }

    /// Ends family access to the copies of a refunded purchase.
    func revokeCopies(ofRefunded transactionId: String) throws {
        try revokeCopies { copy, _ in copy.sharedFrom == transactionId }
    }

    /// Revokes each live family copy for which `matches(copy, purchaser's transaction)` holds: REVOKE, one per copy.
    private func revokeCopies(where matches: (StoreState.StoredTransaction, StoreState.StoredTransaction) -> Bool) throws {
        let now = clock.now
        for id in state.transactionOrder {
            guard let copy = state.transactions[id], let sourceId = copy.sharedFrom, let source = state.transactions[sourceId],
                  copy.payload.revocationDate == nil, matches(copy, source) else { continue }
            // Only the current period of a shared subscription carries the revocation; earlier periods are history.
            let series = copy.payload.originalTransactionId.flatMap { state.subscriptions[$0] }
            if copy.payload.type == .autoRenewableSubscription && series?.latestTransactionId != id { continue }
            state.transactions[id]?.payload.revocationDate = now
            state.transactions[id]?.payload.revocationType = .familyRevoke
            if var series, series.latestTransactionId == id {
                series.phase = .revoked
                state.subscriptions[series.originalTransactionId] = series
            }
            try notify(.revoke, nil, transactionId: id)
        }
    }

    /// Mints a member's `FAMILY_SHARED` copy of the purchaser's transaction `sourceId`; it joins the member's devices'
    /// unfinished queues. A new shared series starts its own original transaction id.
    private func copyTransaction(_ sourceId: String, for member: String, originalTransactionId: String?) -> String {
        var payload = state.transactions[sourceId]!.payload
        let id = state.mintId()
        payload.transactionId = id
        payload.originalTransactionId = originalTransactionId ?? id
        payload.inAppOwnershipType = .familyShared
        // The purchaser's token names the purchaser's account in the app, not the member's.
        payload.appAccountToken = nil
        // A migration is the purchaser's series' history, not the member's.
        payload.previousOriginalTransactionId = nil
        if payload.webOrderLineItemId != nil { payload.webOrderLineItemId = state.mintId() }
        if let first = originalTransactionId.flatMap({ state.transactions[$0]?.payload.purchaseDate }) { payload.originalPurchaseDate = first } else { payload.originalPurchaseDate = payload.purchaseDate }
        state.transactions[id] = .init(payload: payload, account: member, unfinishedOn: state.accounts[member]?.devices ?? [], sharedFrom: sourceId)
        state.transactionOrder.append(id)
        return id
    }
}
