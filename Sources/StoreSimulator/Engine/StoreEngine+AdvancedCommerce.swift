import AppStoreFormats
import Crypto
import Foundation

/// What an Advanced Commerce API subscription sells: its names, its items (each with its price, an offer still running,
/// and changes waiting for the next renewal), its period, and the consistency token the next change must quote.
struct AdvancedCommerceTerms: Codable, Sendable {
    var descriptors: AdvancedCommerceDescriptors
    /// Names that take over at the next renewal (`NEXT_BILL_CYCLE`).
    var nextDescriptors: AdvancedCommerceDescriptors?
    var items: [Item]
    var period: String
    var currency: String
    var taxCode: String
    var requestReferenceId: String
    var consistencyToken: String
    /// How many changes the subscription had: the consistency token's sequence number.
    var revision: Int = 1

    struct Item: Codable, Sendable {
        var sku: String
        var description: String
        var displayName: String
        /// Milliunits per period.
        var price: Int64
        /// An offer running, its `periodCount` the periods left including the current one.
        var offer: AdvancedCommerceOffer?
        /// A metadata change waiting for the next renewal (`SKU`, `displayName`, `description`).
        var next: AdvancedCommerceItem?
        /// A price change waiting for the next renewal, and what goes with it if the customer declines an increase.
        var nextPrice: Int64?
        var dependentSKUs: [String]?

        /// What this item costs in the current period.
        var chargedPrice: Int64 { offer.flatMap { ($0.periodCount ?? 0) > 0 ? $0.price : nil } ?? price }

        /// The item as a transaction reports it.
        var transactionItem: AdvancedCommerceItem {
            AdvancedCommerceItem(sku: sku, description: description, displayName: displayName, price: chargedPrice, offer: offer)
        }

        /// The item as it renews: names and price changes applied, one offer period fewer.
        var renewalItem: AdvancedCommerceItem {
            var item = AdvancedCommerceItem(sku: next?.sku ?? sku, description: next?.description ?? description,
                                            displayName: next?.displayName ?? displayName, price: price)
            if var offer, let left = offer.periodCount, left > 1 {
                offer.periodCount = left - 1
                item.offer = offer
                item.price = offer.price
            }
            // A decrease simply renews cheaper; an increase is announced beside the price it replaces.
            if let nextPrice, nextPrice < price, item.offer == nil { item.price = nextPrice }
            if let nextPrice, nextPrice > price {
                item.priceIncreaseInfo = AdvancedCommercePriceIncreaseInfo(dependentSKUs: dependentSKUs, price: nextPrice, status: "SCHEDULED")
            }
            return item
        }
    }

    /// The price of the next renewal: every item at its renewal price (a price change included).
    var renewalPrice: Int64 {
        Self.sum(items.map { item in
            if let offer = item.offer, let left = offer.periodCount, left > 1 { return offer.price ?? 0 }
            return item.nextPrice ?? item.price
        })
    }

    /// What the current period costs.
    var chargedPrice: Int64 { Self.sum(items.map(\.chargedPrice)) }

    /// A sum that cannot trap: the checks keep prices far below overflow, and a state file from before them must not
    /// stop the simulator.
    static func sum(_ prices: [Int64]) -> Int64 {
        prices.reduce(0) { total, price in
            let (sum, overflow) = total.addingReportingOverflow(price)
            return overflow ? .max : sum
        }
    }

    var transactionInfo: AdvancedCommerceTransactionInfo {
        var info = AdvancedCommerceTransactionInfo()
        info.descriptors = descriptors
        info.items = items.map(\.transactionItem)
        info.period = period
        info.requestReferenceId = requestReferenceId
        info.taxCode = taxCode
        // The simulator charges no tax: prices are what the request says.
        info.taxExclusivePrice = chargedPrice
        info.estimatedTax = 0
        info.taxRate = "0"
        return info
    }

    var renewalInfo: AdvancedCommerceRenewalInfo {
        var info = AdvancedCommerceRenewalInfo()
        info.consistencyToken = consistencyToken
        info.descriptors = nextDescriptors.map { next in
            AdvancedCommerceDescriptors(description: next.description ?? descriptors.description, displayName: next.displayName ?? descriptors.displayName)
        } ?? descriptors
        info.items = items.map(\.renewalItem)
        info.period = period
        info.requestReferenceId = requestReferenceId
        info.taxCode = taxCode
        return info
    }

    /// A new change: a new consistency token.
    mutating func changed(by requestReferenceId: String) {
        revision += 1
        self.requestReferenceId = requestReferenceId
        consistencyToken = Self.token(revision)
    }

    static func token(_ revision: Int) -> String { "1.\(revision).\(UUID().uuidString.lowercased())" }

    /// Renewal info changed without a request (a renewal): a new consistency token all the same.
    mutating func newToken() {
        revision += 1
        consistencyToken = Self.token(revision)
    }

    /// Moves the terms to their next period: waiting changes applied, running offers one period shorter.
    mutating func renew() {
        if let next = nextDescriptors {
            descriptors = AdvancedCommerceDescriptors(description: next.description ?? descriptors.description,
                                                      displayName: next.displayName ?? descriptors.displayName)
            nextDescriptors = nil
        }
        for index in items.indices {
            var item = items[index]
            if let next = item.next {
                item.sku = next.sku ?? item.sku
                item.description = next.description ?? item.description
                item.displayName = next.displayName ?? item.displayName
                item.next = nil
            }
            if let price = item.nextPrice { item.price = price; item.nextPrice = nil; item.dependentSKUs = nil }
            if let left = item.offer?.periodCount { item.offer = left > 1 ? item.offer.map { var o = $0; o.periodCount = left - 1; return o } : nil }
            items[index] = item
        }
    }
}

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

    // MARK: The server's requests

    /// Change Subscription Metadata: names now (`IMMEDIATELY`: on the current period's transaction too) or from the
    /// next renewal; METADATA_UPDATE at once.
    public func advancedCommerceChangeMetadata(transactionId: String, _ request: AdvancedCommerceChangeMetadataRequest,
                                               fingerprint: String) throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        try serving(request.requestInfo, fingerprint: fingerprint, transactionId: transactionId, advancedCommerce: true,
                    storefront: request.storefront) { series in
            guard request.descriptors != nil || !(request.items ?? []).isEmpty else { return .failure(.init(.atLeastOneItem, "At least one item or the descriptors must change.")) }
            var terms = series.advancedCommerce!
            if let descriptors = request.descriptors {
                guard let effective = descriptors.effective else { return .failure(.init(.nullEffective, "Effective is required.")) }
                if let refusal = AdvancedCommerceCheck.check(descriptors, required: false) { return .failure(refusal) }
                if effective == .immediately {
                    terms.descriptors.description = descriptors.description ?? terms.descriptors.description
                    terms.descriptors.displayName = descriptors.displayName ?? terms.descriptors.displayName
                } else {
                    terms.nextDescriptors = AdvancedCommerceDescriptors(description: descriptors.description, displayName: descriptors.displayName)
                }
            }
            let changes = request.items ?? []
            guard changes.count <= AdvancedCommerceLimits.maxItems else { return .failure(.init(.itemLimitExceeded, "The number of items exceeds the limit.")) }
            guard Set(changes.compactMap(\.currentSKU)).count == changes.count else {
                return .failure(.init(.multipleOperationsOnSingleSKU, "Multiple operations on a single SKU."))
            }
            for change in changes {
                guard let current = change.currentSKU, let index = terms.items.firstIndex(where: { $0.sku == current }) else {
                    return .failure(.init(.invalidSKU, "Invalid SKU: no item of the subscription has that currentSKU."))
                }
                // A new SKU must not be one the subscription holds, now or from the next renewal.
                if let sku = change.sku, sku != current,
                   terms.items.contains(where: { $0.sku == sku || $0.next?.sku == sku }) || changes.contains(where: { $0.currentSKU != current && $0.sku == sku }) {
                    return .failure(.init(.productAlreadyExists, "The SKU is already part of the subscription."))
                }
                guard let effective = change.effective else { return .failure(.init(.nullEffective, "Effective is required.")) }
                guard change.sku != nil || change.displayName != nil || change.description != nil else {
                    return .failure(.init(.atLeastOneOfDisplayNameOrDescription, "At least one of SKU, display name or description must change."))
                }
                if let refusal = AdvancedCommerceCheck.check(AdvancedCommerceItem(sku: change.sku ?? current, description: change.description, displayName: change.displayName),
                                            priced: false, namesRequired: false) { return .failure(refusal) }
                if effective == .immediately {
                    terms.items[index].sku = change.sku ?? terms.items[index].sku
                    terms.items[index].description = change.description ?? terms.items[index].description
                    terms.items[index].displayName = change.displayName ?? terms.items[index].displayName
                } else {
                    terms.items[index].next = AdvancedCommerceItem(sku: change.sku, description: change.description, displayName: change.displayName)
                }
            }
            terms.taxCode = request.taxCode ?? terms.taxCode
            terms.changed(by: request.requestInfo?.requestReferenceId?.lowercased() ?? "")
            series.advancedCommerce = terms
            // Names changed now show on the current period's transaction as Apple signs it from now on.
            if var latest = state.transactions[series.latestTransactionId]?.payload {
                var info = latest.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self) ?? terms.transactionInfo
                info.descriptors = terms.descriptors
                info.items = zip(info.items ?? [], terms.items).map { stamped, item in
                    var stamped = stamped
                    stamped.sku = item.sku
                    stamped.description = item.description
                    stamped.displayName = item.displayName
                    return stamped
                }
                latest.advancedCommerceInfo = try AppStoreJSONValue(encoding: info)
                state.transactions[series.latestTransactionId]?.payload = latest
            }
            return .success(.metadataUpdate)
        }
    }

    /// Change Subscription Price: new prices from the next renewal, at least a day before it, for an active
    /// subscription not in billing retry; PRICE_CHANGE at once (an increase shows as `priceIncreaseInfo` `SCHEDULED`).
    public func advancedCommerceChangePrice(transactionId: String, _ request: AdvancedCommercePriceChangeRequest,
                                            fingerprint: String) throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        try serving(request.requestInfo, fingerprint: fingerprint, transactionId: transactionId, advancedCommerce: true,
                    storefront: request.storefront) { series in
            guard series.phase == .active, series.expiresDate.timeIntervalSince(clock.now) >= rate.secondsPerDay else {
                return .failure(.init(.subscriptionNotEligible, "Subscription not eligible: it must be active, and renew more than a day from now."))
            }
            guard let items = request.items else { return .failure(.init(.nullItems, "Items are required.")) }
            guard items.count <= AdvancedCommerceLimits.maxItems else { return .failure(.init(.itemLimitExceeded, "The number of items exceeds the limit.")) }
            guard !items.isEmpty else { return .failure(.init(.atLeastOneItem, "At least one item is required.")) }
            var terms = series.advancedCommerce!
            if let currency = request.currency, currency != terms.currency { return .failure(.init(.invalidCurrency, "Invalid currency: the subscription is in \(terms.currency).")) }
            var seen = Set<String>()
            for change in items {
                guard let sku = change.sku else { return .failure(.init(.nullSKU, "SKU is required.")) }
                guard let index = terms.items.firstIndex(where: { $0.sku == sku }), seen.insert(sku).inserted else {
                    return .failure(.init(.invalidSKU, "Invalid SKU: not an item of the subscription, or named twice."))
                }
                guard let price = change.price else { return .failure(.init(.nullPrice, "Price is required.")) }
                guard price >= 0 else { return .failure(.init(.negativePrice, "The price must contain a positive number.")) }
                guard price <= AdvancedCommerceLimits.maxPrice else { return .failure(.init(.generalBadRequest, "InvalidPrice: too high.")) }
                for dependent in change.dependentSKUs ?? [] where !terms.items.contains(where: { $0.sku == dependent }) || dependent == sku {
                    return .failure(.init(.invalidSKU, "Invalid SKU: a dependent SKU is not another item of the subscription."))
                }
                guard terms.items[index].nextPrice == nil else {
                    return .failure(.init(.priceChangeAlreadyCommunicated, "A price change of this SKU is already under way."))
                }
                terms.items[index].nextPrice = price == terms.items[index].price ? nil : price
                terms.items[index].dependentSKUs = change.dependentSKUs
            }
            terms.changed(by: request.requestInfo?.requestReferenceId?.lowercased() ?? "")
            series.advancedCommerce = terms
            return .success(.priceChange)
        }
    }

    /// Migrate a Subscription to Advanced Commerce API: the In-App Purchase series ends and goes on as a series of the
    /// generic product `targetProductId` under a new original transaction id (`previousOriginalTransactionId` names
    /// the old one). The current period is kept as paid; its items renew at the old product's price (all of it on the
    /// first item: a migration request carries no prices; the server changes them with Change Subscription Price).
    public func advancedCommerceMigrate(transactionId: String, _ request: AdvancedCommerceMigrateRequest,
                                        fingerprint: String) throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        try serving(request.requestInfo, fingerprint: fingerprint, transactionId: transactionId, advancedCommerce: false,
                    storefront: request.storefront) { old in
            guard migration(of: old.originalTransactionId) == nil else { return .failure(.init(.subscriptionAlreadyMigrated, "The subscription already migrated.")) }
            guard let targetId = request.targetProductId else { return .failure(.init(.nullTargetProductId, "Target product id is required.")) }
            guard let target = catalog.product(targetId), target.advancedCommerce, target.type == .autoRenewableSubscription, let group = target.subscriptionGroupIdentifier else {
                return .failure(.init(.invalidTargetProductId, "Invalid target product id: not a generic Advanced Commerce subscription."))
            }
            guard old.phase == .active || old.phase == .gracePeriod || old.phase == .billingRetry else {
                return .failure(.init(.subscriptionNotEligible, "Subscription not eligible: it is not active."))
            }
            // One live subscription per group: a customer who already subscribes to the generic product would pay twice.
            let live = state.subscriptions.values.contains { $0.account == old.account && $0.group == group && $0.phase != .expired && $0.phase != .revoked }
            guard !live else { return .failure(.init(.subscriptionAlreadyExists, "The customer already has a subscription of \(targetId).")) }
            guard let descriptors = request.descriptors else { return .failure(.init(.nullDescriptors, "Descriptors are required.")) }
            if let refusal = AdvancedCommerceCheck.check(descriptors, required: true) { return .failure(refusal) }
            guard request.taxCode.map({ !$0.isEmpty }) == true else { return .failure(.init(.nullTaxCode, "Tax code is required.")) }
            if let refusal = AdvancedCommerceCheck.check(request.items, priced: false) { return .failure(refusal) }
            if request.renewalItems != nil, let refusal = AdvancedCommerceCheck.check(request.renewalItems, priced: false) { return .failure(refusal) }
            guard let oldProduct = catalog.product(old.autoRenewProductId) ?? catalog.product(old.productId), let oldPeriod = oldProduct.period,
                  let latest = state.transactions[old.latestTransactionId]?.payload, let account = state.accounts[old.account] else {
                return .failure(.init(.subscriptionNotEligible, "Subscription not eligible: its product is no longer sold."))
            }
            let renewalPrice = state.priceOverrides[oldProduct.productId] ?? oldProduct.price
            func terms(_ items: [AdvancedCommerceItem]) -> [AdvancedCommerceTerms.Item] {
                items.enumerated().map { index, item in
                    .init(sku: item.sku ?? "", description: item.description ?? "", displayName: item.displayName ?? "", price: index == 0 ? renewalPrice : 0)
                }
            }
            let period = oldPeriod.description
            var newTerms = AdvancedCommerceTerms(
                descriptors: AdvancedCommerceDescriptors(description: descriptors.description, displayName: descriptors.displayName),
                items: terms(request.items ?? []), period: AdvancedCommerceLimits.subscriptionPeriods.contains(period) ? period : "P1M",
                currency: latest.currency ?? catalog.currency, taxCode: request.taxCode ?? "",
                requestReferenceId: request.requestInfo?.requestReferenceId?.lowercased() ?? "", consistencyToken: AdvancedCommerceTerms.token(1))
            // The current period as it was paid for: the request's items, the whole of what the period cost on the first.
            var current = newTerms.transactionInfo
            let paid = latest.price ?? 0
            current.items = current.items?.enumerated().map { index, item in
                var item = item
                item.price = index == 0 ? paid : 0
                return item
            }
            current.taxExclusivePrice = paid
            // What renews, when it differs from what the current period holds.
            if let renewalItems = request.renewalItems { newTerms.items = terms(renewalItems) }
            let now = clock.now
            let id = state.mintId()
            var payload = latest
            payload.transactionId = id
            payload.originalTransactionId = id
            payload.previousOriginalTransactionId = old.originalTransactionId
            payload.productId = targetId
            payload.subscriptionGroupIdentifier = group
            payload.webOrderLineItemId = state.mintId()
            payload.purchaseDate = now
            payload.originalPurchaseDate = now
            payload.expiresDate = old.expiresDate
            payload.transactionReason = .purchase
            payload.offerType = nil
            payload.offerIdentifier = nil
            payload.offerDiscountType = nil
            payload.offerPeriod = nil
            payload.isUpgraded = nil
            payload.billingPlanType = nil
            payload.commitmentInfo = nil
            payload.advancedCommerceInfo = try AppStoreJSONValue(encoding: current)
            if let token = request.requestInfo?.appAccountToken.flatMap({ UUID(uuidString: $0) }) { payload.appAccountToken = token }
            state.transactions[id] = .init(payload: payload, account: old.account, unfinishedOn: account.devices)
            state.transactionOrder.append(id)
            var ended = old
            ended.phase = .expired
            ended.autoRenewStatus = false
            ended.commitment = nil
            state.subscriptions[old.originalTransactionId] = ended
            var migrated = StoreState.Subscription(
                originalTransactionId: id, account: old.account, group: group, latestTransactionId: id, productId: targetId,
                autoRenewProductId: targetId, autoRenewStatus: old.autoRenewStatus, expiresDate: old.expiresDate, phase: old.phase,
                expirationIntent: old.expirationIntent, gracePeriodExpiresDate: old.gracePeriodExpiresDate, billingRetrySince: old.billingRetrySince)
            migrated.advancedCommerce = newTerms
            state.subscriptions[id] = migrated
            old = migrated
            return .success(.migration)
        }
    }

    /// Cancel a Subscription: auto-renew off; the subscription serves to the end of its period. Apple tells of it as
    /// any turning off of auto-renew (DID_CHANGE_RENEWAL_STATUS / AUTO_RENEW_DISABLED).
    public func advancedCommerceCancel(transactionId: String, _ request: AdvancedCommerceCancelRequest,
                                       fingerprint: String) throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        try serving(request.requestInfo, fingerprint: fingerprint, transactionId: transactionId, advancedCommerce: true,
                    storefront: request.storefront) { series in
            guard series.phase != .expired, series.phase != .revoked else { return .failure(.init(.subscriptionNotEligible, "Subscription not eligible: it is not active.")) }
            guard series.autoRenewStatus else { return .success(nil) }
            series.autoRenewStatus = false
            series.expirationIntent = .customerCancelled
            series.advancedCommerce?.changed(by: request.requestInfo?.requestReferenceId?.lowercased() ?? "")
            return .success(.didChangeRenewalStatus)
        }
    }

    /// Revoke Subscription: the current period is refunded (in full, or prorated for the time left) and the
    /// subscription ends now; Apple sends REFUND, the items carry the refund.
    public func advancedCommerceRevoke(transactionId: String, _ request: AdvancedCommerceRevokeRequest,
                                       fingerprint: String) throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        guard request.refundRiskingPreference != nil else { return .failure(.init(.nullRefundRisking, "Refund risking preference is required.")) }
        guard let type = request.refundType, AdvancedCommerceLimits.refundTypes.contains(type) else { return .failure(.init(.invalidRefundType, "Invalid refund type.")) }
        guard let reason = request.refundReason, AdvancedCommerceLimits.refundReasons.contains(reason) else { return .failure(.init(.invalidRefundReason, "Invalid refund reason.")) }
        let declined = reason == "SIMULATE_REFUND_DECLINE"
        if declined, environment == .production {
            return .failure(.init(.simulateRefundDeclineOnlyInSandbox, "A simulated refund decline is for the sandbox only."))
        }
        return try serving(request.requestInfo, fingerprint: fingerprint, transactionId: transactionId, advancedCommerce: true,
                           storefront: request.storefront) { series in
            guard series.phase == .active || series.phase == .gracePeriod || series.phase == .billingRetry else {
                return .failure(.init(.revokeOnInactiveSubscription, "The subscription is not active."))
            }
            // Sandbox's way to test a declined refund: nothing changes, and Apple says so.
            if declined {
                try notify(.refundDeclined, nil, transactionId: series.latestTransactionId)
                return .success(nil)
            }
            let now = clock.now
            guard var latest = state.transactions[series.latestTransactionId]?.payload, let start = latest.purchaseDate, let end = latest.expiresDate else {
                return .failure(.init(.subscriptionNotEligible, "Subscription not eligible."))
            }
            let share = type == "FULL" ? 100_000 : Int((max(0, min(1, end.timeIntervalSince(now) / max(1, end.timeIntervalSince(start)))) * 100_000).rounded())
            var info = latest.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self) ?? AdvancedCommerceTransactionInfo()
            info.items = (info.items ?? []).map { item in
                var item = item
                item.revocationDate = now
                let (scaled, overflow) = (item.price ?? 0).multipliedReportingOverflow(by: Int64(share))
                // Never more than what earlier refunds of the item left.
                let left = max(0, (item.price ?? 0) - AdvancedCommerceTerms.sum((item.refunds ?? []).map { $0.refundAmount ?? 0 }))
                item.refunds = (item.refunds ?? []) + [AdvancedCommerceRefund(refundAmount: min(overflow ? left : scaled / 100_000, left), refundDate: now,
                                                                              refundReason: reason, refundType: type)]
                return item
            }
            latest.advancedCommerceInfo = try AppStoreJSONValue(encoding: info)
            state.transactions[series.latestTransactionId]?.payload = latest
            series.autoRenewStatus = false
            series.advancedCommerce?.changed(by: request.requestInfo?.requestReferenceId?.lowercased() ?? "")
            state.subscriptions[series.originalTransactionId] = series
            // `refund` revokes the period, ends the series and sends REFUND.
            _ = try refund(series.latestTransactionId, reason: reason == "FULFILLMENT_ISSUE" ? .refundedDueToIssue : .refundedForOtherReason, percentage: share)
            series = state.subscriptions[series.originalTransactionId] ?? series
            return .success(nil)
        }
    }

    /// Request Transaction Refund: refunds items of one transaction — `FULL`, `PRORATED` (the time left of a
    /// subscription's latest period) or `CUSTOM` (`refundAmount`) — revoking those marked `revoke`. Apple sends REFUND;
    /// the transaction is revoked (access ends, `REFUND_FULL`) only when all its items are; revoked items of a
    /// subscription's current period do not renew. Answers the transaction, signed.
    public func advancedCommerceRequestRefund(transactionId: String, _ request: AdvancedCommerceRequestRefundRequest,
                                              fingerprint: String) throws -> Result<AdvancedCommerceTransactionResponse, AdvancedCommerceRefusal> {
        try processSubscriptions()
        if let refusal = AdvancedCommerceCheck.check(request.requestInfo) { return .failure(refusal) }
        guard request.refundRiskingPreference != nil else { return .failure(.init(.nullRefundRisking, "Refund risking preference is required.")) }
        guard let items = request.items, !items.isEmpty else { return .failure(.init(.atLeastOneItem, "At least one item is required.")) }
        guard items.count <= AdvancedCommerceLimits.maxItems else { return .failure(.init(.itemLimitExceeded, "The number of items exceeds the limit.")) }
        guard let stored = state.transactions[transactionId] else { return .failure(.init(.transactionIdNotFound, "Transaction id not found.")) }
        if let storefront = request.storefront, storefront != state.accounts[stored.account]?.storefront {
            return .failure(.init(.mismatchedStorefront, "The storefront is not the customer's."))
        }
        var payload = stored.payload
        guard var info = payload.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self), var sold = info.items, stored.sharedFrom == nil else {
            return .failure(.init(.subscriptionNotEligible, "Not an Advanced Commerce transaction."))
        }
        let referenceId = request.requestInfo?.requestReferenceId?.lowercased() ?? ""
        if let served = state.advancedCommerceRequests?[referenceId] {
            guard served == fingerprint else { return .failure(.init(.repeatedRequestReferenceId, "The request reference id was used by another request.")) }
            return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
        }
        guard payload.revocationDate == nil else { return .failure(.init(.alreadyRefunded, "The transaction was refunded already.")) }
        // Apple's sandbox declines a whole request or none of it.
        let declines = items.filter { $0.refundReason == "SIMULATE_REFUND_DECLINE" }.count
        guard declines == 0 || declines == items.count else {
            return .failure(.init(.partialSimulateRefundDecline, "A simulated decline covers every item of the request or none."))
        }
        let now = clock.now
        let series = payload.originalTransactionId.flatMap { state.subscriptions[$0] }
        var declined = false
        for change in items {
            guard let sku = change.sku, let index = sold.firstIndex(where: { $0.sku == sku }) else { return .failure(.init(.invalidSKU, "Invalid SKU.")) }
            guard change.revoke != nil else { return .failure(.init(.generalBadRequest, "revoke is required.")) }
            guard let type = change.refundType else { return .failure(.init(.nullRefundType, "Refund type is required.")) }
            guard AdvancedCommerceLimits.refundTypes.contains(type) else { return .failure(.init(.invalidRefundType, "Invalid refund type.")) }
            guard let reason = change.refundReason else { return .failure(.init(.nullRefundReason, "Refund reason is required.")) }
            guard AdvancedCommerceLimits.refundReasons.contains(reason) else { return .failure(.init(.invalidRefundReason, "Invalid refund reason.")) }
            if reason == "SIMULATE_REFUND_DECLINE" {
                guard environment != .production else { return .failure(.init(.simulateRefundDeclineOnlyInSandbox, "A simulated refund decline is for the sandbox only.")) }
                declined = true
                continue
            }
            guard sold[index].revocationDate == nil else { return .failure(.init(.alreadyRefunded, "The item was refunded already.")) }
            let price = sold[index].price ?? 0
            let amount: Int64
            switch type {
            case "CUSTOM":
                guard let custom = change.refundAmount else { return .failure(.init(.nullRefundAmount, "Refund amount is required for a CUSTOM refund.")) }
                guard custom >= 0 else { return .failure(.init(.negativeRefundAmount, "The refund amount is negative.")) }
                amount = min(custom, price)
            case "PRORATED":
                guard change.refundAmount == nil else { return .failure(.init(.refundAmountWithoutCustom, "A refund amount needs refundType CUSTOM.")) }
                guard let series, series.latestTransactionId == transactionId, let start = payload.purchaseDate, let end = payload.expiresDate else {
                    return .failure(.init(.proratedOnlyLatestTransaction, "Prorated refunds are for a subscription's latest transaction."))
                }
                let left = max(0, min(1, end.timeIntervalSince(now) / max(1, end.timeIntervalSince(start))))
                amount = Int64(min((Double(price) * left).rounded(), Double(AdvancedCommerceLimits.maxPrice)))
            default:
                guard change.refundAmount == nil else { return .failure(.init(.refundAmountWithoutCustom, "A refund amount needs refundType CUSTOM.")) }
                amount = price
            }
            // Never more than what is left of the item's price after earlier refunds.
            let left = max(0, price - AdvancedCommerceTerms.sum((sold[index].refunds ?? []).map { $0.refundAmount ?? 0 }))
            guard left > 0 || change.revoke == true else { return .failure(.init(.alreadyRefunded, "The item was refunded in full already.")) }
            sold[index].refunds = (sold[index].refunds ?? []) + [AdvancedCommerceRefund(refundAmount: min(amount, left), refundDate: now, refundReason: reason,
                                                                                         refundType: type)]
            if change.revoke == true { sold[index].revocationDate = now }
        }
        var requests = state.advancedCommerceRequests ?? [:]
        requests[referenceId] = fingerprint
        state.advancedCommerceRequests = requests
        if declined {
            try notify(.refundDeclined, nil, transactionId: transactionId)
            try persist()
            return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
        }
        info.items = sold
        payload.advancedCommerceInfo = try AppStoreJSONValue(encoding: info)
        state.transactions[transactionId]?.payload = payload
        let reason: RevocationReason = items.contains { $0.refundReason == "FULFILLMENT_ISSUE" } ? .refundedDueToIssue : .refundedForOtherReason
        if sold.allSatisfy({ $0.revocationDate != nil }) {
            // Every item revoked: the whole purchase is (REFUND_FULL: a consumable's credit goes, whatever money came
            // back — the items carry the amounts), and the series ends, as any refund of its period ends it.
            _ = try refund(transactionId, reason: reason, percentage: 100_000)
        } else {
            // Revoked items of a subscription's current period do not renew.
            if let original = payload.originalTransactionId, var series = state.subscriptions[original], series.latestTransactionId == transactionId,
               var terms = series.advancedCommerce {
                let revoked = Set(sold.filter { $0.revocationDate != nil }.compactMap(\.sku))
                terms.items.removeAll { revoked.contains($0.sku) }
                series.advancedCommerce = terms
                state.subscriptions[original] = series
            }
            try notify(.refund, nil, transactionId: transactionId)
            try persist()
        }
        return .success(AdvancedCommerceTransactionResponse(signedTransactionInfo: try signedTransaction(transactionId)))
    }

    /// Runs one of the server's requests on the series of `transactionId` (the original or any later transaction):
    /// the request info checked, a retry of a request already served answered again without doing it twice, the
    /// consistency token held to the latest. `change` edits the series and names the notification to send (nil: none,
    /// or sent already); the answer is the series' latest transaction and renewal info, signed now.
    private func serving(_ info: AdvancedCommerceRequestInfo?, fingerprint: String, transactionId: String, advancedCommerce: Bool,
                         storefront: String?, _ change: (inout StoreState.Subscription) throws -> Result<NotificationTypeV2?, AdvancedCommerceRefusal>)
        throws -> Result<AdvancedCommerceSubscriptionResponse, AdvancedCommerceRefusal> {
        try processSubscriptions()
        if let refusal = AdvancedCommerceCheck.check(info) { return .failure(refusal) }
        guard let stored = state.transactions[transactionId] else { return .failure(.init(.transactionIdNotFound, "Transaction id not found.")) }
        guard let original = stored.payload.originalTransactionId, var series = state.subscriptions[original], series.sharedFrom == nil else {
            return .failure(.init(.subscriptionDoesNotExist, "Subscription does not exist."))
        }
        if let storefront, storefront != state.accounts[series.account]?.storefront {
            return .failure(.init(.mismatchedStorefront, "The storefront is not the customer's."))
        }
        let referenceId = info?.requestReferenceId?.lowercased() ?? ""
        if let served = state.advancedCommerceRequests?[referenceId] {
            guard served == fingerprint else { return .failure(.init(.repeatedRequestReferenceId, "The request reference id was used by another request.")) }
            // Apple's advice for a request that timed out: send it again with the same id. It is not applied twice.
            let current = migration(of: original) ?? series
            return .success(try answer(current))
        }
        if advancedCommerce {
            guard let terms = series.advancedCommerce else { return .failure(.init(.subscriptionNotEligible, "Subscription not eligible: not an Advanced Commerce subscription.")) }
            if let token = info?.consistencyToken, !token.isEmpty, token != terms.consistencyToken {
                return .failure(.init(.invalidConsistencyToken, "Invalid consistency token: the subscription changed since."))
            }
        } else if series.advancedCommerce != nil {
            return .failure(.init(.subscriptionAlreadyMigrated, "The subscription already migrated."))
        }
        switch try change(&series) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let notification):
            var requests = state.advancedCommerceRequests ?? [:]
            requests[referenceId] = fingerprint
            state.advancedCommerceRequests = requests
            if state.subscriptions[series.originalTransactionId]?.phase != .revoked { state.subscriptions[series.originalTransactionId] = series }
            if let notification {
                try notify(notification, notification == .didChangeRenewalStatus ? .autoRenewDisabled : nil, subscription: series.originalTransactionId, at: clock.now)
            }
            try persist()
            return .success(try answer(state.subscriptions[series.originalTransactionId] ?? series))
        }
    }

    /// The series a subscription migrated to, if it did.
    private func migration(of original: String) -> StoreState.Subscription? {
        state.subscriptions.values.first {
            $0.originalTransactionId != original && state.transactions[$0.originalTransactionId]?.payload.previousOriginalTransactionId == original
        }
    }

    private func answer(_ series: StoreState.Subscription) throws -> AdvancedCommerceSubscriptionResponse {
        guard let latest = state.transactions[series.latestTransactionId]?.payload else { throw SimulatorError.catalog("series \(series.originalTransactionId) lost its transaction") }
        return AdvancedCommerceSubscriptionResponse(signedRenewalInfo: try sign(renewalInfo(series)), signedTransactionInfo: try sign(latest))
    }
}
