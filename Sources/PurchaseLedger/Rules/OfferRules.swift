import AppStoreFormats
import Foundation

/// Who may be offered a promotional offer (configured per offer identifier in the server's configuration).
public struct PromotionalOfferRule: Codable, Sendable, Hashable {
    public enum Eligibility: String, Codable, Sendable, CaseIterable {
        /// Every customer.
        case anyone
        /// Customers who hold the entitlement the product grants now (a retention offer).
        case subscribers
        /// Customers who held it once and hold it no more (a win-back offer).
        case lapsed
    }

    /// The products the offer is set up for in App Store Connect.
    public var productIds: [String]
    public var eligibility: Eligibility

    public init(productIds: [String], eligibility: Eligibility) {
        self.productIds = productIds
        self.eligibility = eligibility
    }
}

/// Which offers the server signs for whom: pure functions of the account's purchases and what it owns now.
public enum OfferRules {
    /// Why an offer is not signed.
    public enum Refusal: String, Error, Sendable, Hashable {
        case unknownProduct = "unknown_product"
        /// The product is no longer sold (``ProductRule/retired``): an offer is redeemed with a new purchase of it,
        /// which the App Store no longer makes, so none is signed (what its subscribers hold is untouched).
        case productRetired = "product_retired"
        case unknownOffer = "unknown_offer"
        case notEligible = "not_eligible"
    }

    /// Whether the account may have promotional offer `offerIdentifier` on `productId`. A retired product has none.
    public static func promotionalOffer(_ offerIdentifier: String, productId: String, rules: [String: PromotionalOfferRule], catalog: LedgerCatalog,
                                        purchases: [PurchaseRecord], owned: AccountEntitlements) -> Result<Void, Refusal> {
        guard let product = catalog.rule(for: productId), product.type == .autoRenewableSubscription, let entitlement = product.entitlement else {
            return .failure(.unknownProduct)
        }
        guard !product.isRetired else { return .failure(.productRetired) }
        guard let rule = rules[offerIdentifier], rule.productIds.contains(productId) else { return .failure(.unknownOffer) }
        let holds = owned.entitlements.contains { $0.name == entitlement }
        let held = purchases.contains { catalog.rule(for: $0.productId)?.entitlement == entitlement }
        switch rule.eligibility {
        case .anyone: return .success(())
        case .subscribers: return holds ? .success(()) : .failure(.notEligible)
        case .lapsed: return held && !holds ? .success(()) : .failure(.notEligible)
        }
    }

    /// Introductory-offer eligibility as the server judges it: only a customer who never subscribed to what the product
    /// grants (any plan of it, refunded or not) gets the introductory offer — across Apple IDs, which StoreKit's own
    /// judgement (per Apple ID and subscription group) cannot see. A retired product is not sold: nothing to judge.
    public static func introductoryOfferAllowed(productId: String, catalog: LedgerCatalog, purchases: [PurchaseRecord]) -> Result<Bool, Refusal> {
        guard let product = catalog.rule(for: productId), product.type == .autoRenewableSubscription, let entitlement = product.entitlement else {
            return .failure(.unknownProduct)
        }
        guard !product.isRetired else { return .failure(.productRetired) }
        return .success(!purchases.contains { $0.productType == .autoRenewableSubscription && catalog.rule(for: $0.productId)?.entitlement == entitlement })
    }
}
