/// What submitting a transaction came to for the account that submitted it. Open: an outcome a newer server adds reads
/// as itself, and a client that does not know it goes by the answer's entitlements (a 200 granted what it lists).
public struct SubmissionOutcome: APIOpenEnum {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// This submission bound and granted the transaction.
    public static let granted: Self = "granted"
    /// The transaction was already bound to this account: nothing more was granted.
    public static let alreadyGranted: Self = "alreadyGranted"
    /// The transaction's `appAccountToken` names another account's order: it was granted to that account (now or
    /// before), and nothing to the submitter. The device may finish it: it reached its owner.
    public static let deliveredToOwner: Self = "deliveredToOwner"

    /// The outcomes this version names.
    public static let known: [Self] = [.granted, .alreadyGranted, .deliveredToOwner]
}
