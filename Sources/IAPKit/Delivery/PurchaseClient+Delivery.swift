import Foundation

/// A paid transaction from the store to the journal, and once settled, finished.
extension PurchaseClient {
    // MARK: Delivery

    /// Journals a paid transaction (first), then uploads it. `accountId` is the account that ordered it when known
    /// (a purchase), else the journal's intent for its token says it, else it is unknown.
    package func deliver(_ transaction: StoreTransaction, orderId: String?, accountId owner: String?) async -> PurchaseOutcome {
        let id = transaction.transactionId
        if let result = settled[id] {
            // The store handed over again a transaction this process settled but could not finish: finish it now.
            if unfinishedSettled[id] != nil { await finish(transaction) }
            return outcome(result, id, askedAs: accountId)
        }
        var entries: [JournalEntry] = []
        var unreadable: (any Error)?
        do { entries = try journal.entries() } catch {
            unreadable = error
            send(.journalFailed(productId: transaction.productId, transactionId: id, reason: "the journal cannot be read: \(error)"))
        }
        if let existing = entries.first(where: { $0.key == "paid-" + id }) ?? unjournaled[id] {
            // A copy arriving again (the updates stream, a relaunch's adoption) waits for its backoff like any retry.
            guard isDue(existing, at: Date()) else { return .paidPendingDelivery(transactionId: id) }
            return outcome(await upload(existing), id)
        }
        // The order id comes from this call or the journal's intent for the payment's token — never from the token alone.
        let intent = Self.intent(for: transaction, in: entries)
        var entry = JournalEntry(kind: .paid, orderId: orderId ?? intent?.orderId, productId: transaction.productId,
                                 appAccountToken: transaction.appAccountToken, transactionId: id,
                                 signedTransaction: transaction.signedTransaction, accountId: owner ?? intent?.accountId)
        entry.signedRenewalInfo = transaction.signedRenewalInfo
        do {
            // A journal that cannot be read may hold this payment's entry, with the account that paid: an entry
            // written without seeing it would overwrite that account with whatever this call knows.
            if let unreadable { throw unreadable }
            try journal.write(entry)
        } catch {
            // The payment is still safe in the store's unfinished queue (nothing finishes it before a grant). Keep it
            // in memory, upload it now, and let the retrier carry it while the journal refuses.
            unjournaled[id] = entry
            send(.journalFailed(productId: transaction.productId, transactionId: id, reason: "\(error)"))
            let result = await upload(entry)
            switch result {
            case .granted, .deliveredToOwner, .rejected: return outcome(result, id)
            case .delayed(let reason), .pending(let reason), .waiting(let reason):
                return .paidNotJournaled(transactionId: id, reason: "the journal cannot be written (\(error)); \(reason)")
            }
        }
        send(.journaled(productId: transaction.productId, transactionId: id))
        checkpointObserver?(.afterJournal)
        if let intent { try? journal.remove(key: intent.key) }
        return outcome(await upload(entry), id)
    }

    /// `askedAs`: for a transaction this process settled earlier, the account asking now. StoreKit answers a purchase of
    /// what the Apple ID already owns with the transaction that bought it: granted to another account of the app, it
    /// is that account's (delivered to its owner), not a grant to show here.
    private func outcome(_ result: UploadResult, _ transactionId: String, askedAs asking: String? = nil) -> PurchaseOutcome {
        switch result {
        case .granted(let entitlements) where asking != nil && entitlements.accountId != asking: .deliveredToOwner(transactionId: transactionId)
        case .granted(let entitlements): .granted(entitlements)
        case .deliveredToOwner: .deliveredToOwner(transactionId: transactionId)
        case .rejected(let reason): .failed(PurchaseFailure(.rejectedByServer, reason))
        case .delayed(let reason): .paidDeliveryDelayed(transactionId: transactionId, reason: reason)
        case .pending, .waiting: .paidPendingDelivery(transactionId: transactionId)
        }
    }

    func settle(_ entry: JournalEntry, _ result: UploadResult) {
        guard let transactionId = entry.transactionId else { return }
        settled[transactionId] = result
        backoff[transactionId] = nil
        unjournaled[transactionId] = nil
        do { try journal.remove(key: entry.key) } catch {
            // The entry stays; `settled` keeps this process from uploading it again, and the delivery queue removes it
            // later (it looks again after the first retry delay).
            pendingRemovals.insert(transactionId)
            wakeDeliveryQueue()
            send(.journalFailed(productId: entry.productId, transactionId: transactionId, reason: "cannot remove the delivered entry: \(error)"))
        }
    }

    func finish(_ entry: JournalEntry) async {
        guard let signed = entry.signedTransaction, let transaction = try? StoreTransaction(signedTransaction: signed) else { return }
        await finish(transaction)
    }

    /// Finishes a settled transaction. A transaction the store no longer lists is done (the adapter returns normally).
    /// A failed finish leaves it in the store's queue (a relaunch would adopt it and hear that it is already granted);
    /// this process tries again with backoff (``retryDue(owner:)``), and at once when the store hands it over again.
    func finish(_ transaction: StoreTransaction) async {
        let id = transaction.transactionId
        guard finishing.insert(id).inserted else { return }
        defer { finishing.remove(id) }
        do {
            try await store.finish(transaction)
            unfinishedSettled[id] = nil
            send(.finished(productId: transaction.productId, transactionId: id))
        } catch {
            let attempts = (unfinishedSettled[id]?.attempts ?? 0) + 1
            unfinishedSettled[id] = (transaction, attempts, DeliveryRules.nextAttempt(after: attempts, delays: retryDelays, now: Date()))
            log("finish of \(id) failed: \(error)")
            send(.finishFailed(productId: transaction.productId, transactionId: id, reason: "the store did not finish it; tried again later"))
            wakeDeliveryQueue()
        }
    }
}
