/// Which refusals let a device give up on a paid transaction.
///
/// The server says it in every error body (`"class"`); only ``final`` lets a client finish a transaction that was
/// not granted. An old server sends no class: the code decides, and everything not known to be final is treated
/// as ``operator``, because finishing a paid transaction on a fixable refusal loses the customer's money.
public enum RefusalClass: String, Sendable, Hashable, Codable {
    /// No retry can change it: a forged proof, another account's transaction.
    case final
    /// Configuration or policy the server's operator can fix (bundle id, trusted roots, catalog, device policy).
    case `operator`
    /// Transient: storage, Apple unavailable, a 5xx.
    case retry

    /// The fallback for servers that do not send `class`.
    public static func classify(code: String) -> RefusalClass {
        if finalCodes.contains(code) { return .final }
        if retryCodes.contains(code) { return .retry }
        return .operator
    }

    static let finalCodes: Set<String> = ["bad_signature", "transaction_bound_elsewhere"]
    static let retryCodes: Set<String> = ["storage", "apple_unavailable", "unauthorized"]
}
