import Foundation

/// Restore, receipt sync and entitlements: online, offline, and published to the streams.
extension PurchaseClient {
    // MARK: Restore and entitlements

    /// The store's restore for non-consumables and auto-renewables, sent to the server, which adds what the store
    /// cannot restore (non-renewing subscriptions). Unfinished work is resumed first. Throws ``PurchaseFailure``:
    /// `storeUnavailable` (the store's restore failed or was cancelled), the server's failures, `accountMismatch`.
    public func restore() async throws(PurchaseFailure) -> Entitlements {
        let asked = accountId
        guard asked != nil else { throw PurchaseFailure(.notSignedIn, "no account is signed in: sign one in with logIn(_:token:)") }
        _ = await resume()
        let restored: [StoreTransaction]
        do { restored = try await store.restore() } catch { throw storeFailure(error, productId: nil) }
        checkpointObserver?(.duringRestore)
        // Each series' renewal info once (the store lists it with every transaction of the series).
        let renewals = Array(Set(restored.compactMap(\.signedRenewalInfo))).sorted()
        let entitlements = try await server.restore(signedTransactions: restored.map(\.signedTransaction),
                                                    signedRenewalInfos: renewals.isEmpty ? nil : renewals)
        try publish(entitlements, askedAs: asked)
        return entitlements
    }

    /// Sends what the store signed of the customer's past purchases to the server: for purchases made with StoreKit 1 or
    /// before the app adopted this flow. Where the store offers its signed history (`Transaction.all`, iOS 18 / macOS 15,
    /// which deprecated the receipt) that history goes, each transaction with its own `appAccountToken`, with the signed
    /// app transaction; elsewhere the app receipt; without either, the signed app transaction alone (no sign-in prompt).
    /// Returns what the account owns afterwards, or nil when the store has nothing or the server is holding the receipt
    /// for Apple. Throws ``PurchaseFailure`` (the store's, the server's, or `accountMismatch` below).
    ///
    /// A receipt names no app account (it carries no `appAccountToken`): a server without the App Store Server API binds
    /// what it does not hold yet to whoever sends it. So while this device holds another account's paid transaction not
    /// yet delivered, the receipt — which lists it — is not sent under this account: that account's payment would be
    /// granted here, then refused to it as another account's, and finished. The call throws `.accountMismatch` then.
    public func syncReceipt() async throws(PurchaseFailure) -> Entitlements? {
        let asked = accountId
        guard asked != nil else { throw PurchaseFailure(.notSignedIn, "no account is signed in: sign one in with logIn(_:token:)") }
        let submission: PurchaseServerClient.Submission
        let history: [StoreTransaction]?
        let receipt: String?
        do {
            history = try await store.transactionHistory()
            receipt = history == nil ? try await store.receipt() : nil
        } catch {
            throw storeFailure(error, productId: nil)
        }
        if let history {
            // Signed transactions carry their tokens: the server binds each to the account whose order it was paid
            // for, so no other account's undelivered payment can be granted here.
            _ = await resume()
            if let appTransaction = try? await store.appTransaction() { _ = try? await server.submit(appTransaction: appTransaction) }
            // In parts: each signed transaction carries its certificate chain (a few KB), and a long subscriber's
            // history is hundreds of renewals, beyond what one request body may hold.
            let signed = history.map(\.signedTransaction)
            var parts = stride(from: 0, to: signed.count, by: Self.historyPart).map { Array(signed[$0..<min($0 + Self.historyPart, signed.count)]) }
            if parts.isEmpty { parts = [[]] }
            var entitlements = Entitlements(accountId: asked ?? "")
            for part in parts { entitlements = try await server.restore(signedTransactions: part) }
            try publish(entitlements, askedAs: asked)
            return entitlements
        } else if let receipt {
            // The store's unfinished transactions go first, signed (they carry their tokens): what they settle no longer
            // waits, and the receipt is then judged against what is still undelivered.
            _ = await resume()
            if let waiting = try await otherAccountsPayment(than: asked) {
                throw PurchaseFailure(.accountMismatch, "the receipt lists transaction \(waiting.transactionId), paid by account \(waiting.accountId) and not delivered yet: it is synced once that account has it")
            }
            submission = try await server.submit(receipt: receipt, expectedAccountId: asked)
        } else if let appTransaction = try? await store.appTransaction() {
            // No receipt on the device: the signed app transaction instead, never a store refresh (it prompts for a
            // sign-in; Apple asks for that only behind the user's button).
            submission = try await server.submit(appTransaction: appTransaction)
        } else {
            return nil
        }
        switch submission {
        case .granted(let entitlements), .deliveredToOwner(let entitlements):
            try publish(entitlements, askedAs: asked)
            return entitlements
        case .held:
            return nil
        case .rejected(let code, let message, _):
            log("the receipt was refused: \(code): \(message)")
            throw PurchaseFailure(code == .accountMismatch ? .accountMismatch : .rejectedByServer, message.isEmpty ? "the server refused the receipt" : message)
        }
    }

    /// A paid transaction of another account than `account` that this device holds undelivered, if any: one still in
    /// the store's unfinished queue (nothing finishes one before it is settled) that this process has not settled, whose
    /// journal entry — or, after a crash before that was written, the intent its token matches — names another account,
    /// or that nothing here names the payer of while its token names an order.
    /// A journal that cannot be read may name one: each such transaction counts then. A store that cannot list its queue
    /// is answered with its error (the receipt is not sent on a guess).
    private func otherAccountsPayment(than account: String?) async throws(PurchaseFailure) -> (transactionId: String, accountId: String)? {
        let unfinished: [StoreTransaction]
        do { unfinished = try await store.unfinished() } catch { throw storeFailure(error, productId: nil) }
        let entries = try? journal.entries()
        for transaction in unfinished where settled[transaction.transactionId] == nil {
            let id = transaction.transactionId
            guard let entries else { return (id, "unknown (the journal cannot be read)") }
            let paid = entries.first { $0.key == "paid-" + id } ?? unjournaled[id]
            let intent = Self.intent(for: transaction, in: entries)
            if let owner = paid?.accountId ?? intent?.accountId, owner != account { return (id, owner) }
            // Nothing on this device names its payer (a reinstall, another device's order), but its token names an order:
            // whose is for the server to say, once its signed upload goes through.
            if paid?.accountId == nil, intent?.accountId == nil, transaction.appAccountToken != nil {
                return (id, "the account whose order its token names (not delivered yet)")
            }
        }
        return nil
    }

    /// The journal's intent written before the payment `transaction` carries the token of, if any.
    static func intent(for transaction: StoreTransaction, in entries: [JournalEntry]) -> JournalEntry? {
        intent(token: transaction.appAccountToken, in: entries)
    }

    /// The journal's intent for the order whose token is `token`, if any (none for no token).
    static func intent(token: UUID?, in entries: [JournalEntry]) -> JournalEntry? {
        guard let token else { return nil }
        return entries.first { $0.kind == .intent && $0.appAccountToken == token }
    }

    /// What the server says the signed-in account owns now; while the server is unreachable, the offline copy
    /// (``offlineEntitlements()``, marked with `cachedAt`). An answer whose signature does not verify is never
    /// replaced by the offline copy: it is refused. Throws ``PurchaseFailure``: `notSignedIn`, `networkUnreachable` /
    /// `serverUnavailable` (with no offline copy), `untrustedAnswer`, `accountMismatch`.
    public func entitlements() async throws(PurchaseFailure) -> Entitlements {
        let asked = accountId
        guard asked != nil else { throw PurchaseFailure(.notSignedIn, "no account is signed in: sign one in with logIn(_:token:)") }
        do {
            let entitlements = try await server.entitlements()
            try publish(entitlements, askedAs: asked)
            return entitlements
        } catch where error.isUnreachable {
            guard let offline = await offlineEntitlements(), accountId == asked else { throw error }
            session.show(offline)
            entitlementBroadcast.send(.loaded(offline))
            return offline
        }
    }

    /// The last entitlements the server granted the signed-in account, kept on the device, without what has expired
    /// since and without consumable balances; what the store itself says the customer owns now (StoreKit's
    /// `Transaction.currentEntitlements`) extends them to renewals made since. Nil when nothing was ever answered.
    ///
    /// The kept answer is checked as it is read: with an entitlements key, only what the server's signature covers is
    /// served; an answer issued after the device's clock says now (a clock set back) is not served, nor one older than
    /// the client's `offlineMaxAge`.
    public func offlineEntitlements() async -> Entitlements? {
        guard let account = accountId ?? session.latest?.accountId else { return nil }
        let kept = offlineAnswer.flatMap { $0.entitlements.accountId == account ? $0 : nil } ?? (try? offlineCache?.load(accountId: account)) ?? nil
        guard let kept, kept.entitlements.accountId == account else { return nil }
        let now = clock()
        switch OfflineEntitlements.trusted(kept, verifier: server.verifier, now: now, maxAge: offlineMaxAge) {
        case .failure(let refusal):
            log("the offline copy of \(account)'s entitlements is not served: \(refusal.message)")
            return nil
        case .success(let answer):
            // The clock as read now is the floor for the next read: setting it back afterwards serves nothing.
            if now > (kept.latestDeviceTime ?? .distantPast) {
                var seen = kept
                seen.latestDeviceTime = now
                if offlineAnswer?.entitlements.accountId == account { offlineAnswer = seen }
                try? offlineCache?.save(seen)
            }
            var base = answer.entitlements
            base.cachedAt = answer.issuedAt
            return OfflineEntitlements.derive(from: base, storeOwns: (try? await store.currentEntitlements()) ?? [], now: now)
        }
    }

    /// How many signed transactions one restore request carries.
    static let historyPart = 50

    /// Shows `entitlements` when they are the signed-in account's, and keeps them for offline use. `asked` is who was
    /// signed in when the call began: an answer that arrives after a sign-out or a switch is nobody's to show.
    func publish(_ entitlements: Entitlements, askedAs asked: String?) throws(PurchaseFailure) {
        if let refusal = session.refusal(toShow: entitlements, askedAs: asked) { throw refusal }
        session.show(entitlements)
        // Kept as the server answered it (with its signature when it signs), balances and all: the signature covers
        // them, and the offline answer leaves them out when it is served.
        var kept = server.signedAnswers.signed(entitlements) ?? CachedEntitlements(entitlements: entitlements, cachedAt: clock())
        kept.cachedAt = clock()
        kept.latestDeviceTime = kept.cachedAt
        offlineAnswer = kept
        try? offlineCache?.save(kept)
        entitlementBroadcast.send(.loaded(entitlements))
    }
}
