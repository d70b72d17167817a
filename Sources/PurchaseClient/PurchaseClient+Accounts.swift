import Foundation

/// Sign-in and sign-out: which account the client uploads for and shows the entitlements of.
extension PurchaseClient {
    // MARK: Accounts

    /// Signs `accountId` in (as RevenueCat's `logIn`): what the previous account saw is cleared, and its paid
    /// transactions stay journaled and unfinished — never uploaded under this account — until it signs in again.
    /// This account's waiting transactions are uploaded in the background.
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

    /// Waits for the work ``logIn(_:)`` started in the background.
    package func waitForBackgroundWork() async {
        await loginRetry?.value
    }

    /// Signs the account out: its entitlements are cleared from memory and from the streams; its paid transactions
    /// wait for it.
    public func logOut() {
        guard accountId != nil else { return }
        switchAccount(to: nil)
    }

    private func switchAccount(to account: String?) {
        accountId = account
        latest = nil
        waitingReported = []
        // Subscribers showing the previous account's entitlements are told they are gone; a late subscriber gets
        // nothing of the previous account.
        entitlementBroadcast.send(Entitlements(accountId: account ?? ""))
        eventBroadcast.send(.accountChanged(accountId: account))
    }
}
