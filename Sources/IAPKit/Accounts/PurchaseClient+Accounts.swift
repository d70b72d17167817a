import Foundation

/// Sign-in and sign-out: which account the client uploads for and shows the entitlements of.
extension PurchaseClient {
    // MARK: Accounts

    /// Signs `accountId` in with its sign-in token source, as one step, and answers what it owns.
    ///
    /// What the previous account saw is cleared (``entitlementUpdates`` says `.notLoaded` until the answer); its paid
    /// transactions stay journaled and unfinished — never uploaded under this account — until it signs in again. This
    /// account's waiting payments are uploaded first, so the answer includes them. The account stays signed in whatever
    /// the answer but one: a throw says only that what it owns is not known yet (``PurchaseFailure/Code/networkUnreachable``,
    /// ``PurchaseFailure/Code/serverUnavailable``, ``PurchaseFailure/Code/tokenRejected``); while the server is
    /// unreachable the offline copy answers instead. A token of another account (``PurchaseFailure/Code/accountMismatch``)
    /// signs the account out again: nothing could be done as it with that token.
    @discardableResult
    public func logIn(_ accountId: String, token: @escaping @Sendable () async throws -> String) async throws(PurchaseFailure) -> Entitlements {
        server.credentials.replace(token)
        session.ownsCredentials = true
        session.credentialsChanged()
        logIn(accountId)
        let epoch = session.epoch
        await waitForBackgroundWork()
        // Another sign-in, a sign-out or another token meanwhile: what this one owns is no longer the question.
        guard session.epoch == epoch else {
            throw PurchaseFailure(.accountMismatch, "the sign-in changed before \(accountId)'s entitlements were answered")
        }
        let owned: Entitlements
        do { owned = try await entitlements() } catch where error.code == .accountMismatch && session.epoch == epoch {
            // The token names another account than the one signed in: nothing could be done as this one with it (every
            // order and upload would be refused), so nobody stays signed in.
            logOut()
            throw PurchaseFailure(.accountMismatch, "the sign-in token given for \(accountId) is another account's: signed out")
        }
        guard owned.accountId == accountId else {
            throw PurchaseFailure(.accountMismatch, "the sign-in changed before \(accountId)'s entitlements were answered")
        }
        return owned
    }

    /// Signs `accountId` in when the server client's token source already follows the app's sign-in (it answers the
    /// new account's token from now on). Prefer ``logIn(_:token:)``, which changes both together. This account's
    /// waiting transactions are uploaded in the background.
    public func logIn(_ accountId: String) {
        guard accountId != self.accountId else { return }
        switchAccount(to: accountId)
        let previous = loginRetry
        loginRetry = Task {
            await previous?.value
            // The account's own payments are tried now, whatever backoff they had: while it was away they waited for
            // it (or were refused as another account's token), not for a server.
            await self.retryDue(owner: accountId)
        }
    }

    /// Waits for the work ``logIn(_:)`` and ``start()`` started in the background.
    package func waitForBackgroundWork() async {
        await loginRetry?.value
        await launchRefresh?.value
    }

    /// Signs the account out: its entitlements are cleared from memory and from the streams; its paid transactions
    /// wait for it. A token source given to ``logIn(_:token:)`` is dropped with it: nothing is sent under the account
    /// that left.
    public func logOut() {
        if session.ownsCredentials {
            server.credentials.replace { throw PurchaseFailure(.notSignedIn, "no account is signed in") }
            session.ownsCredentials = false
            session.credentialsChanged()
        }
        guard accountId != nil else { return }
        switchAccount(to: nil)
    }

    private func switchAccount(to account: String?) {
        // Subscribers showing the previous account's entitlements are told they are gone; a late subscriber gets
        // nothing of the previous account.
        entitlementBroadcast.send(session.switchTo(account))
        send(.accountChanged(accountId: account))
        wakeDeliveryQueue()
    }
}
