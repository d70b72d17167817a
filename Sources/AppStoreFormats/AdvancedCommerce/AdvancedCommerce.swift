import Foundation

// The Advanced Commerce API (2025): the app's server sells its own SKUs through one "generic" product per kind (a
// consumable for one-time charges, an auto-renewable subscription in a group of its own), with prices, names and
// periods given per purchase in a request the server signs. Transactions and renewal info carry what was sold in
// `advancedCommerceInfo`; the server changes a subscription through `/advancedCommerce/v1/…`, and Apple tells of the
// changes with METADATA_UPDATE, MIGRATION and PRICE_CHANGE. Field names and shapes are Apple's (Apple's libraries'
// `AdvancedCommerce*` models); prices are milliunits.

/// A subscription's display name and description (`AdvancedCommerceDescriptors`); in a change request, `effective`.
public struct AdvancedCommerceDescriptors: Codable, Hashable, Sendable {
    public var description: String?
    public var displayName: String?
    /// Change requests only: `IMMEDIATELY` or `NEXT_BILL_CYCLE`.
    public var effective: AdvancedCommerceEffective?

    public init(description: String? = nil, displayName: String? = nil, effective: AdvancedCommerceEffective? = nil) {
        self.description = description
        self.displayName = displayName
        self.effective = effective
    }
}

/// When a requested change takes effect.
public struct AdvancedCommerceEffective: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let immediately = Self(rawValue: "IMMEDIATELY")
    public static let nextBillCycle = Self(rawValue: "NEXT_BILL_CYCLE")
}

/// A discount on a subscription item for `periodCount` periods (`AdvancedCommerceOffer`).
public struct AdvancedCommerceOffer: Codable, Hashable, Sendable {
    /// ISO 8601: P3D, P1W, P2W, P1M, P2M, P3M, P6M, P9M or P1Y.
    public var period: String?
    public var periodCount: Int?
    /// Milliunits per period.
    public var price: Int64?
    /// `ACQUISITION`, `WIN_BACK` or `RETENTION`.
    public var reason: String?

    public init(period: String? = nil, periodCount: Int? = nil, price: Int64? = nil, reason: String? = nil) {
        self.period = period
        self.periodCount = periodCount
        self.price = price
        self.reason = reason
    }
}

/// A refund of one item (`AdvancedCommerceRefund`).
public struct AdvancedCommerceRefund: Codable, Hashable, Sendable {
    public var refundAmount: Int64?
    public var refundDate: Date?
    public var refundReason: String?
    /// `FULL`, `PRORATED` or `CUSTOM`.
    public var refundType: String?

    public init(refundAmount: Int64? = nil, refundDate: Date? = nil, refundReason: String? = nil, refundType: String? = nil) {
        self.refundAmount = refundAmount
        self.refundDate = refundDate
        self.refundReason = refundReason
        self.refundType = refundType
    }
}

/// A price change scheduled for an item's next renewal (`AdvancedCommercePriceIncreaseInfo`).
public struct AdvancedCommercePriceIncreaseInfo: Codable, Hashable, Sendable {
    public var dependentSKUs: [String]?
    public var price: Int64?
    /// `SCHEDULED`, `PENDING` or `ACCEPTED`.
    public var status: String?

    public init(dependentSKUs: [String]? = nil, price: Int64? = nil, status: String? = nil) {
        self.dependentSKUs = dependentSKUs
        self.price = price
        self.status = status
    }
}

/// An item as requests, transactions and renewal info name it: one shape for all of them (Apple's libraries have a
/// type per use, each a subset of these fields), so that what a request says can be carried into what Apple signs.
public struct AdvancedCommerceItem: Codable, Hashable, Sendable {
    /// The developer's own product id, at most 128 characters.
    public var sku: String?
    /// At most 45 characters.
    public var description: String?
    /// At most 30 characters.
    public var displayName: String?
    /// Milliunits per period (subscriptions) or for the purchase (one-time charges).
    public var price: Int64?
    public var offer: AdvancedCommerceOffer?
    /// Transactions: refunds of this item, and when it was revoked.
    public var refunds: [AdvancedCommerceRefund]?
    public var revocationDate: Date?
    /// Renewal info: a price change due at the next renewal.
    public var priceIncreaseInfo: AdvancedCommercePriceIncreaseInfo?
    /// Change requests: the SKU being changed, and when the change applies.
    public var currentSKU: String?
    public var effective: AdvancedCommerceEffective?
    /// Price change requests: SKUs cancelled with this one when the customer declines its increase.
    public var dependentSKUs: [String]?

    enum CodingKeys: String, CodingKey {
        case sku = "SKU", description, displayName, price, offer, refunds, revocationDate, priceIncreaseInfo, currentSKU, effective, dependentSKUs
    }

    public init(sku: String? = nil, description: String? = nil, displayName: String? = nil, price: Int64? = nil, offer: AdvancedCommerceOffer? = nil) {
        self.sku = sku
        self.description = description
        self.displayName = displayName
        self.price = price
        self.offer = offer
    }
}

/// `advancedCommerceInfo` of a transaction (`AdvancedCommerceTransactionInfo`).
public struct AdvancedCommerceTransactionInfo: Codable, Hashable, Sendable {
    public var descriptors: AdvancedCommerceDescriptors?
    public var estimatedTax: Int64?
    public var items: [AdvancedCommerceItem]?
    /// Subscriptions: P1W, P1M, P2M, P3M, P6M or P1Y.
    public var period: String?
    public var requestReferenceId: String?
    public var taxCode: String?
    public var taxExclusivePrice: Int64?
    /// A decimal, as text.
    public var taxRate: String?

    public init() {}
}

/// `advancedCommerceInfo` of renewal info (`AdvancedCommerceRenewalInfo`): what renews next.
public struct AdvancedCommerceRenewalInfo: Codable, Hashable, Sendable {
    /// Changes to the subscription must quote the latest one; a new one comes with every change.
    public var consistencyToken: String?
    public var descriptors: AdvancedCommerceDescriptors?
    public var items: [AdvancedCommerceItem]?
    public var period: String?
    public var requestReferenceId: String?
    public var taxCode: String?

    public init() {}
}

/// What every request names: its own id (a retry reuses it), the customer's token, the latest consistency token.
public struct AdvancedCommerceRequestInfo: Codable, Hashable, Sendable {
    public var requestReferenceId: String?
    public var appAccountToken: String?
    public var consistencyToken: String?

    public init(requestReferenceId: String? = nil, appAccountToken: String? = nil, consistencyToken: String? = nil) {
        self.requestReferenceId = requestReferenceId
        self.appAccountToken = appAccountToken
        self.consistencyToken = consistencyToken
    }
}

/// A request the app's server signs for StoreKit (the `request` claim of a JWS with `aud` `advanced-commerce-api`):
/// `CREATE_ONE_TIME_CHARGE`, `CREATE_SUBSCRIPTION`, `MODIFY_SUBSCRIPTION` or `REACTIVATE_SUBSCRIPTION`, version "1".
public struct AdvancedCommerceInAppRequest: Codable, Hashable, Sendable {
    public static let createOneTimeCharge = "CREATE_ONE_TIME_CHARGE"
    public static let createSubscription = "CREATE_SUBSCRIPTION"
    public static let modifySubscription = "MODIFY_SUBSCRIPTION"
    public static let reactivateSubscription = "REACTIVATE_SUBSCRIPTION"

    public var operation: String?
    public var version: String?
    public var requestInfo: AdvancedCommerceRequestInfo?
    /// ISO 4217.
    public var currency: String?
    public var taxCode: String?
    /// ISO 3166-1 alpha-3.
    public var storefront: String?
    /// One-time charges: the item sold.
    public var item: AdvancedCommerceItem?
    /// Subscriptions: the subscription's names, its items, its period; a resubscription names the earlier transaction.
    public var descriptors: AdvancedCommerceDescriptors?
    public var items: [AdvancedCommerceItem]?
    public var period: String?
    public var previousTransactionId: String?
    /// Modify and reactivate: the subscription's transaction.
    public var transactionId: String?

    public init(operation: String, requestInfo: AdvancedCommerceRequestInfo, currency: String? = nil, taxCode: String? = nil) {
        self.operation = operation
        version = "1"
        self.requestInfo = requestInfo
        self.currency = currency
        self.taxCode = taxCode
    }
}

/// Change Subscription Metadata (`POST /advancedCommerce/v1/subscription/changeMetadata/{transactionId}`).
public struct AdvancedCommerceChangeMetadataRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    public var descriptors: AdvancedCommerceDescriptors?
    /// `currentSKU` names the item; `SKU`, `displayName`, `description` are the new values; `effective` when.
    public var items: [AdvancedCommerceItem]?
    public var storefront: String?
    public var taxCode: String?
    public init(requestInfo: AdvancedCommerceRequestInfo, descriptors: AdvancedCommerceDescriptors? = nil, items: [AdvancedCommerceItem]? = nil) {
        self.requestInfo = requestInfo
        self.descriptors = descriptors
        self.items = items
    }
}

/// Change Subscription Price (`POST /advancedCommerce/v1/subscription/changePrice/{transactionId}`): new prices
/// from the next renewal.
public struct AdvancedCommercePriceChangeRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    /// `SKU`, `price`, optionally `dependentSKUs`.
    public var items: [AdvancedCommerceItem]?
    public var currency: String?
    public var storefront: String?
    public init(requestInfo: AdvancedCommerceRequestInfo, items: [AdvancedCommerceItem]) {
        self.requestInfo = requestInfo
        self.items = items
    }
}

/// Migrate a Subscription to Advanced Commerce API (`POST /advancedCommerce/v1/subscription/migrate/{transactionId}`):
/// an In-App Purchase subscription becomes one of the generic product `targetProductId`, with these SKUs.
public struct AdvancedCommerceMigrateRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    public var descriptors: AdvancedCommerceDescriptors?
    /// `SKU`, `displayName`, `description` (no price: the subscription keeps what it costs).
    public var items: [AdvancedCommerceItem]?
    public var renewalItems: [AdvancedCommerceItem]?
    public var targetProductId: String?
    public var taxCode: String?
    public var storefront: String?
    public init(requestInfo: AdvancedCommerceRequestInfo, descriptors: AdvancedCommerceDescriptors, items: [AdvancedCommerceItem],
                targetProductId: String, taxCode: String) {
        self.requestInfo = requestInfo
        self.descriptors = descriptors
        self.items = items
        self.targetProductId = targetProductId
        self.taxCode = taxCode
    }
}

/// Cancel a Subscription (`POST /advancedCommerce/v1/subscription/cancel/{transactionId}`): auto-renew off.
public struct AdvancedCommerceCancelRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    public var storefront: String?
    public init(requestInfo: AdvancedCommerceRequestInfo) { self.requestInfo = requestInfo }
}

/// Revoke Subscription (`POST /advancedCommerce/v1/subscription/revoke/{transactionId}`): ends it now, with a refund.
public struct AdvancedCommerceRevokeRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    public var refundRiskingPreference: Bool?
    /// `FULL`, `PRORATED` or `CUSTOM`.
    public var refundType: String?
    /// `UNINTENDED_PURCHASE`, `FULFILLMENT_ISSUE`, `UNSATISFIED_WITH_PURCHASE`, `LEGAL`, `OTHER`, …
    public var refundReason: String?
    public var storefront: String?
    public init(requestInfo: AdvancedCommerceRequestInfo, refundRiskingPreference: Bool, refundType: String, refundReason: String) {
        self.requestInfo = requestInfo
        self.refundRiskingPreference = refundRiskingPreference
        self.refundType = refundType
        self.refundReason = refundReason
    }
}

/// Request Transaction Refund (`POST /advancedCommerce/v1/transaction/requestRefund/{transactionId}`): refunds items of
/// one transaction.
public struct AdvancedCommerceRequestRefundRequest: Codable, Hashable, Sendable {
    public var requestInfo: AdvancedCommerceRequestInfo?
    /// `SKU`, `refundType`, `refundReason`, `revoke`, and `refundAmount` for `CUSTOM`.
    public var items: [AdvancedCommerceRefundItem]?
    public var refundRiskingPreference: Bool?
    public var currency: String?
    public var storefront: String?
    public init(requestInfo: AdvancedCommerceRequestInfo, items: [AdvancedCommerceRefundItem], refundRiskingPreference: Bool) {
        self.requestInfo = requestInfo
        self.items = items
        self.refundRiskingPreference = refundRiskingPreference
    }
}

/// One item of a refund request.
public struct AdvancedCommerceRefundItem: Codable, Hashable, Sendable {
    public var sku: String?
    public var refundType: String?
    public var refundReason: String?
    /// Whether the item is revoked (the customer loses it) besides being refunded.
    public var revoke: Bool?
    /// Milliunits, `CUSTOM` only.
    public var refundAmount: Int64?

    enum CodingKeys: String, CodingKey { case sku = "SKU", refundType, refundReason, revoke, refundAmount }

    public init(sku: String, refundType: String, refundReason: String, revoke: Bool, refundAmount: Int64? = nil) {
        self.sku = sku
        self.refundType = refundType
        self.refundReason = refundReason
        self.revoke = revoke
        self.refundAmount = refundAmount
    }
}

/// The answer to a refund request: the transaction, signed.
public struct AdvancedCommerceTransactionResponse: Codable, Hashable, Sendable {
    public var signedTransactionInfo: String?
    public init(signedTransactionInfo: String? = nil) { self.signedTransactionInfo = signedTransactionInfo }
}

/// The answer to a subscription change: the subscription's latest transaction and renewal info, signed.
public struct AdvancedCommerceSubscriptionResponse: Codable, Hashable, Sendable {
    public var signedRenewalInfo: String?
    public var signedTransactionInfo: String?
    public init(signedRenewalInfo: String? = nil, signedTransactionInfo: String? = nil) {
        self.signedRenewalInfo = signedRenewalInfo
        self.signedTransactionInfo = signedTransactionInfo
    }
}

/// Apple's documented limits on what a request may say.
public enum AdvancedCommerceLimits {
    /// Lengths count Unicode code points, as Apple's libraries count them.
    public static let skuLength = 128
    public static let descriptionLength = 45
    public static let displayNameLength = 30
    /// Offers last 1 to 12 periods (a free trial exactly 1).
    public static let offerPeriodCounts = 1...12
    public static let subscriptionPeriods: Set<String> = ["P1W", "P1M", "P2M", "P3M", "P6M", "P1Y"]
    public static let offerPeriods: Set<String> = ["P3D", "P1W", "P2W", "P1M", "P2M", "P3M", "P6M", "P9M", "P1Y"]
    public static let offerReasons: Set<String> = ["ACQUISITION", "WIN_BACK", "RETENTION"]
    public static let refundTypes: Set<String> = ["FULL", "PRORATED", "CUSTOM"]
    public static let refundReasons: Set<String> = ["UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER",
                                                    "MODIFY_ITEMS_REFUND", "SIMULATE_REFUND_DECLINE"]
    /// Apple documents no number; the simulator takes at most this many items per subscription (ItemLimitExceeded).
    public static let maxItems = 50
    /// Apple documents none; a thousand million currency units keeps any sum of 50 items far from overflowing.
    public static let maxPrice: Int64 = 1_000_000_000_000
}

/// A refused Advanced Commerce API request: Apple's error code and message.
public struct AdvancedCommerceRefusal: Error, Sendable, Hashable {
    public var code: APIErrorCode
    public var message: String
    public init(_ code: APIErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// The checks Apple documents for what a request says: its request info, names, items and prices. Pure, so the
/// simulator, the app's server before it signs, and the fuzzer all judge alike.
public enum AdvancedCommerceCheck {
    public static func check(_ info: AdvancedCommerceRequestInfo?) -> AdvancedCommerceRefusal? {
        guard let info else { return .init(.nullRequestInfo, "NullRequestInfo: requestInfo is required.") }
        guard let id = info.requestReferenceId, !id.isEmpty else { return .init(.nullRequestReferenceId, "NullRequestReferenceID: requestReferenceId is required.") }
        guard UUID(uuidString: id) != nil else { return .init(.invalidRequestReferenceId, "InvalidRequestReferenceID: requestReferenceId must be a UUID.") }
        if let token = info.appAccountToken, !token.isEmpty, UUID(uuidString: token) == nil {
            return .init(.invalidAppAccountToken, "InvalidAppAccountToken: a valid UUID or an empty string.")
        }
        return nil
    }

    public static func check(_ descriptors: AdvancedCommerceDescriptors, required: Bool) -> AdvancedCommerceRefusal? {
        if required {
            guard descriptors.displayName != nil else { return .init(.nullDisplayName, "NullDisplayName: displayName is required.") }
            guard descriptors.description != nil else { return .init(.nullDescription, "NullDescription: description is required.") }
        } else if descriptors.displayName == nil && descriptors.description == nil {
            return .init(.atLeastOneOfDisplayNameOrDescription, "At least one of display name or description is required.")
        }
        return checkLengths(description: descriptors.description, displayName: descriptors.displayName)
    }

    public static func check(_ items: [AdvancedCommerceItem]?, priced: Bool) -> AdvancedCommerceRefusal? {
        guard let items else { return .init(.nullItems, "NullItems: items are required.") }
        guard !items.isEmpty else { return .init(.atLeastOneItem, "AtLeastOneItem: at least one item is required.") }
        guard items.count <= AdvancedCommerceLimits.maxItems else { return .init(.itemLimitExceeded, "The number of items in subscription exceeds the limit.") }
        guard Set(items.compactMap(\.sku)).count == items.count else { return .init(.invalidSKU, "InvalidSKU: each SKU once.") }
        for item in items { if let refusal = check(item, priced: priced) { return refusal } }
        return nil
    }

    public static func check(_ item: AdvancedCommerceItem, priced: Bool, namesRequired: Bool = true) -> AdvancedCommerceRefusal? {
        guard let sku = item.sku, !sku.isEmpty else { return .init(.nullSKU, "NullSKU: SKU is required.") }
        guard sku.unicodeScalars.count <= AdvancedCommerceLimits.skuLength else { return .init(.skuLengthExceeded, "SKULengthExceeded: at most 128 characters.") }
        guard sku.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else { return .init(.invalidSKU, "InvalidSKU: no spaces or control characters.") }
        if namesRequired {
            guard item.displayName != nil else { return .init(.nullDisplayName, "NullDisplayName: displayName is required.") }
            guard item.description != nil else { return .init(.nullDescription, "NullDescription: description is required.") }
        }
        if let refusal = checkLengths(description: item.description, displayName: item.displayName) { return refusal }
        if priced {
            guard let price = item.price else { return .init(.nullPrice, "NullPrice: price is required.") }
            guard price >= 0 else { return .init(.negativePrice, "NegativePrice: the price must contain a positive number.") }
            guard price <= AdvancedCommerceLimits.maxPrice else { return .init(.generalBadRequest, "InvalidPrice: at most \(AdvancedCommerceLimits.maxPrice) milliunits.") }
            if let offer = item.offer {
                guard let count = offer.periodCount, AdvancedCommerceLimits.offerPeriodCounts.contains(count) else {
                    return .init(.invalidOfferPeriodCount, "InvalidOfferPeriodCount: 1 to 12 periods.")
                }
                guard let period = offer.period, AdvancedCommerceLimits.offerPeriods.contains(period) else { return .init(.invalidOfferPeriod, "InvalidOfferPeriod.") }
                guard let reason = offer.reason, AdvancedCommerceLimits.offerReasons.contains(reason) else { return .init(.invalidOfferReason, "InvalidOfferReason.") }
                guard let offerPrice = offer.price, offerPrice >= 0, offerPrice <= price else {
                    return .init(.invalidOfferPrice, "InvalidOfferPrice: an offer's price is at most the item's.")
                }
            }
        }
        return nil
    }

    static func checkLengths(description: String?, displayName: String?) -> AdvancedCommerceRefusal? {
        // Apple asks for one line of plain text.
        let plain = { (text: String) in !text.unicodeScalars.contains { $0.properties.generalCategory == .control } }
        if let description, !plain(description) { return .init(.invalidDescription, "InvalidDescription: one line, no control characters.") }
        if let displayName, !plain(displayName) { return .init(.invalidDisplayName, "InvalidDisplayName: one line, no control characters.") }
        if let description, description.unicodeScalars.count > AdvancedCommerceLimits.descriptionLength {
            return .init(.descriptionLengthExceeded, "DescriptionLengthExceeded: at most 45 characters.")
        }
        if let displayName, displayName.unicodeScalars.count > AdvancedCommerceLimits.displayNameLength {
            return .init(.displayNameLengthExceeded, "DisplayNameLengthExceeded: at most 30 characters.")
        }
        return nil
    }
}


/// Advanced Commerce API `errorCode`s (404s are the Server API's `transactionIdNotFound`, 4040010). Apple's error pages
/// give the numbers of 4000087, 4000122 and 4000179; the others are Apple's error names with the numbers another
/// client library carries (Apple's own libraries have no client for this API).
extension APIErrorCode {
    public static let invalidCurrency = Self(rawValue: 4_000_053)
    public static let nullRequestInfo = Self(rawValue: 4_000_079)
    public static let nullRequestReferenceId = Self(rawValue: 4_000_080)
    public static let invalidRequestReferenceId = Self(rawValue: 4_000_081)
    public static let invalidConsistencyToken = Self(rawValue: 4_000_082)
    public static let negativePrice = Self(rawValue: 4_000_086)
    public static let skuLengthExceeded = Self(rawValue: 4_000_087)
    public static let descriptionLengthExceeded = Self(rawValue: 4_000_088)
    public static let displayNameLengthExceeded = Self(rawValue: 4_000_089)
    public static let repeatedRequestReferenceId = Self(rawValue: 4_000_097)
    public static let nullTaxCode = Self(rawValue: 4_000_099)
    public static let nullItems = Self(rawValue: 4_000_101)
    public static let nullDescriptors = Self(rawValue: 4_000_103)
    public static let nullSKU = Self(rawValue: 4_000_105)
    public static let nullDisplayName = Self(rawValue: 4_000_106)
    public static let nullDescription = Self(rawValue: 4_000_107)
    public static let nullPrice = Self(rawValue: 4_000_109)
    public static let nullEffective = Self(rawValue: 4_000_111)
    public static let invalidDisplayName = Self(rawValue: 4_000_118)
    public static let invalidDescription = Self(rawValue: 4_000_119)
    public static let productAlreadyExists = Self(rawValue: 4_000_114)
    public static let invalidSKU = Self(rawValue: 4_000_122)
    public static let invalidOfferReason = Self(rawValue: 4_000_126)
    public static let invalidOfferPeriod = Self(rawValue: 4_000_128)
    public static let invalidOfferPeriodCount = Self(rawValue: 4_000_129)
    public static let invalidOfferPrice = Self(rawValue: 4_000_152)
    public static let invalidRefundType = Self(rawValue: 4_000_123)
    public static let invalidRefundReason = Self(rawValue: 4_000_124)
    public static let nullRefundAmount = Self(rawValue: 4_000_153)
    public static let negativeRefundAmount = Self(rawValue: 4_000_154)
    public static let refundAmountWithoutCustom = Self(rawValue: 4_000_155)
    public static let nullRefundReason = Self(rawValue: 4_000_156)
    public static let nullRefundType = Self(rawValue: 4_000_157)
    public static let nullRefundRisking = Self(rawValue: 4_000_159)
    public static let proratedOnlyLatestTransaction = Self(rawValue: 4_000_182)
    public static let partialSimulateRefundDecline = Self(rawValue: 4_000_184)
    public static let alreadyRefunded = Self(rawValue: 4_030_021)
    public static let atLeastOneItem = Self(rawValue: 4_000_160)
    public static let atLeastOneOfDisplayNameOrDescription = Self(rawValue: 4_000_165)
    public static let nullTargetProductId = Self(rawValue: 4_000_166)
    public static let invalidTargetProductId = Self(rawValue: 4_000_167)
    public static let malformedPayload = Self(rawValue: 4_000_173)
    public static let subscriptionAlreadyMigrated = Self(rawValue: 4_000_176)
    public static let mismatchedStorefront = Self(rawValue: 4_000_133)
    public static let multipleOperationsOnSingleSKU = Self(rawValue: 4_000_143)
    public static let simulateRefundDeclineOnlyInSandbox = Self(rawValue: 4_000_158)
    public static let itemLimitExceeded = Self(rawValue: 4_000_179)
    public static let priceChangeAlreadyCommunicated = Self(rawValue: 4_000_205)
    public static let revokeOnInactiveSubscription = Self(rawValue: 4_000_186)
    public static let subscriptionDoesNotExist = Self(rawValue: 4_030_008)
    public static let subscriptionAlreadyExists = Self(rawValue: 4_030_009)
    public static let subscriptionNotEligible = Self(rawValue: 4_030_010)
    public static let inactiveACASubscription = Self(rawValue: 4_030_015)
}
