import Foundation

/// The body the App Store POSTs to a Notifications V2 URL: `{"signedPayload": "<JWS>"}`.
public struct ResponseBodyV2: Codable, Hashable, Sendable {
    public var signedPayload: String
    public init(signedPayload: String) { self.signedPayload = signedPayload }
}

/// The decoded `signedPayload` of an App Store Server Notification V2.
public struct ResponseBodyV2DecodedPayload: Codable, Hashable, Sendable {
    public var notificationType: NotificationTypeV2?
    public var subtype: NotificationSubtype?
    /// The key to ignore repeated deliveries by.
    public var notificationUUID: String?
    /// `"2.0"`
    public var version: String?
    public var signedDate: Date?
    /// Present for transaction and subscription events.
    public var data: NotificationData?
    /// Present for `RENEWAL_EXTENSION` / `SUMMARY`.
    public var summary: NotificationSummary?
    /// Present for `EXTERNAL_PURCHASE_TOKEN`.
    public var externalPurchaseToken: ExternalPurchaseToken?
    /// Present for `RESCIND_CONSENT`.
    public var appData: NotificationAppData?

    public init() {}

    /// The environment the notification speaks of, from whichever body it carries.
    public var environment: AppStoreEnvironment? {
        if let environment = data?.environment ?? summary?.environment ?? appData?.environment { return environment }
        if let id = externalPurchaseToken?.externalPurchaseId {
            return id.hasPrefix("SANDBOX") ? .sandbox : .production
        }
        return nil
    }

    /// The bundle id the notification speaks of.
    public var bundleId: String? {
        data?.bundleId ?? summary?.bundleId ?? externalPurchaseToken?.bundleId ?? appData?.bundleId
    }

    /// The app Apple id the notification speaks of.
    public var appAppleId: Int64? {
        data?.appAppleId ?? summary?.appAppleId ?? externalPurchaseToken?.appAppleId ?? appData?.appAppleId
    }
}

/// `data` of a notification.
public struct NotificationData: Codable, Hashable, Sendable {
    public var environment: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var bundleVersion: String?
    /// A nested JWS; verify it like any signed transaction.
    public var signedTransactionInfo: String?
    /// A nested JWS; verify it like any signed renewal info.
    public var signedRenewalInfo: String?
    public var status: SubscriptionStatus?
    public var consumptionRequestReason: ConsumptionRequestReason?
    public init() {}
}

/// `summary` of a `RENEWAL_EXTENSION` / `SUMMARY` notification.
public struct NotificationSummary: Codable, Hashable, Sendable {
    public var environment: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var productId: String?
    public var requestIdentifier: String?
    public var storefrontCountryCodes: [String]?
    public var succeededCount: Int64?
    public var failedCount: Int64?
    public init() {}
}

/// `externalPurchaseToken` of an `EXTERNAL_PURCHASE_TOKEN` notification.
public struct ExternalPurchaseToken: Codable, Hashable, Sendable {
    public var externalPurchaseId: String?
    public var tokenCreationDate: Date?
    public var appAppleId: Int64?
    public var bundleId: String?
    /// Custom-link tokens (2025): when the token stops being usable, and `ACQUISITION` or `SERVICES`.
    public var tokenExpirationDate: Date?
    public var tokenType: ExternalPurchaseTokenType?
    public init() {}
}

/// `tokenType` of a custom-link external purchase token.
public struct ExternalPurchaseTokenType: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The customer's first acquisition through the link.
    public static let acquisition = Self(rawValue: "ACQUISITION")
    /// Use of App Store services through the link.
    public static let services = Self(rawValue: "SERVICES")
}

/// `appData` of a `RESCIND_CONSENT` notification.
public struct NotificationAppData: Codable, Hashable, Sendable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var environment: AppStoreEnvironment?
    public var signedAppTransactionInfo: String?
    public init() {}
}

/// `notificationType`.
public struct NotificationTypeV2: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    public static let didChangeRenewalPref = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    public static let didRenew = Self(rawValue: "DID_RENEW")
    public static let expired = Self(rawValue: "EXPIRED")
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let refund = Self(rawValue: "REFUND")
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    public static let revoke = Self(rawValue: "REVOKE")
    public static let test = Self(rawValue: "TEST")
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
    /// Advanced Commerce API subscriptions: their metadata changed, they migrated, their price changed.
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    public static let migration = Self(rawValue: "MIGRATION")
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
}

/// `subtype`.
public struct NotificationSubtype: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    public static let downgrade = Self(rawValue: "DOWNGRADE")
    public static let upgrade = Self(rawValue: "UPGRADE")
    public static let autoRenewEnabled = Self(rawValue: "AUTO_RENEW_ENABLED")
    public static let autoRenewDisabled = Self(rawValue: "AUTO_RENEW_DISABLED")
    public static let voluntary = Self(rawValue: "VOLUNTARY")
    public static let billingRetry = Self(rawValue: "BILLING_RETRY")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let gracePeriod = Self(rawValue: "GRACE_PERIOD")
    public static let pending = Self(rawValue: "PENDING")
    public static let accepted = Self(rawValue: "ACCEPTED")
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    public static let productNotForSale = Self(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let summary = Self(rawValue: "SUMMARY")
    public static let failure = Self(rawValue: "FAILURE")
    public static let unreported = Self(rawValue: "UNREPORTED")
    /// External purchase tokens (2025): Apple created a custom-link token; it is still active (monthly).
    public static let created = Self(rawValue: "CREATED")
    public static let activeTokenReminder = Self(rawValue: "ACTIVE_TOKEN_REMINDER")
}

/// `consumptionRequestReason`.
public struct ConsumptionRequestReason: AppStoreOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let unintendedPurchase = Self(rawValue: "UNINTENDED_PURCHASE")
    public static let fulfillmentIssue = Self(rawValue: "FULFILLMENT_ISSUE")
    public static let unsatisfiedWithPurchase = Self(rawValue: "UNSATISFIED_WITH_PURCHASE")
    public static let legal = Self(rawValue: "LEGAL")
    public static let other = Self(rawValue: "OTHER")
}
