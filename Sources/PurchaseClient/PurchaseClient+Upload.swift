import Foundation

/// Uploads of journaled payments, their answers, and retries with backoff.
extension PurchaseClient {
    // MARK: Upload

    /// Uploads one paid transaction, once at a time. A transaction already settled is not uploaded again (its
    /// journal entry, if a failed remove left it, is removed); another account's waits for that account.
    func upload(_ entry: JournalEntry) async -> UploadResult {
        guard let transactionId = entry.transactionId else { return .pending("the entry has no transaction id") }
        if let result = settled[transactionId] {
            try? journal.remove(key: entry.key)
            return result
        }
        if let owner = entry.accountId, owner != accountId {
            if waitingReported.insert(transactionId).inserted {
                eventBroadcast.send(.waitingForAccount(transactionId: transactionId, accountId: owner))
            }
            return .waiting("paid by account \(owner), which is not signed in")
        }
        if let running = inFlight[transactionId] { return await running.value }
        let task = Task { await self.performUpload(entry) }
        inFlight[transactionId] = task
        let result = await task.value
        inFlight[transactionId] = nil
        return result
    }

    /// One upload and what follows from the answer: granted or delivered to its owner → the entry leaves the journal
    /// and the transaction is finished; refused as `final` → the same, reported; refused as `operator` → kept,
    /// reported ("paid — we will deliver it"), retried with backoff; anything else → retried with backoff.
    private func performUpload(_ given: JournalEntry, current: Bool = false) async -> UploadResult {
        // The journal's copy is the current one (attempts), unless the caller holds a newer one: the order id dropped
        // after an order refusal is not in the journal when writing it failed (a full disk), and reading the journal
        // again would send the order id again, forever.
        let entry = current ? given : ((try? journal.entries()) ?? []).first { $0.key == given.key } ?? given
        guard let transactionId = entry.transactionId, let signed = entry.signedTransaction else { return .pending("the entry has no proof") }
        // Checked again here (a sign-in may have run since ``upload(_:)`` looked), and the server is told whose it is:
        // the token is fetched later still, and a token of another account is then refused, not granted.
        let asked = accountId
        if let owner = entry.accountId, owner != asked { return .waiting("paid by account \(owner), which is not signed in") }
        eventBroadcast.send(.uploading(transactionId: transactionId, attempt: max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1))
        let answer: PurchaseServerClient.Submission
        do {
            // A transaction no entry names the payer of (bought elsewhere, an offer code, Ask to Buy approved later)
            // is the signed-in account's: named too, so a sign-in change before the token is fetched is refused.
            answer = try await server.submit(signedTransaction: signed, orderId: entry.orderId, deviceIntegrity: deviceIntegrity,
                                             expectedAccountId: entry.accountId ?? asked)
        } catch {
            reschedule(entry, reason: "\(error)")
            eventBroadcast.send(.uploadFailed(transactionId: transactionId, reason: "\(error)"))
            return .pending("\(error)")
        }
        checkpointObserver?(.duringUpload)
        switch answer {
        case .granted(let entitlements):
            settle(entry, .granted(entitlements))
            grantLog.append(transactionId)
            checkpointObserver?(.afterGrant)
            eventBroadcast.send(.granted(transactionId: transactionId))
            try? publish(entitlements, askedAs: asked)
            await finish(entry)
            return .granted(entitlements)
        case .deliveredToOwner(let entitlements):
            settle(entry, .deliveredToOwner)
            eventBroadcast.send(.deliveredToOwner(transactionId: transactionId))
            try? publish(entitlements, askedAs: asked)
            await finish(entry)
            return .deliveredToOwner
        case .held:
            reschedule(entry, reason: "the server is waiting for Apple")
            return .pending("the server is waiting for Apple")
        case .rejected(.accountMismatch, _, _):
            // The app's token is another account's than the one that paid: it waits for that account, quietly, with
            // backoff (an app whose token source never matches its sign-in must not upload every second).
            reschedule(entry, reason: "account_mismatch")
            return .waiting("paid by account \(entry.accountId ?? "?"), the token is another account's")
        case .rejected(let code, _, _) where Self.orderCodes.contains(code) && entry.orderId != nil:
            // The order is the server's bookkeeping, the transaction is the proof: without the order id the server
            // binds by the transaction's token and account.
            var withoutOrder = entry
            withoutOrder.orderId = nil
            if unjournaled[transactionId] != nil { unjournaled[transactionId] = withoutOrder } else { try? journal.write(withoutOrder) }
            return await performUpload(withoutOrder, current: true)
        case .rejected(let code, let message, .final):
            let reason = "\(code): \(message)"
            settle(entry, .rejected(reason))
            eventBroadcast.send(.rejected(transactionId: transactionId, reason: reason))
            await finish(entry)
            return .rejected(reason)
        case .rejected(let code, let message, .retry):
            reschedule(entry, reason: "\(code): \(message)")
            eventBroadcast.send(.uploadFailed(transactionId: transactionId, reason: "\(code): \(message)"))
            return .pending("\(code): \(message)")
        case .rejected(let code, let message, _):
            // Fixable by the server's operator (configuration, policy): the payment is kept and retried; the app can say
            // "paid — we will deliver it".
            let reason = "\(code): \(message)"
            reschedule(entry, reason: reason)
            eventBroadcast.send(.deliveryDelayed(transactionId: transactionId, reason: reason))
            return .delayed(reason)
        }
    }

    /// Refusals about the order, not the payment, that the proof alone can overcome. `order_account_mismatch` too: the
    /// upload names its account (`account_mismatch` answers a token of another), so this one says the order is another
    /// account's than the entry's — made while the sign-in changed, by a version without the order's account check —
    /// and it always will be. Without the order id the server binds by the payment's `appAccountToken`, to the account
    /// whose order the payment carries (`deliveredToOwner`), and the device can finish.
    static let orderCodes: Set<ErrorCode> = [.orderNotFound, .orderProductMismatch, .orderAccountMismatch]

    func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func reschedule(_ entry: JournalEntry, reason: String) {
        guard let transactionId = entry.transactionId, settled[transactionId] == nil else { return }
        let attempts = max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1
        let next = Date().addingTimeInterval(seconds(retryDelays[min(attempts, retryDelays.count) - 1]))
        backoff[transactionId] = (attempts, next)
        var updated = entry
        updated.attempts = attempts
        updated.lastError = reason
        updated.nextAttemptAt = next
        if unjournaled[transactionId] != nil {
            unjournaled[transactionId] = updated
            // The journal may have recovered: then the entry survives a relaunch again. A copy of its own, written
            // when the payment's account and order were known, is kept over this one (which may know neither).
            guard let entries = try? journal.entries() else { return }
            if entries.contains(where: { $0.key == updated.key }) || (try? journal.write(updated)) != nil { unjournaled[transactionId] = nil }
            return
        }
        // Only an entry still in the journal is written back: a retry working from an older read must not bring
        // back an entry another task delivered and removed meanwhile.
        guard ((try? journal.entries()) ?? []).contains(where: { $0.key == entry.key }) else { return }
        try? journal.write(updated)
    }

    /// Whether an entry's next attempt is due: the later of the journal's and the memory's backoff.
    func isDue(_ entry: JournalEntry, at now: Date) -> Bool {
        guard let transactionId = entry.transactionId else { return false }
        let next = [entry.nextAttemptAt, backoff[transactionId]?.next].compactMap { $0 }.max()
        return (next ?? now) <= now
    }

    /// Uploads the paid transactions whose next attempt is due: the journal's, those the journal refused, and — when
    /// the journal cannot be read — the store's unfinished queue.
    package func retryDue(owner: String? = nil) async {
        let now = Date()
        // Read again before each: a finish awaited here lets another task finish (and forget) the next one meanwhile.
        for id in Array(unfinishedSettled.keys) {
            guard let pending = unfinishedSettled[id], pending.next <= now else { continue }
            await finish(pending.transaction)
        }
        func due(_ entry: JournalEntry) -> Bool { (owner != nil && entry.accountId == owner) || isDue(entry, at: now) }
        let entries: [JournalEntry]
        do { entries = try journal.entries() } catch {
            for transaction in (try? await store.unfinished()) ?? [] where settled[transaction.transactionId] == nil {
                if let next = backoff[transaction.transactionId]?.next, next > now { continue }
                _ = await deliver(transaction, orderId: nil, accountId: nil)
            }
            return
        }
        var seen: Set<String> = []
        for entry in entries where entry.kind == .paid {
            guard let transactionId = entry.transactionId else { continue }
            seen.insert(transactionId)
            if settled[transactionId] != nil {
                try? journal.remove(key: entry.key)
            } else if due(entry) {
                _ = await upload(entry)
            }
        }
        for entry in unjournaled.values where !seen.contains(entry.transactionId ?? "") && due(entry) {
            _ = await upload(entry)
        }
    }
}
