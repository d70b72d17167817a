import Foundation

/// `commitmentInfo` of a transaction (API 1.21): a period of a monthly plan with a 12-month commitment. Payloads keep
/// the object as Apple sent it (``AppStoreJSONValue``); this is its known shape.
public struct TransactionCommitmentInfo: Codable, Hashable, Sendable {
    /// 1 to 12: which payment of the commitment this period is.
    public var billingPeriodNumber: Int?
    public var totalBillingPeriods: Int?
    /// When the whole commitment ends.
    public var commitmentExpiresDate: Date?
    /// Milliunits: what the whole commitment costs.
    public var commitmentPrice: Int64?
    public init(billingPeriodNumber: Int? = nil, totalBillingPeriods: Int? = nil, commitmentExpiresDate: Date? = nil, commitmentPrice: Int64? = nil) {
        self.billingPeriodNumber = billingPeriodNumber
        self.totalBillingPeriods = totalBillingPeriods
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
    }
}

/// `commitmentInfo` of renewal info (API 1.21): what follows the current commitment. Present only during one.
public struct RenewalCommitmentInfo: Codable, Hashable, Sendable {
    public var commitmentAutoRenewProductId: String?
    /// Whether a new commitment follows this one; the customer's cancellation turns this off while `autoRenewStatus`
    /// stays on (the payments already committed to continue).
    public var commitmentAutoRenewStatus: AutoRenewStatus?
    public var commitmentRenewalBillingPlanType: BillingPlanType?
    public var commitmentRenewalDate: Date?
    /// Milliunits.
    public var commitmentRenewalPrice: Int64?
    public init(commitmentAutoRenewProductId: String? = nil, commitmentAutoRenewStatus: AutoRenewStatus? = nil,
                commitmentRenewalBillingPlanType: BillingPlanType? = nil, commitmentRenewalDate: Date? = nil, commitmentRenewalPrice: Int64? = nil) {
        self.commitmentAutoRenewProductId = commitmentAutoRenewProductId
        self.commitmentAutoRenewStatus = commitmentAutoRenewStatus
        self.commitmentRenewalBillingPlanType = commitmentRenewalBillingPlanType
        self.commitmentRenewalDate = commitmentRenewalDate
        self.commitmentRenewalPrice = commitmentRenewalPrice
    }
}

extension AppStoreJSONValue {
    /// `value` as App Store JSON (dates in milliseconds), kept as a JSON value.
    public init(encoding value: some Encodable) throws {
        self = try AppStoreJSON.decoder().decode(AppStoreJSONValue.self, from: AppStoreJSON.encoder().encode(value))
    }

    /// This value read as `T`, or nil when it is not of that shape.
    public func decoded<T: Decodable>(as type: T.Type) -> T? {
        guard let data = try? AppStoreJSON.encoder().encode(self) else { return nil }
        return try? AppStoreJSON.decoder().decode(type, from: data)
    }
}
