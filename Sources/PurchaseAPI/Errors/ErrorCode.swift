/// The stable `code` of every refusal the purchase server answers (`{"error": {"code", "message", "class"}}`).
///
/// Open like Apple's own enumerations: a code this build does not know (a newer server's) is kept as it came, never
/// a decoding failure, and ``RefusalClass`` still classifies it by the status.
public struct ErrorCode: APIOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    // MARK: The request itself
    public static let badRequest: Self = "bad_request"
    /// A NUL character, or bytes that are not UTF-8: no store keeps them the same.
    public static let invalidInput: Self = "invalid_input"
    public static let tooLarge: Self = "too_large"
    public static let requestTimeout: Self = "request_timeout"
    public static let tooManyConnections: Self = "too_many_connections"
    public static let rateLimited: Self = "rate_limited"
    public static let notFound: Self = "not_found"

    // MARK: Who asks
    public static let unauthorized: Self = "unauthorized"
    /// The request names another account than the bearer token's.
    public static let accountMismatch: Self = "account_mismatch"
    public static let adminDisabled: Self = "admin_disabled"
    public static let metricsDisabled: Self = "metrics_disabled"
    public static let dashboardDisabled: Self = "dashboard_disabled"
    public static let dashboardSignedOut: Self = "dashboard_signed_out"
    public static let csrfTokenInvalid: Self = "csrf_token_invalid"

    // MARK: The ledger's refusals
    public static let unknownProduct: Self = "unknown_product"
    /// The product is no longer sold (the catalog marks it retired): 410, class `operator`, no order made or offer
    /// signed. What customers bought of it is still theirs (entitlements, restore, renewals, late payments).
    public static let productRetired: Self = "product_retired"
    public static let orderNotFound: Self = "order_not_found"
    public static let orderAccountMismatch: Self = "order_account_mismatch"
    public static let orderProductMismatch: Self = "order_product_mismatch"
    public static let transactionBoundElsewhere: Self = "transaction_bound_elsewhere"
    public static let insufficientBalance: Self = "insufficient_balance"
    public static let idempotencyKeyReused: Self = "idempotency_key_reused"
    public static let possessionRequired: Self = "possession_required"
    /// Apple knows the transaction id in no environment this server accepts.
    public static let transactionIdNotFound: Self = "transaction_id_not_found"
    /// The ledger's database failed: try again later.
    public static let storage: Self = "storage"

    // MARK: What Apple signed
    public static let malformed: Self = "malformed"
    public static let badSignature: Self = "bad_signature"
    public static let untrustedChain: Self = "untrusted_chain"
    public static let wrongBundle: Self = "wrong_bundle"
    public static let wrongAppAppleId: Self = "wrong_app_apple_id"
    public static let wrongEnvironment: Self = "wrong_environment"
    public static let proofRejected: Self = "proof_rejected"
    public static let deviceIntegrity: Self = "device_integrity"
    public static let orderRequired: Self = "order_required"
    public static let staleRequest: Self = "stale_request"

    // MARK: Apple's answers
    public static let appleUnavailable: Self = "apple_unavailable"
    public static let appleRejected: Self = "apple_rejected"
    public static let appleUnauthorized: Self = "apple_unauthorized"
    public static let appleInvalidResponse: Self = "apple_invalid_response"

    // MARK: What this deployment does
    public static let offersNotConfigured: Self = "offers_not_configured"
    public static let serverAPINotConfigured: Self = "server_api_not_configured"
    public static let retentionNotConfigured: Self = "retention_not_configured"
    public static let signingDisabled: Self = "signing_disabled"
    public static let webhooksNotConfigured: Self = "webhooks_not_configured"
    public static let webhookEventNotFound: Self = "webhook_event_not_found"
    public static let noCustomerTransaction: Self = "no_customer_transaction"
}
