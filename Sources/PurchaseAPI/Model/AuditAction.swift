/// What an audit-log entry records, in kebab-case (the ledger's migration 16 respelled the few stored in snake_case).
/// Open: an action a newer version wrote reads back as it was stored.
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
    public static let appAccountTokenAssigned: Self = "app-account-token-assigned"
    public static let consumptionConsentRescinded: Self = "consumption-consent-rescinded"
    public static let consumptionConsentGiven: Self = "consumption-consent-given"
    public static let consumptionConsentWithdrawn: Self = "consumption-consent-withdrawn"
    /// A payment arrived for an order an operator had settled without one: granted all the same. Written in SQL by the
    /// PostgreSQL store too (`PostgresFunctions`).
    public static let settledOrderPaid: Self = "settled-order-paid"

    /// What became of Apple's consumption request about a purchase (`sent`, `skipped`, …).
    public static func consumptionRequest(_ state: String) -> Self { Self(rawValue: "consumption-request-\(state)") }
}
