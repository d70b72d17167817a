/// What `POST /sim/purchases` answers: StoreKit's view of a purchase attempt. Public so that tests and tools read the
/// simulator's device side with the type it writes.
public struct SimulatedPurchaseAnswer: Codable, Hashable, Sendable {
    /// `purchased`, `userCancelled`, `pending`, `interrupted` or `failed`.
    public var status: String
    public var transactionId: String?
    public var signedTransaction: String?
    /// Base64 app receipt.
    public var receipt: String?
    /// `pending` and `interrupted`: the waiting request (`GET /sim/requests`), approved or declined by this id.
    public var requestId: String?
    public var reason: String?
    /// `purchased` an auto-renewable subscription: its series' signed renewal info, as StoreKit's subscription status
    /// gives it to the app.
    public var signedRenewalInfo: String?

    public init(status: String, transactionId: String? = nil, signedTransaction: String? = nil, receipt: String? = nil, requestId: String? = nil,
                reason: String? = nil, signedRenewalInfo: String? = nil) {
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
        self.transactionId = transactionId
        self.signedTransaction = signedTransaction
        self.receipt = receipt
        self.requestId = requestId
        self.reason = reason
    }
}

/// What the unfinished queue, current entitlements and restore of `/sim/accounts/…` answer.
public struct SimulatedSignedTransactions: Codable, Hashable, Sendable {
    public var signedTransactions: [String]
    /// The signed renewal info of each auto-renewable series the account holds (StoreKit's subscription status, which
    /// the app reads beside the transactions), by original transaction id.
    public var signedRenewalInfos: [String: String]?

    public init(signedTransactions: [String], signedRenewalInfos: [String: String]? = nil) {
        self.signedTransactions = signedTransactions
        self.signedRenewalInfos = signedRenewalInfos
    }
}
