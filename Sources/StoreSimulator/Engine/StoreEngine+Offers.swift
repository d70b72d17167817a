import AppStoreFormats
import Foundation

/// A subscription offer the customer redeems with a purchase: a promotional offer (the app presents it), an offer code
/// (the customer types it) or a win-back offer (the App Store or the app shows it to a lapsed subscriber).
public struct OfferRequest: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable { case promotional, offerCode, winBack }
    public var kind: Kind
    /// The promotional or win-back offer's id, or the offer code's reference name.
    public var id: String
    /// A promotional offer's signature from the app's server: the JWS of 2025 (`.promotionalOffer(_:compactJWS:)`)…
    public var signature: String?
    /// …or the original API's (`.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`).
    public var legacySignature: LegacyPromotionalOfferSignature?

    public init(kind: Kind, id: String, signature: String? = nil, legacySignature: LegacyPromotionalOfferSignature? = nil) {
        self.kind = kind
        self.id = id
        self.signature = signature
        self.legacySignature = legacySignature
    }
}

/// Subscription offers: introductory offers (one per customer per group), promotional offers (current and lapsed
/// subscribers), offer codes (whoever the code's eligibility names) and win-back offers (lapsed paying subscribers),
/// each priced and timed by its payment mode.
/// The engine takes a purchase's offer as given; the simulator's purchase route checks the app server's signatures
/// first (``OfferSignatureVerifier``), and the engine keeps the nonces they used.
extension StoreEngine {
    /// Takes a signature's nonce for `account`'s purchase: false when it was used before (the App Store takes each once),
    /// or when the transaction id it names is not the customer's (one of their transactions, or their app transaction).
    public func takeOfferNonce(_ nonce: String, account: String, transactionId: String?) throws -> Bool {
        if let transactionId {
            let own = state.transactions[transactionId]?.account == account || state.accounts[account]?.appTransactionId == transactionId
            guard own else { return false }
        }
        let now = Date()
        // A signature is taken for 24 hours (and a minute of clock skew): an older nonce could not come back valid.
        var used = (state.usedOfferNonces ?? [:]).filter { now.timeIntervalSince($0.value) <= LegacyPromotionalOfferSignature.lifetime + 120 }
        guard !nonce.isEmpty, used.updateValue(now, forKey: nonce.lowercased()) == nil else { return false }
        state.usedOfferNonces = used
        try persist()
        return true
    }

    /// Where the customer stands in a subscription group, in offer-code eligibility's words.
    enum GroupStanding: String { case new, existing, expired }

    func standing(of account: String, inGroup group: String) -> GroupStanding {
        let own = state.subscriptions.values.filter { $0.account == account && $0.group == group && $0.sharedFrom == nil }
        if own.isEmpty { return .new }
        return own.contains { $0.phase == .active || $0.phase == .gracePeriod || $0.phase == .billingRetry } ? .existing : .expired
    }

    /// The terms of `request` for `productId`, or why the customer cannot redeem it. A refusal's reason starts with the
    /// `Product.PurchaseError` StoreKit throws for it (`invalidOfferIdentifier`, `ineligibleForOffer`).
    func resolve(_ request: OfferRequest, productId: String, account: String) -> Result<StoreState.ScheduledOffer, OfferRefusal> {
        // Offer codes for one-time purchases (2025): a price for the one purchase, `ONE_TIME`, no offer period.
        if let product = catalog.product(productId), product.type != .autoRenewableSubscription {
            guard request.kind == .offerCode, let price = product.oneTimeOfferCodes[request.id] else {
                return .failure(request.kind == .offerCode ? .unknown("no offer code \(request.id) for \(productId)")
                                                           : .unknown("\(request.kind == .winBack ? "win-back" : "promotional") offers apply to auto-renewable subscriptions only"))
            }
            return .success(StoreState.ScheduledOffer(type: .offerCode, identifier: request.id, discountType: .oneTime, period: "", price: price,
                                                      length: 0, periodsAfterNext: 0))
        }
        guard let product = catalog.product(productId), product.type == .autoRenewableSubscription, let group = product.subscriptionGroupIdentifier else {
            return .failure(.unknown("offers apply to auto-renewable subscriptions only"))
        }
        let standing = standing(of: account, inGroup: group)
        switch request.kind {
        case .promotional:
            guard let offer = product.promotionalOffers.first(where: { $0.offerId == request.id }) else {
                return .failure(.unknown("no promotional offer \(request.id) for \(productId)"))
            }
            guard standing != .new else { return .failure(.ineligible("promotional offers are for current and lapsed subscribers")) }
            return .success(schedule(offer, type: .promotionalOffer, product: product))
        case .offerCode:
            guard let offer = product.offerCodes.first(where: { $0.offerId == request.id }) else {
                return .failure(.unknown("no offer code \(request.id) for \(productId)"))
            }
            guard offer.eligibility.isEmpty || offer.eligibility.contains(standing.rawValue) else {
                return .failure(.ineligible("offer code \(request.id) is not for \(standing.rawValue) subscribers"))
            }
            return .success(schedule(offer, type: .offerCode, product: product))
        case .winBack:
            guard let offer = product.winBackOffers.first(where: { $0.offerId == request.id }) else {
                return .failure(.unknown("no win-back offer \(request.id) for \(productId)"))
            }
            if let reason = winBackIneligibility(of: account, inGroup: group) { return .failure(.ineligible(reason)) }
            return .success(schedule(offer, type: .winBackOffer, product: product))
        }
    }

    /// Why `account` may not redeem a win-back offer in `group`, or nil when it may. Apple's rule: the customer's
    /// subscription is churned — expired, not renewing — and one in a billing grace period or billing retry is not;
    /// App Store Connect's criteria ask for at least a month of paid subscription, so a customer who never paid (a free
    /// trial, a free offer, then nothing) is never eligible. The criteria's durations and waits are not simulated.
    func winBackIneligibility(of account: String, inGroup group: String) -> String? {
        switch standing(of: account, inGroup: group) {
        case .new: return "win-back offers are for lapsed subscribers; this customer never subscribed in the group"
        case .existing: return "win-back offers are for lapsed subscribers; this customer's subscription in the group is active, in a grace period or in billing retry"
        case .expired: break
        }
        let paid = state.transactions.values.contains {
            $0.account == account && $0.sharedFrom == nil && $0.payload.subscriptionGroupIdentifier == group
                && ($0.payload.price ?? 0) > 0 && $0.payload.revocationDate == nil
        }
        return paid ? nil : "win-back offers are for lapsed paying subscribers; this customer never paid for a period in the group"
    }

    /// The win-back offers of `productId` that `account` may redeem now (renewal info's `eligibleWinBackOfferIds`, best
    /// first: the catalog's order).
    func eligibleWinBackOfferIds(account: String, productId: String) -> [String] {
        guard let product = catalog.product(productId), let group = product.subscriptionGroupIdentifier, !product.winBackOffers.isEmpty,
              winBackIneligibility(of: account, inGroup: group) == nil else { return [] }
        return product.winBackOffers.compactMap(\.offerId)
    }

    /// Why an offer cannot be redeemed, prefixed with StoreKit's `Product.PurchaseError` for it.
    struct OfferRefusal: Error {
        var reason: String
        static func unknown(_ text: String) -> Self { Self(reason: "invalidOfferIdentifier: " + text) }
        static func ineligible(_ text: String) -> Self { Self(reason: "ineligibleForOffer: " + text) }
    }

    /// An offer's terms for its first period: pay as you go discounts each of the subscription's own periods in turn,
    /// free trials and pay up front cover the offer's whole duration at once.
    func schedule(_ offer: SimulatorCatalog.Offer, type: OfferType, product: SimulatorCatalog.Product) -> StoreState.ScheduledOffer {
        let payAsYouGo = offer.discountType == .payAsYouGo
        let length = payAsYouGo ? product.period.map { rate.duration(of: $0) } ?? rate.duration(of: offer.period)
            : rate.duration(of: offer.period, count: offer.numberOfPeriods)
        return StoreState.ScheduledOffer(type: type, identifier: offer.offerId, discountType: offer.discountType, period: offer.period.description,
                                         price: offer.price, length: length, periodsAfterNext: payAsYouGo ? offer.numberOfPeriods - 1 : 0)
    }

    /// Prices `payload` at the offer's terms and returns the period's length and what remains of the offer afterwards.
    func apply(_ offer: StoreState.ScheduledOffer, to payload: inout JWSTransactionDecodedPayload) -> (length: TimeInterval, remaining: StoreState.ScheduledOffer?) {
        payload.offerType = offer.type
        payload.offerIdentifier = offer.identifier
        payload.offerDiscountType = offer.discountType
        payload.offerPeriod = offer.period
        payload.price = offer.price
        var remaining = offer
        remaining.periodsAfterNext -= 1
        return (offer.length, offer.periodsAfterNext > 0 ? remaining : nil)
    }
}
