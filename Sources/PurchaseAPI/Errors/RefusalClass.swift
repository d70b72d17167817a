/// What a refusal lets a device do with a paid transaction. Only ``final`` lets it finish one that was not granted:
/// finishing on a refusal the operator can fix (a bad deploy, a policy) would lose every purchase made meanwhile.
///
/// The server says it in every error body (`"class"`). An old server sends none: ``of(code:status:)`` decides, and what
/// is not known to be final or transient is the operator's.
public enum RefusalClass: String, Codable, Hashable, Sendable, CaseIterable {
    /// No retry can change it: a forged proof, another account's transaction.
    case final
    /// Configuration or policy the server's operator can fix (bundle id, trusted roots, catalog, device policy): the
    /// device keeps the transaction and retries with backoff.
    case `operator`
    /// Transient (storage, Apple unavailable, a 5xx): retry.
    case retry

    /// Only what a genuine payment cannot cause: a signature that fails under a chain that verified, and another
    /// account's transaction (kept for that account). A payload the server cannot decode, or a chain of a shape it does
    /// not expect, may be Apple's own after a change on Apple's side or a bug: finishing on it would lose every purchase
    /// until the fix, so those are the operator's.
    public static let finalCodes: Set<ErrorCode> = [.badSignature, .transactionBoundElsewhere]
    public static let retryCodes: Set<ErrorCode> = [.storage, .appleUnavailable, .appleInvalidResponse, .unauthorized, .requestTimeout]

    /// The class of a refusal with this code and HTTP status.
    public static func of(code: ErrorCode, status: Int) -> RefusalClass {
        if finalCodes.contains(code) { return .final }
        if retryCodes.contains(code) || status >= 500 { return .retry }
        return .operator
    }
}
