import AppStoreFormats
import Crypto
import Foundation

/// An Advanced Commerce API purchase: the request the app's server signed, and the signature's nonce (the App Store
/// takes each once).
public struct AdvancedCommercePurchase: Sendable, Hashable {
    public var request: AdvancedCommerceInAppRequest
    public var nonce: String
    public init(request: AdvancedCommerceInAppRequest, nonce: String) {
        self.request = request
        self.nonce = nonce
    }
}

/// The Advanced Commerce API: purchases of the generic products with a request the app's server signed (one-time
/// charges and subscriptions), and the server's changes to those subscriptions — metadata (METADATA_UPDATE), prices
/// from the next renewal (PRICE_CHANGE), an In-App Purchase subscription migrated to a generic product (MIGRATION,
/// under a new original transaction id that names the old one), cancel (DID_CHANGE_RENEWAL_STATUS) and revoke (REFUND).
/// Where Apple's documentation is silent (when each notification is sent, what a migration's transaction costs, tax)
/// the simulator's choices are written down in docs/ADVANCED_COMMERCE.md.
extension StoreEngine {
    // MARK: Purchases

    /// Why a purchase of a generic product (or with Advanced Commerce data) cannot go ahead, in Apple's error names;
    /// nil when it can.
    func refusalOfAdvancedCommercePurchase(_ request: AdvancedCommerceInAppRequest?, product: SimulatorCatalog.Product, account: StoreState.Account,
                                           appAccountToken: UUID?, quantity: Int, offer: OfferRequest?, billingPlanType: BillingPlanType?) -> String? {
        guard let request else { return "\(product.productId) is an Advanced Commerce product: it is sold only with advancedCommerceData" }
        guard product.advancedCommerce else { return "InvalidSalable: \(product.productId) is not an Advanced Commerce product" }
        guard quantity == 1, offer == nil, billingPlanType == nil else { return "OperationNotAllowed: an Advanced Commerce purchase takes no quantity, offer or billing plan" }
        guard request.version == "1" else { return "UnexpectedVersion: version must be \"1\"" }
        if let refusal = AdvancedCommerceCheck.check(request.requestInfo) { return "\(refusal.message)" }
        if let token = request.requestInfo?.appAccountToken, !token.isEmpty {
            guard let uuid = UUID(uuidString: token) else { return "InvalidAppAccountToken: not a UUID" }
            if let appAccountToken, appAccountToken != uuid { return "InvalidAppAccountToken: the purchase's appAccountToken differs from the request's" }
        }
        let creates = [AdvancedCommerceInAppRequest.createOneTimeCharge, AdvancedCommerceInAppRequest.createSubscription].contains(request.operation)
        if creates {
            guard let currency = request.currency, currency.utf8.count == 3, currency.allSatisfy({ $0.isUppercase }) else { return "InvalidCurrency: an ISO 4217 code is required" }
            guard request.taxCode.map({ !$0.isEmpty }) == true else { return "NullTaxCode: taxCode is required" }
        }
        if let storefront = request.storefront, storefront != account.storefront { return "MismatchedStorefront: the customer's storefront is \(account.storefront)" }
        switch request.operation {
        case AdvancedCommerceInAppRequest.createOneTimeCharge:
            guard product.type == .consumable else { return "InvalidSalable: one-time charges are sold through the generic consumable" }
            guard let item = request.item else { return "NullItem: item is required" }
            return AdvancedCommerceCheck.check(item, priced: true)?.message
        case AdvancedCommerceInAppRequest.createSubscription:
            guard product.type == .autoRenewableSubscription else { return "InvalidSalable: subscriptions are sold through the generic auto-renewable subscription" }
            guard let period = request.period else { return "NullPeriod: period is required" }
            guard AdvancedCommerceLimits.subscriptionPeriods.contains(period) else { return "InvalidSalableDuration: \(period) is not a subscription period" }
            guard let descriptors = request.descriptors else { return "NullDescriptors: descriptors are required" }
            if let refusal = AdvancedCommerceCheck.check(descriptors, required: true) { return refusal.message }
            if let refusal = AdvancedCommerceCheck.check(request.items, priced: true) { return refusal.message }
            let live = state.subscriptions.values.contains {
                $0.account == account.id && $0.group == product.subscriptionGroupIdentifier && $0.phase != .expired && $0.phase != .revoked
            }
            if live { return "SubscriptionAlreadyActive: the customer has an active subscription of \(product.productId)" }
            return nil
        case AdvancedCommerceInAppRequest.reactivateSubscription:
            guard product.type == .autoRenewableSubscription else { return "InvalidSalable: subscriptions are reactivated through the generic auto-renewable subscription" }
            guard let series = reactivatable(request.transactionId, account: account.id) else {
                return "SubscriptionNotEligible: transactionId names no subscription of the customer's that is active with auto-renew off"
            }
            for sku in (request.items ?? []).compactMap(\.sku) where !(series.advancedCommerce?.items.contains(where: { $0.sku == sku }) ?? false) {
                return "InvalidSKU: \(sku) is not an item of the subscription"
            }
            return nil
        case AdvancedCommerceInAppRequest.modifySubscription:
            return "OperationNotAllowed: the simulator does not take \(request.operation ?? "") (see docs/ADVANCED_COMMERCE.md)"
        default:
            return "InvalidOperation: \(request.operation ?? "no operation")"
        }
    }

    /// The customer's Advanced Commerce series that `transactionId` belongs to, when it can be reactivated: still
    /// serving, auto-renew off.
    func reactivatable(_ transactionId: String?, account: String) -> StoreState.Subscription? {
        guard let transactionId, let stored = state.transactions[transactionId], stored.account == account,
              let original = stored.payload.originalTransactionId, let series = state.subscriptions[original], series.advancedCommerce != nil,
              series.sharedFrom == nil, !series.autoRenewStatus, series.phase == .active || series.phase == .gracePeriod || series.phase == .billingRetry else {
            return nil
        }
        return series
    }

    /// REACTIVATE_SUBSCRIPTION: auto-renew on again, nothing charged now; StoreKit answers the current period's
    /// transaction, and Apple tells of it as of any turning on of auto-renew.
    func reactivate(_ request: AdvancedCommerceInAppRequest, account: String, withReceipt: Bool) throws -> PurchaseResult {
        guard var series = reactivatable(request.transactionId, account: account) else { return .failed(reason: "SubscriptionNotEligible") }
        series.autoRenewStatus = true
        series.expirationIntent = nil
        series.advancedCommerce?.changed(by: request.requestInfo?.requestReferenceId?.lowercased() ?? "")
        state.subscriptions[series.originalTransactionId] = series
        try notify(.didChangeRenewalStatus, .autoRenewEnabled, subscription: series.originalTransactionId, at: clock.now)
        try persist()
        return .purchased(signedTransaction: try signedTransaction(series.latestTransactionId), transactionId: series.latestTransactionId,
                          receipt: withReceipt ? try receipt(for: account) : nil)
    }

    /// Completes a paid Advanced Commerce purchase: the request's price, currency and items; a subscription for the
    /// request's period (a resubscription continues the customer's series of the generic product).
    func completeAdvancedCommerce(_ base: JWSTransactionDecodedPayload, _ request: AdvancedCommerceInAppRequest,
                                  request pending: StoreState.PendingPurchase, product: SimulatorCatalog.Product) throws -> String {
        var payload = base
        let id = payload.transactionId ?? state.mintId()
        let now = clock.now
        payload.currency = request.currency
        let referenceId = request.requestInfo?.requestReferenceId?.lowercased() ?? ""
        if product.type != .autoRenewableSubscription {
            let item = request.item ?? AdvancedCommerceItem()
            payload.price = item.price ?? 0
            var info = AdvancedCommerceTransactionInfo()
            info.items = [AdvancedCommerceItem(sku: item.sku, description: item.description, displayName: item.displayName, price: item.price)]
            info.requestReferenceId = referenceId
            info.taxCode = request.taxCode
            info.taxExclusivePrice = item.price
            info.estimatedTax = 0
            info.taxRate = "0"
            payload.advancedCommerceInfo = try AppStoreJSONValue(encoding: info)
            state.transactions[id] = .init(payload: payload, account: pending.account, unfinishedOn: [pending.device])
            state.transactionOrder.append(id)
            try notify(.oneTimeCharge, nil, transactionId: id)
            try persist()
            return id
        }
        guard let group = product.subscriptionGroupIdentifier, let period = request.period.flatMap(SubscriptionPeriod.init(iso8601:)) else {
            throw SimulatorError.catalog("the Advanced Commerce subscription \(product.productId) has no group, or the request no period")
        }
        var terms = AdvancedCommerceTerms(
            descriptors: AdvancedCommerceDescriptors(description: request.descriptors?.description, displayName: request.descriptors?.displayName),
            items: (request.items ?? []).map {
                .init(sku: $0.sku ?? "", description: $0.description ?? "", displayName: $0.displayName ?? "", price: $0.price ?? 0, offer: $0.offer)
            },
            period: request.period ?? "", currency: request.currency ?? catalog.currency, taxCode: request.taxCode ?? "",
            requestReferenceId: referenceId, consistencyToken: AdvancedCommerceTerms.token(1))
        terms.items = terms.items.map { item in
            var item = item
            if (item.offer?.periodCount ?? 0) < 1 { item.offer = nil }
            return item
        }
        payload.subscriptionGroupIdentifier = group
        payload.webOrderLineItemId = state.mintId()
        payload.price = terms.chargedPrice
        payload.advancedCommerceInfo = try AppStoreJSONValue(encoding: terms.transactionInfo)
        payload.expiresDate = now.addingTimeInterval(rate.duration(of: period))
        let previous = state.subscriptions.values.first { $0.account == pending.account && $0.group == group && $0.sharedFrom == nil }
        if let previous {
            payload.originalTransactionId = previous.originalTransactionId
            payload.originalPurchaseDate = state.transactions[previous.originalTransactionId]?.payload.purchaseDate
        }
        state.transactions[id] = .init(payload: payload, account: pending.account, unfinishedOn: [pending.device])
        state.transactionOrder.append(id)
        let original = payload.originalTransactionId ?? id
        var series = StoreState.Subscription(
            originalTransactionId: original, account: pending.account, group: group, latestTransactionId: id, productId: product.productId,
            autoRenewProductId: product.productId, autoRenewStatus: true, expiresDate: payload.expiresDate!, phase: .active)
        series.advancedCommerce = terms
        state.subscriptions[original] = series
        try notify(.subscribed, previous == nil ? .initialBuy : .resubscribe, subscription: original, at: now)
        try persist()
        return id
    }

    /// Stamps the next period of an Advanced Commerce series on `payload` (renewing moves the terms on first):
    /// the items' prices, their info, the request's period. Returns the period's length.
    func stampAdvancedCommercePeriod(_ series: inout StoreState.Subscription, _ payload: inout JWSTransactionDecodedPayload, renewing: Bool) -> TimeInterval {
        guard var terms = series.advancedCommerce else { return 0 }
        if renewing {
            terms.renew()
            terms.newToken()
        }
        series.advancedCommerce = terms
        payload.price = terms.chargedPrice
        payload.currency = terms.currency
        payload.advancedCommerceInfo = try? AppStoreJSONValue(encoding: terms.transactionInfo)
        return rate.duration(of: SubscriptionPeriod(iso8601: terms.period) ?? SubscriptionPeriod(value: 1, unit: .month))
    }
}
