import AppStoreFormats
import Foundation

/// What the Apple ID already owns, answered as the App Store answers a purchase of it, and the Ask to Buy (and
/// interrupted) requests waiting, listed.
extension StoreEngine {
    /// A purchase waiting for a parent's approval (`pending`) or for the customer to complete it (`interrupted`).
    public struct WaitingRequest: Codable, Sendable, Hashable {
        public var requestId: String
        public var account: String
        public var device: String
        public var productId: String
        /// On the simulator's clock; nil for a request saved by a simulator from before it was recorded.
        public var requestedAt: Date?
        /// `pending` (Ask to Buy) or `interrupted`, as the purchase's answer said.
        public var state: String
    }

    /// The requests waiting, oldest first (their ids are minted in order); only `account`'s when given.
    public func waitingRequests(account: String? = nil) -> [WaitingRequest] {
        state.pendingPurchases.filter { account == nil || $0.value.account == account }.sorted { $0.key < $1.key }.map {
            WaitingRequest(requestId: $0.key, account: $0.value.account, device: $0.value.device, productId: $0.value.productId,
                           requestedAt: $0.value.requestedAt, state: $0.value.interrupted == true ? "interrupted" : "pending")
        }
    }

    /// The transaction that already gives `account` what buying `productId` would, when buying it again charges nothing.
    ///
    /// Why: the App Store never sells an Apple ID what it already has. A non-consumable bought once is "already
    /// purchased": the sheet says so and the purchase ends without a charge — StoreKit 2's `purchase()` answers
    /// `.success` with the transaction that bought it (the same transaction id; StoreKit 1 answered a restored copy
    /// whose `originalTransaction` named it), and Apple sends no notification, as nothing was sold. A refunded one is
    /// owned no more and is sold again. An auto-renewable subscription whose same product is live on the Apple ID is
    /// "currently subscribed": StoreKit 2 again answers `.success` with the series' current transaction (StoreKit 1
    /// failed with `currentlySubscribed`), and nothing changes — auto-renewal is the manage-subscriptions sheet's
    /// business, so it is left as it is. Consumables and non-renewing subscriptions are bought again each time (a
    /// non-renewing one is the app's to extend). Only the Apple ID's own purchases count: a family member may buy what
    /// Family Sharing gives them (StoreKit documents a purchased and a family-shared transaction for one product), and
    /// an offer redeemed on the live subscription is not this (``changeSubscriptionIfSameGroup`` applies it).
    /// The answer carries the first purchase's `appAccountToken`: the app learns whose order paid for it.
    func owningTransaction(account: String, productId: String, offer: OfferRequest?) -> String? {
        guard let product = catalog.product(productId), !product.advancedCommerce else { return nil }
        switch product.type {
        case .nonConsumable:
            return state.transactionOrder.last { id in
                guard let stored = state.transactions[id] else { return false }
                return stored.account == account && stored.sharedFrom == nil && stored.payload.productId == productId
                    && stored.payload.type == .nonConsumable && stored.payload.revocationDate == nil
            }
        case .autoRenewableSubscription where offer == nil:
            return state.subscriptions.values.first {
                $0.account == account && $0.productId == productId && $0.sharedFrom == nil && $0.advancedCommerce == nil
                    && $0.phase != .expired && $0.phase != .revoked
            }?.latestTransactionId
        default:
            return nil
        }
    }
}
