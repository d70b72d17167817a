import AppStoreFormats
import Foundation

/// A sheet of the App Store's own that an app showed on a device: what the customer did inside it is the customer's
/// business (the routes they use are the simulator's others), but whether the app opened it is the app's, and tests
/// read it back.
public struct ShownSheet: Codable, Sendable, Hashable {
    /// Which sheet: StoreKit's `showManageSubscriptions(in:)`, `beginRefundRequest(for:in:)` or
    /// `presentOfferCodeRedeemSheet(in:)`.
    public enum Kind: String, Codable, Sendable { case manageSubscriptions, refundRequest, offerCodeRedemption }
    public var sheet: Kind
    public var device: String?
    /// The refund request's transaction.
    public var transactionId: String?
    /// On the simulator's clock.
    public var shownAt: Date

    public init(sheet: Kind, device: String? = nil, transactionId: String? = nil, shownAt: Date) {
        self.sheet = sheet
        self.device = device
        self.transactionId = transactionId
        self.shownAt = shownAt
    }
}

extension StoreEngine {
    /// Records that `account`'s device showed `sheet`. False for an unknown account.
    public func recordSheet(_ sheet: ShownSheet.Kind, account: String, device: String?, transactionId: String?) throws -> Bool {
        guard state.accounts[account] != nil else { return false }
        var sheets = state.sheets ?? [:]
        sheets[account, default: []].append(ShownSheet(sheet: sheet, device: device, transactionId: transactionId, shownAt: clock.now))
        state.sheets = sheets
        try persist()
        return true
    }

    /// The sheets `account`'s devices showed, oldest first; nil for an unknown account.
    public func sheets(account: String) -> [ShownSheet]? {
        guard state.accounts[account] != nil else { return nil }
        return state.sheets?[account] ?? []
    }

    /// StoreKit's `Transaction.all`: every transaction of the account, signed now, oldest first, family-shared ones
    /// included — except consumables already finished, which Apple leaves out unless refunded or revoked (without the
    /// app's `SKIncludeConsumableInAppPurchaseHistory`). Nil for an unknown account.
    public func transactionHistory(account: String) throws -> [String]? {
        guard state.accounts[account] != nil else { return nil }
        try processSubscriptions()
        return try state.transactionOrder.filter { id in
            guard let stored = state.transactions[id], stored.account == account else { return false }
            return !(stored.payload.type == .consumable && stored.unfinishedOn.isEmpty && stored.payload.revocationDate == nil)
        }.map(signedTransaction)
    }
}
