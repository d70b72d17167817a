import AppStoreFormats
import Foundation

/// One retention message the server may pick when Apple asks (Retention Messaging's Get Retention Message): which
/// subscriptions and locales it is for, and what it shows — the message alone, another plan of the group, or a
/// promotional offer signed for the customer. The message (and its image) is uploaded to Apple and approved there.
public struct RetentionMessageRule: Codable, Sendable, Hashable {
    /// The message's identifier at Apple.
    public var messageIdentifier: UUID
    /// The subscriptions the customer is looking at for which the rule applies; nil or empty: any.
    public var productIds: [String]?
    /// The customer's locales (`en-US`) for which it applies; nil or empty: any.
    public var locales: [String]?
    /// Suggest this plan instead (Apple takes one of the same subscription group, other than the current one).
    public var alternateProductId: String?
    /// With ``alternateProductId``: `BILLED_UPFRONT` or `MONTHLY` for plans with a commitment (API 1.21).
    public var billingPlanType: BillingPlanType?
    /// Offer this promotional offer (one of the server's `promotionalOffers`, whose rules say who may have it).
    public var promotionalOfferIdentifier: String?

    public init(messageIdentifier: UUID, productIds: [String]? = nil, locales: [String]? = nil, alternateProductId: String? = nil,
                billingPlanType: BillingPlanType? = nil, promotionalOfferIdentifier: String? = nil) {
        self.messageIdentifier = messageIdentifier
        self.productIds = productIds
        self.locales = locales
        self.alternateProductId = alternateProductId
        self.billingPlanType = billingPlanType
        self.promotionalOfferIdentifier = promotionalOfferIdentifier
    }

    /// Why this rule cannot work with the catalog and offers, or nil.
    public func problem(catalog: LedgerCatalog, offers: [String: PromotionalOfferRule]) -> String? {
        if alternateProductId != nil, promotionalOfferIdentifier != nil { return "choose an alternate product or a promotional offer, not both" }
        for productId in productIds ?? [] where catalog.rule(for: productId)?.type != .autoRenewableSubscription {
            return "\(productId) is not an auto-renewable subscription the catalog sells"
        }
        if let alternate = alternateProductId, catalog.rule(for: alternate)?.type != .autoRenewableSubscription {
            return "alternateProductId \(alternate) is not an auto-renewable subscription the catalog sells"
        }
        // Apple shows only another plan of the same subscription group; the catalog's stand-in for a group is what its
        // plans grant.
        let entitlement = { (productId: String) in catalog.rule(for: productId)?.entitlement }
        if let alternate = alternateProductId, let productIds, productIds.contains(where: { entitlement($0) != entitlement(alternate) }) {
            return "alternateProductId \(alternate) grants something else than the rule's productIds: Apple shows only a plan of the same group"
        }
        if billingPlanType != nil, alternateProductId == nil { return "billingPlanType goes with alternateProductId" }
        if let offer = promotionalOfferIdentifier, offers[offer] == nil { return "promotionalOfferIdentifier \(offer) is not one of promotionalOffers" }
        return nil
    }
}

/// What the server answers Apple's Get Retention Message with.
public enum RetentionChoice: Sendable, Hashable {
    case message(UUID)
    case alternateProduct(UUID, productId: String, billingPlanType: BillingPlanType?)
    /// The offer and the product it is signed for.
    case promotionalOffer(UUID, productId: String, offerIdentifier: String)
}

/// Which retention message a customer gets: pure functions of the request, the rules and the customer's purchases.
public enum RetentionRules {
    /// The first rule, in order, that applies to the subscription and locale and that the customer may have: an
    /// alternate product other than the current one, of the same group; or an offer the offer's rules allow this
    /// customer (judged with ``OfferRules/promotionalOffer(_:productId:rules:catalog:purchases:owned:)``, for the current
    /// product when the offer is set up for it, else for the first of its products in the group). A plan's group is
    /// what it grants (the catalog knows no groups). Nil: no rule applies, and Apple shows the default message.
    public static func choose(productId: String, locale: String, rules: [RetentionMessageRule], offers: [String: PromotionalOfferRule],
                              catalog: LedgerCatalog, purchases: [PurchaseRecord], owned: AccountEntitlements) -> RetentionChoice? {
        // Apple asks only while the subscription is active: the request itself shows the customer holds it, whatever a
        // late renewal notification left the ledger believing (a win-back offer is not for them).
        var owned = owned
        if let current = catalog.rule(for: productId)?.entitlement, !owned.entitlements.contains(where: { $0.name == current }) {
            owned.entitlements.append(Entitlement(name: current, productId: productId, transactionId: "", expiresAt: nil, state: .active, environment: .sandbox))
        }
        let group = catalog.rule(for: productId)?.entitlement
        for rule in rules {
            if let products = rule.productIds, !products.isEmpty, !products.contains(productId) { continue }
            if let locales = rule.locales, !locales.isEmpty, !locales.contains(locale) { continue }
            if let alternate = rule.alternateProductId {
                guard alternate != productId, catalog.rule(for: alternate)?.entitlement == group else { continue }
                return .alternateProduct(rule.messageIdentifier, productId: alternate, billingPlanType: rule.billingPlanType)
            }
            if let offer = rule.promotionalOfferIdentifier {
                let inGroup = (offers[offer]?.productIds ?? []).filter { catalog.rule(for: $0)?.entitlement == group }
                guard let target = inGroup.contains(productId) ? productId : inGroup.first else { continue }
                guard case .success = OfferRules.promotionalOffer(offer, productId: target, rules: offers, catalog: catalog,
                                                                  purchases: purchases, owned: owned) else { continue }
                return .promotionalOffer(rule.messageIdentifier, productId: target, offerIdentifier: offer)
            }
            return .message(rule.messageIdentifier)
        }
        return nil
    }
}
