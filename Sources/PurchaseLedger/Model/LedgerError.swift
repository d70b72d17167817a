import AppStoreFormats

/// Every way a ledger operation can refuse, with a stable `code` that callers (and tests) compare.
public struct LedgerError: CodedError {
    /// The stable part: what went wrong.
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let unknownProduct = Self(rawValue: "unknown_product")
        /// The product is no longer sold (``ProductRule/retired``): no new order; what was bought of it is still honoured.
        public static let productRetired = Self(rawValue: "product_retired")
        public static let orderNotFound = Self(rawValue: "order_not_found")
        /// The order belongs to another account.
        public static let orderAccountMismatch = Self(rawValue: "order_account_mismatch")
        /// The transaction is for another product than the order.
        public static let orderProductMismatch = Self(rawValue: "order_product_mismatch")
        /// The transaction (or its subscription series) already belongs to another account.
        public static let transactionBoundElsewhere = Self(rawValue: "transaction_bound_elsewhere")
        public static let insufficientBalance = Self(rawValue: "insufficient_balance")
        /// An idempotency key was reused for a different request.
        public static let idempotencyKeyReused = Self(rawValue: "idempotency_key_reused")
        /// A transaction id alone (looked up at Apple) names a purchase nobody holds yet: it proves nothing about who
        /// paid, since ids are not secret; the signed transaction or the receipt from the device does.
        public static let possessionRequired = Self(rawValue: "possession_required")
        public static let invalidInput = Self(rawValue: "invalid_input")
        public static let storage = Self(rawValue: "storage")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

}
