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
        if let waiting = DeliveryRules.waiting(entry, signedIn: accountId) {
            // Not the clock's to retry: a sign-in wakes the queue for it.
            session.waitingForSignIn.insert(transactionId)
            if session.waitingReported.insert(transactionId).inserted, let owner = entry.accountId {
                send(.waitingForAccount(productId: entry.productId, transactionId: transactionId, accountId: owner))
            }
            return .waiting(waiting)
        }
        if let running = inFlight[transactionId] { return await running.value }
        let task = Task { await self.performUpload(entry) }
        inFlight[transactionId] = task
        let result = await task.value
        inFlight[transactionId] = nil
        return result
    }

    /// One upload, and what ``DeliveryRules`` says follows from the answer.
    private func performUpload(_ given: JournalEntry, current: Bool = false) async -> UploadResult {
        // The journal's copy is the current one (attempts), unless the caller holds a newer one: the order id dropped
        // after an order refusal is not in the journal when writing it failed (a full disk), and reading the journal
        // again would send the order id again, forever.
        let entry = current ? given : ((try? journal.entry(key: given.key)) ?? nil) ?? given
        guard let transactionId = entry.transactionId, let signed = entry.signedTransaction else { return .pending("the entry has no proof") }
        // Checked again here (a sign-in may have run since ``upload(_:)`` looked), and the server is told whose it is:
        // the token is fetched later still, and a token of another account is then refused, not granted.
        let asked = accountId
        if let waiting = DeliveryRules.waiting(entry, signedIn: asked) {
            session.waitingForSignIn.insert(transactionId)
            return .waiting(waiting)
        }
        session.waitingForSignIn.remove(transactionId)
        send(.uploading(productId: entry.productId, transactionId: transactionId,
                        attempt: max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1))
        let answer: Result<PurchaseServerClient.Submission, PurchaseFailure>
        do {
            // A transaction no entry names the payer of (bought elsewhere, an offer code, Ask to Buy approved later)
            // is the signed-in account's: named too, so a sign-in change before the token is fetched is refused.
            answer = .success(try await server.submit(signedTransaction: signed, orderId: entry.orderId, deviceIntegrity: deviceIntegrity,
                                                      expectedAccountId: entry.accountId ?? asked, signedRenewalInfo: entry.signedRenewalInfo))
            checkpointObserver?(.duringUpload)
        } catch {
            answer = .failure(error)
        }
        let decision = DeliveryRules.decide(entry, answer)
        switch decision.journal {
        case .retryWithoutOrder:
            // The order is the server's bookkeeping, the transaction is the proof: without the order id the server
            // binds by the transaction's token and account.
            var withoutOrder = entry
            withoutOrder.orderId = nil
            if unjournaled[transactionId] != nil { unjournaled[transactionId] = withoutOrder } else { try? journal.write(withoutOrder) }
            return await performUpload(withoutOrder, current: true)
        case .reschedule(let reason):
            reschedule(entry, reason: reason)
        case .remove:
            settle(entry, decision.result)
            if case .granted = decision.result {
                grantLog.append(transactionId)
                checkpointObserver?(.afterGrant)
            }
        }
        if let event = decision.event { send(event) }
        if let entitlements = decision.publish { try? publish(entitlements, askedAs: asked) }
        if decision.finish { await finish(entry) }
        return decision.result
    }

    private func reschedule(_ entry: JournalEntry, reason: String) {
        guard let transactionId = entry.transactionId, settled[transactionId] == nil else { return }
        let attempts = max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1
        let next = DeliveryRules.nextAttempt(after: attempts, delays: retryDelays, now: Date())
        backoff[transactionId] = (attempts, next)
        wakeDeliveryQueue()
        var updated = entry
        updated.attempts = attempts
        updated.lastError = reason
        updated.nextAttemptAt = next
        if unjournaled[transactionId] != nil {
            unjournaled[transactionId] = updated
            // The journal may have recovered: then the entry survives a relaunch again. A copy of its own, written
            // when the payment's account and order were known, is kept over this one (which may know neither).
            let kept: JournalEntry?
            do { kept = try journal.entry(key: updated.key) } catch { return }
            if kept != nil || (try? journal.write(updated)) != nil { unjournaled[transactionId] = nil }
            return
        }
        // Only an entry still in the journal is written back: a retry working from an older read must not bring
        // back an entry another task delivered and removed meanwhile.
        guard ((try? journal.entry(key: entry.key)) ?? nil) != nil else { return }
        try? journal.write(updated)
    }

    /// Whether an entry's next attempt is due: the later of the journal's and the memory's backoff.
    func isDue(_ entry: JournalEntry, at now: Date) -> Bool {
        guard let transactionId = entry.transactionId else { return false }
        return DeliveryRules.isDue(entry, memory: backoff[transactionId]?.next, at: now)
    }

    /// Uploads the paid transactions whose next attempt is due: the journal's, those the journal refused, and — when
    /// the journal cannot be read — the store's unfinished queue.
    package func retryDue(owner: String? = nil) async {
        let now = Date()
        deliveryQueueLooks += 1
        log("delivery queue looks (\(owner.map { "for \($0)" } ?? "what is due"))")
        journalUnreadable = false
        // Read again before each: a finish awaited here lets another task finish (and forget) the next one meanwhile.
        for id in Array(unfinishedSettled.keys) {
            guard let pending = unfinishedSettled[id], pending.next <= now else { continue }
            await finish(pending.transaction)
        }
        // At a sign-in, the account's own payments and those nothing names the payer of (they are the signed-in
        // account's to upload) go at once, whatever backoff they had.
        func due(_ entry: JournalEntry) -> Bool { (owner != nil && (entry.accountId == owner || entry.accountId == nil)) || isDue(entry, at: now) }
        let entries: [JournalEntry]
        do { entries = try journal.entries() } catch {
            // The queue looks again after the first retry delay: the journal may recover, the store may answer.
            journalUnreadable = true
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
                if (try? journal.remove(key: entry.key)) != nil { pendingRemovals.remove(transactionId) }
            } else if due(entry) {
                _ = await upload(entry)
            } else if let next = entry.nextAttemptAt {
                // Not due yet by the journal's time (kept from an earlier launch, or written by another task): the queue
                // wakes for it, whatever memory holds.
                let kept = backoff[transactionId]
                backoff[transactionId] = (max(kept?.attempts ?? 0, entry.attempts), max(kept?.next ?? next, next))
            }
        }
        for entry in unjournaled.values where !seen.contains(entry.transactionId ?? "") && due(entry) {
            _ = await upload(entry)
        }
        // An entry removed elsewhere since (a relaunch's resume, a late copy's upload) has nothing left to remove, and
        // no backoff left to wait for.
        pendingRemovals.formIntersection(seen)
        // Only a backoff that was already due when the look began: one set during the look (a payment journaled and
        // refused meanwhile, absent from this read) is waited for.
        backoff = backoff.filter { seen.contains($0.key) || unjournaled[$0.key] != nil || $0.value.next > now }
    }
}
