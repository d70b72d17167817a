import Foundation

/// What the client does with a journaled payment once the server answered its upload — a pure function of the entry,
/// the answer and who is signed in, apart from the client that carries it out (as swift-certificates keeps its
/// policies apart from the verifier), so that every answer's consequence is tested without a server.
///
/// The promise it keeps: a payment leaves the journal and is finished only when it reached its owner (granted, or
/// delivered to the account whose order it carries) or the server refused it for good (`final`); everything else keeps
/// it journaled and unfinished, retried with backoff.
enum DeliveryRules {
    /// What happens to the journal entry.
    enum JournalAction: Equatable {
        /// Settled: the entry leaves the journal (and the transaction is finished).
        case remove
        /// Kept, with one more attempt counted and the next one due after the backoff.
        case reschedule(reason: String)
        /// The order was refused but the proof stands: upload again at once without the order id (the server binds by
        /// the payment's `appAccountToken`), and keep that copy.
        case retryWithoutOrder
    }

    struct Decision: Equatable {
        var journal: JournalAction
        /// Whether the store's transaction is finished.
        var finish: Bool
        /// What the app hears.
        var event: PurchaseEvent?
        /// The entitlements the answer carries, shown when they are the signed-in account's.
        var publish: Entitlements?
        var result: PurchaseClient.UploadResult
    }

    /// Refusals about the order, not the payment, that the proof alone can overcome. `order_account_mismatch` too: the
    /// upload names its account (`account_mismatch` answers a token of another), so this one says the order is another
    /// account's than the entry's — made while the sign-in changed, by a version without the order's account check —
    /// and it always will be. Without the order id the server binds by the payment's `appAccountToken`, to the account
    /// whose order the payment carries (`deliveredToOwner`), and the device can finish.
    static let orderCodes: Set<ErrorCode> = [.orderNotFound, .orderProductMismatch, .orderAccountMismatch]

    /// Whether `signedIn` may upload `entry` now: only the account that paid (when the entry names it) uploads it, so
    /// a shared device never hands one account's payment to another; and nobody signed in uploads nothing, rather than
    /// send it under whatever token the app's source would still give (a signed-out account's). Nil when it may; else
    /// why it waits.
    static func waiting(_ entry: JournalEntry, signedIn: String?) -> String? {
        if let owner = entry.accountId, owner != signedIn { return "paid by account \(owner), which is not signed in" }
        return signedIn == nil ? "nobody is signed in" : nil
    }

    /// The consequence of one upload's answer (`failure`: no answer to act on).
    static func decide(_ entry: JournalEntry, _ answer: Result<PurchaseServerClient.Submission, PurchaseFailure>) -> Decision {
        let product = entry.productId
        let transactionId = entry.transactionId ?? ""
        switch answer {
        case .failure(let failure):
            return Decision(journal: .reschedule(reason: failure.message), finish: false,
                            event: .uploadFailed(productId: product, transactionId: transactionId, reason: failure.message),
                            publish: nil, result: .pending(failure.message))
        case .success(.granted(let entitlements)):
            return Decision(journal: .remove, finish: true, event: .granted(productId: product, transactionId: transactionId),
                            publish: entitlements, result: .granted(entitlements))
        case .success(.deliveredToOwner(let entitlements)):
            return Decision(journal: .remove, finish: true, event: .deliveredToOwner(productId: product, transactionId: transactionId),
                            publish: entitlements, result: .deliveredToOwner)
        case .success(.held):
            let reason = "the server is waiting for Apple"
            return Decision(journal: .reschedule(reason: reason), finish: false, event: nil, publish: nil, result: .pending(reason))
        case .success(.rejected(.accountMismatch, _, _)):
            // The app's token is another account's than the one that paid: it waits for that account, quietly, with
            // backoff (an app whose token source never matches its sign-in must not upload every second).
            return Decision(journal: .reschedule(reason: "account_mismatch"), finish: false, event: nil, publish: nil,
                            result: .waiting("paid by account \(entry.accountId ?? "?"), the token is another account's"))
        case .success(.rejected(let code, _, _)) where orderCodes.contains(code) && entry.orderId != nil:
            return Decision(journal: .retryWithoutOrder, finish: false, event: nil, publish: nil, result: .pending("\(code)"))
        case .success(.rejected(let code, let message, .final)):
            let reason = "\(code): \(message)"
            return Decision(journal: .remove, finish: true, event: .rejected(productId: product, transactionId: transactionId, reason: reason),
                            publish: nil, result: .rejected(reason))
        case .success(.rejected(let code, let message, .retry)):
            let reason = "\(code): \(message)"
            return Decision(journal: .reschedule(reason: reason), finish: false,
                            event: .uploadFailed(productId: product, transactionId: transactionId, reason: reason), publish: nil, result: .pending(reason))
        case .success(.rejected(let code, let message, _)):
            // Fixable by the server's operator (configuration, policy), or a class this build does not know: the payment
            // is kept and retried; the app can say "paid — we will deliver it".
            let reason = "\(code): \(message)"
            return Decision(journal: .reschedule(reason: reason), finish: false,
                            event: .deliveryDelayed(productId: product, transactionId: transactionId, reason: reason), publish: nil, result: .delayed(reason))
        }
    }

    /// When the `attempts`-th failed attempt is followed by the next: `delays[min(attempts, count) - 1]` after `now`.
    static func nextAttempt(after attempts: Int, delays: [Duration], now: Date) -> Date {
        let delay = delays[max(0, min(attempts, delays.count) - 1)]
        return now.addingTimeInterval(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
    }

    /// How long the delivery queue sleeps: until the earliest of `dueTimes` (the caller leaves out what waits for a
    /// sign-in, which wakes the queue itself), at least 50 ms — something due now is looked at again at once, an upload
    /// that was in flight at the last look included — at most `cap` (a safety net).
    static func sleep(dueTimes: [Date], now: Date, cap: TimeInterval = 600) -> TimeInterval {
        let due = dueTimes.min() ?? now.addingTimeInterval(cap)
        return max(0.05, min(cap, due.timeIntervalSince(now)))
    }

    /// Whether an entry is due at `now`: the later of the journal's and the memory's backoff has passed.
    static func isDue(_ entry: JournalEntry, memory: Date?, at now: Date) -> Bool {
        let next = [entry.nextAttemptAt, memory].compactMap { $0 }.max()
        return (next ?? now) <= now
    }
}
