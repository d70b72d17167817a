/// Who is signed in on this device, and what of theirs may be shown: the account-switch rules apart from the client
/// that carries them out, so that they are tested without a server.
struct AccountSession {
    /// The account signed in (the app's user id, as the server's tokens name it); nil when none.
    private(set) var accountId: String?
    /// The signed-in account's entitlements as last answered (or served offline).
    private(set) var latest: Entitlements?
    /// Other accounts' payments already reported as waiting (an event once per sign-in, not per retry).
    var waitingReported: Set<String> = []
    /// Payments that wait for their account (or any account) to sign in: not the clock's to retry.
    var waitingForSignIn: Set<String> = []
    /// Whether the token source is the one ``PurchaseClient/logIn(_:token:)`` gave: a sign-out then takes it away.
    var ownsCredentials = false
    /// Counts sign-ins, sign-outs and token changes: a call that began before another changed them knows it.
    private(set) var epoch = 0

    /// The token source changed.
    mutating func credentialsChanged() { epoch += 1 }

    init(accountId: String?) { self.accountId = accountId }

    /// What the entitlement stream says now.
    var state: EntitlementsState {
        guard let accountId else { return .signedOut }
        return latest.map { .loaded($0) } ?? .notLoaded(accountId: accountId)
    }

    /// Another account signs in (nil: signs out): nothing of the previous one is kept to show, and every payment that
    /// waited for a sign-in is looked at again. Returns the stream's new state.
    mutating func switchTo(_ account: String?) -> EntitlementsState {
        accountId = account
        epoch += 1
        latest = nil
        waitingReported = []
        waitingForSignIn = []
        return state
    }

    /// Why an answer the server gave to a call begun while `asked` was signed in may not be shown now, if it may not:
    /// nobody is signed in, the sign-in changed meanwhile, or the answer is another account's.
    func refusal(toShow entitlements: Entitlements, askedAs asked: String?) -> PurchaseFailure? {
        guard let accountId else { return PurchaseFailure(.notSignedIn, "nobody is signed in: the answer is nobody's to show") }
        guard accountId == asked else {
            return PurchaseFailure(.accountMismatch, "the sign-in changed while the server answered for \(entitlements.accountId)")
        }
        guard entitlements.accountId == accountId else {
            return PurchaseFailure(.accountMismatch, "the server answered for account \(entitlements.accountId), not the signed-in \(accountId)")
        }
        return nil
    }

    /// Keeps `entitlements` as what the signed-in account owns (checked by ``refusal(toShow:askedAs:)`` first).
    mutating func show(_ entitlements: Entitlements) { latest = entitlements }
}
