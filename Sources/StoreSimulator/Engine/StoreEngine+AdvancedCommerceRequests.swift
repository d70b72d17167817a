import AppStoreFormats
import Foundation

/// The server's requests on an Advanced Commerce subscription: metadata, prices, a migration from an In-App
/// Purchase subscription, cancel and revoke, each run through `serving`.
extension StoreEngine {
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
