/// What submitting a transaction came to for the account that submitted it.
public enum SubmissionOutcome: String, Codable, Hashable, Sendable, CaseIterable {
    /// This submission bound and granted the transaction.
    case granted
    /// The transaction was already bound to this account: nothing more was granted.
    case alreadyGranted
    /// The transaction's `appAccountToken` names another account's order: it was granted to that account (now or
    /// before), and nothing to the submitter. The device may finish it: it reached its owner.
    case deliveredToOwner
}
