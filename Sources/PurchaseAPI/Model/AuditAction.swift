/// What an audit-log entry records. Open: entries a newer version wrote read back as they were stored. The raw values
/// are the ones stored since the first versions (kebab-case for the operator's actions; a few snake_case ones written
/// by the ledger's rules), kept so that old entries and new ones of the same action compare equal.
public struct AuditAction: APIOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    // The operator's actions (admin API and dashboard).
    public static let settle: Self = "settle"
    public static let settleWithTransaction: Self = "settle-with-transaction"
    public static let settleNotOpen: Self = "settle-not-open"
    public static let reconcile: Self = "reconcile"
    public static let webhookReplay: Self = "webhook-replay"
    public static let webhookTest: Self = "webhook-test"
    public static let signIn: Self = "sign-in"
    public static let signInRefused: Self = "sign-in-refused"
    /// Ends a dashboard session on every replica (the audit log is what they share).
    public static let signOut: Self = "sign-out"

    // What the server did on its own.
    public static let proofGranted: Self = "proof-granted"
    public static let proofRejected: Self = "proof-rejected"
    public static let orderRepaired: Self = "order-repaired"
    public static let notificationRecovered: Self = "notification-recovered"
    public static let subscriptionRefreshed: Self = "subscription-refreshed"
    public static let appAccountTokenAssigned: Self = "app_account_token_assigned"
    public static let consumptionConsentRescinded: Self = "consumption_consent_rescinded"
    public static let consumptionConsentGiven: Self = "consumption_consent_given"
    public static let consumptionConsentWithdrawn: Self = "consumption_consent_withdrawn"
    /// A payment arrived for an order an operator had settled without one: granted all the same. Written in SQL by the
    /// PostgreSQL store too (`PostgresFunctions`).
    public static let settledOrderPaid: Self = "settled-order-paid"

    /// What became of Apple's consumption request about a purchase (`sent`, `skipped`, …).
    public static func consumptionRequest(_ state: String) -> Self { Self(rawValue: "consumption_request_\(state)") }
}
