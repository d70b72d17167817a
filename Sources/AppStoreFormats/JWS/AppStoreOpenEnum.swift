/// An Apple enumeration that keeps values it does not know.
///
/// Apple adds cases every year; a decoder that fails on a new `type` or `notificationType` would drop real
/// purchases. Each conforming type is a struct over its raw value with the known cases as static constants.
public protocol AppStoreOpenEnum: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible
where RawValue: Codable & Hashable & Sendable {
    init(rawValue: RawValue)
}

extension AppStoreOpenEnum {
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(RawValue.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { "\(rawValue)" }
}

/// `environment`: where a transaction happened.
public struct AppStoreEnvironment: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let production = Self(rawValue: "Production")
    public static let sandbox = Self(rawValue: "Sandbox")
    public static let xcode = Self(rawValue: "Xcode")
    public static let localTesting = Self(rawValue: "LocalTesting")

    /// Xcode and LocalTesting payloads are not signed by Apple's chain.
    public var isTestEnvironment: Bool { self == .xcode || self == .localTesting }
}

/// `type` of a transaction.
public struct ProductType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let autoRenewableSubscription = Self(rawValue: "Auto-Renewable Subscription")
    public static let nonConsumable = Self(rawValue: "Non-Consumable")
    public static let consumable = Self(rawValue: "Consumable")
    public static let nonRenewingSubscription = Self(rawValue: "Non-Renewing Subscription")
}

/// `inAppOwnershipType`.
public struct InAppOwnershipType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchased = Self(rawValue: "PURCHASED")
    public static let familyShared = Self(rawValue: "FAMILY_SHARED")
    public static let assigned = Self(rawValue: "ASSIGNED")
}

/// `transactionReason`.
public struct TransactionReason: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchase = Self(rawValue: "PURCHASE")
    public static let renewal = Self(rawValue: "RENEWAL")
}

/// `offerType`: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
public struct OfferType: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let introductoryOffer = Self(rawValue: 1)
    public static let promotionalOffer = Self(rawValue: 2)
    public static let offerCode = Self(rawValue: 3)
    public static let winBackOffer = Self(rawValue: 4)
}

/// `offerDiscountType`.
public struct OfferDiscountType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let freeTrial = Self(rawValue: "FREE_TRIAL")
    public static let payAsYouGo = Self(rawValue: "PAY_AS_YOU_GO")
    public static let payUpFront = Self(rawValue: "PAY_UP_FRONT")
    public static let oneTime = Self(rawValue: "ONE_TIME")
}

/// `revocationReason`: 0 refunded for another reason, 1 refunded for an issue in the app.
public struct RevocationReason: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let refundedForOtherReason = Self(rawValue: 0)
    public static let refundedDueToIssue = Self(rawValue: 1)
}

/// `revocationType`.
public struct RevocationType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let refundFull = Self(rawValue: "REFUND_FULL")
    public static let refundProrated = Self(rawValue: "REFUND_PRORATED")
    public static let familyRevoke = Self(rawValue: "FAMILY_REVOKE")
}

/// `autoRenewStatus`: 0 off, 1 on.
public struct AutoRenewStatus: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let off = Self(rawValue: 0)
    public static let on = Self(rawValue: 1)
}

/// `expirationIntent`.
public struct ExpirationIntent: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let customerCancelled = Self(rawValue: 1)
    public static let billingError = Self(rawValue: 2)
    public static let customerDidNotConsentToPriceIncrease = Self(rawValue: 3)
    public static let productNotAvailable = Self(rawValue: 4)
    public static let other = Self(rawValue: 5)
}

/// `priceIncreaseStatus`: 0 not responded, 1 consented.
public struct PriceIncreaseStatus: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let customerHasNotResponded = Self(rawValue: 0)
    public static let customerConsentedOrWasNotifiedWithoutClaimingConsent = Self(rawValue: 1)
}

/// Subscription `status`: 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
public struct SubscriptionStatus: AppStoreOpenEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let active = Self(rawValue: 1)
    public static let expired = Self(rawValue: 2)
    public static let billingRetry = Self(rawValue: 3)
    public static let billingGracePeriod = Self(rawValue: 4)
    public static let revoked = Self(rawValue: 5)
}

/// `originalPlatform` of an app transaction.
public struct PurchasePlatform: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let iOS = Self(rawValue: "iOS")
    public static let macOS = Self(rawValue: "macOS")
    public static let tvOS = Self(rawValue: "tvOS")
    public static let visionOS = Self(rawValue: "visionOS")
}

/// `billingPlanType` / `renewalBillingPlanType`.
public struct BillingPlanType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let billedUpfront = Self(rawValue: "BILLED_UPFRONT")
    public static let monthly = Self(rawValue: "MONTHLY")
}
