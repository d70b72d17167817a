import AppStoreClient
import AppStoreFormats
import Foundation
import Logging
import PurchaseAPI
import PurchaseLedger
import ServiceLifecycle

/// The reconciliation job: retries proofs held while Apple was unavailable, reads Apple's notification history for
/// notifications the endpoint never applied, and asks the Server API about subscriptions whose last known period ended
/// without news. Every repair is audited.
/// Safe on several replicas at once: held proofs are leased, and every grant goes through the ledger's exactly-once
/// binding.
public struct Reconciler: Sendable {
    let services: PurchaseServices

    public init(services: PurchaseServices) {
        self.services = services
    }

    /// What one pass did: the admin API answers it as it is.
    public typealias Report = ReconcileReport

    /// Whether retrying a held proof can never change its answer: Apple refused it, it does not verify, or it is
    /// another account's. Everything else (Apple or the database unavailable, credentials to fix) is retried.
    static func isFinal(_ error: any Error) -> Bool {
        switch error {
        case let error as AppStoreClientError: error.code == .rejected
        case let error as APIError: error.refusalClass == .final
        case is AppStoreError: true
        case let error as LedgerError: error.code == .transactionBoundElsewhere || error.code == .possessionRequired
        default: false
        }
    }

    /// Of a proof's refused lines, the refusal that answers for the proof when nothing was granted. Answering a device
    /// live (`final: false`): one that can still change (transient, or the operator's to fix) before a final one — a
    /// receipt's line of another account must not let a client finish the receipt's other paid lines. Rejecting a held
    /// proof nothing of which can change any more (``mayStillBeGranted(_:bound:)`` holds the others): a final one
    /// first, so that the audit names the reason that is final. Nil when no line was refused.
    /// A held proof nothing of which was granted (and nothing can be): the refusal that rejects it, which the audit
    /// names, and the one a client sending the proof again is answered (``ProofIntake/storedRefusal(_:)``) — as live,
    /// a refusal that can still change before a final one: a StoreKit 1 client told `final` finishes every line of the
    /// receipt, one still payable to it included.
    static func rejection(_ results: [Result<SubmissionResult, LedgerError>]) -> (deciding: APIError, answered: APIError)? {
        guard nothingGranted(results), let deciding = decidingRefusal(results, final: true).map(refusal) else { return nil }
        return (deciding, decidingRefusal(results).map(refusal) ?? deciding)
    }

    static func decidingRefusal(_ results: [Result<SubmissionResult, LedgerError>], final: Bool = false) -> LedgerError? {
        let refusals = results.compactMap { result -> LedgerError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        return refusals.first { isFinal($0) == final } ?? refusals.first
    }

    /// Whether a held proof's refused line may be granted by a later pass, which keeps the proof pending: the database
    /// failing, or a purchase of a product the catalog lacks that no account holds (a catalog behind App Store Connect
    /// for an hour; a notification may have stored it unbound meanwhile). A retired product's purchase an account took
    /// long ago is not waiting for anything.
    static func mayStillBeGranted(_ refusal: LedgerError, bound: Bool) -> Bool {
        refusal.code == .storage || (refusal.code == .unknownProduct && !bound)
    }

    /// Seconds before a held proof tried `attempts` times is tried again: doubling from a minute, at most an hour.
    static func backoff(attempts: Int) -> TimeInterval {
        min(3600, 30 * pow(2, Double(min(attempts, 7))))
    }

    /// A held transaction id Apple does not know is rejected only once "not found" has lasted this long since it was
    /// held (three days) and Apple has said so ``notFoundAnswersToReject`` times: the proof was held because Apple was
    /// down, and Apple coming back behind (or in an incident of its own) answers a paid purchase "not found" for a while.
    /// Rejected early, that purchase was lost. Until then it is retried with the usual backoff (at most hourly).
    static let notFoundRejectAfter: TimeInterval = 72 * 3600
    static let notFoundAnswersToReject = 3

    /// The refusal a rejected held proof is stored with (`last_error`, "status code: message"), as the API would have
    /// answered it then: the same proof uploaded again is answered with it (``ProofIntake/take(_:accountId:orderId:)``).
    static func refusal(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError: error
        case let error as LedgerError: APIError(error)
        case let error as AppStoreError: APIError(error)
        case let error as AppStoreClientError: APIError(error)
        default: APIError(.unprocessableContent, code: .proofRejected, "\(error)")
        }
    }

    /// Refusals of the order a line names, not of its payment.
    static let orderCodes: Set<LedgerError.Code> = [.orderNotFound, .orderProductMismatch, .orderAccountMismatch]

    /// Whether no line of a proof was granted (an empty proof grants nothing either).
    static func nothingGranted(_ results: [Result<SubmissionResult, LedgerError>]) -> Bool {
        !results.contains { if case .success = $0 { true } else { false } }
    }

    /// One pass over what is due now.
    public func runOnce() async throws -> Report {
        var report = Report()
        let now = services.now()
        for proof in try await services.ledger.claimDueProofs(now: now) {
            let kind: ProofIntake.Proof = proof.kind == .receipt ? .receipt(proof.proof) : .transactionId(proof.proof)
            do {
                let transactions = try await ProofIntake.verify(kind, with: services)
                let orderIds = try await ProofIntake.orderIds(for: transactions, orderId: proof.orderId, fromReceipt: proof.kind == .receipt,
                                                              ledger: services.ledger)
                var results = try await services.ledger.submitAll(zip(transactions, orderIds).map {
                    // Judged as the proof it was: a held id binds no more than an id answered at once would.
                    PurchaseSubmission(accountId: proof.accountId, orderId: $1, transaction: $0, source: kind.source)
                }, now: now)
                // A refusal of the order, not the payment (gone, another product's, another account's): a line that
                // carries its payment's token goes again without the order and binds by that token, as the SDK's retry
                // does — the order never changes, and the proof would wait for it for ever. A line without one (a
                // receipt without the Server API) would bind to the uploader, and the order named was the only sign of
                // whose it is: it stays refused.
                let orderRefused = results.indices.filter { line in
                    guard orderIds[line] != nil, transactions[line].appAccountToken != nil, case .failure(let refusal) = results[line] else { return false }
                    return Self.orderCodes.contains(refusal.code)
                }
                if !orderRefused.isEmpty {
                    let again = try await services.ledger.submitAll(orderRefused.map {
                        PurchaseSubmission(accountId: proof.accountId, orderId: nil, transaction: transactions[$0], source: kind.source)
                    }, now: now)
                    for (line, result) in zip(orderRefused, again) { results[line] = result }
                }
                // A line refused for a reason a later pass can undo keeps the proof pending and listed, though the
                // receipt's other lines came back granted: marked granted, it was never tried again and its payment was
                // lost. Only a reason that can change holds it.
                let unknown = zip(transactions, results).compactMap { transaction, result -> String? in
                    guard case .failure(let refusal) = result, refusal.code == .unknownProduct else { return nil }
                    return transaction.transactionId
                }
                let stored = unknown.isEmpty ? [:] : try await services.ledger.transactions(ids: unknown)
                for (index, result) in results.enumerated() {
                    guard case .failure(let refusal) = result else { continue }
                    if Self.mayStillBeGranted(refusal, bound: stored[transactions[index].transactionId ?? ""]?.accountId != nil) { throw refusal }
                }
                // Nothing of it was granted and nothing can be: rejected, whatever the refusal's class (a retired product's
                // purchase, a malformed line, another account's), rather than retried every hour for ever.
                if let (answer, live) = Self.rejection(results) {
                    try await services.ledger.updateProof(proof.proofId, state: .rejected, error: "\(live)", audit: .init(
                        actor: "reconciler", action: .proofRejected, subject: proof.proofId, detail: "\(answer)"), now: now)
                    report.proofsRejected += 1
                    continue
                }
                let granted = results.filter { if case .success = $0 { true } else { false } }.count
                try await services.ledger.updateProof(proof.proofId, state: .granted, error: nil, audit: .init(
                    actor: "reconciler", action: .proofGranted, subject: proof.proofId,
                    detail: "\(granted) of \(transactions.count) transaction(s) for \(proof.accountId)"), now: now)
                report.proofsGranted += 1
            } catch let error as APIError where error.code == ProofIntake.notFoundCode {
                // Apple knows the id in no environment this server accepts. That may be Apple behind or in an incident
                // of its own, the proof having been held because Apple was down: only an answer that lasts days, given
                // several times, is taken as junk. Before that the proof is retried with the usual backoff.
                if now.timeIntervalSince(proof.heldAt) >= Self.notFoundRejectAfter, proof.notFoundAnswers + 1 >= Self.notFoundAnswersToReject {
                    try await services.ledger.updateProof(proof.proofId, state: .rejected, error: "\(error)", notFound: true, audit: .init(
                        actor: "reconciler", action: .proofRejected, subject: proof.proofId, detail: "\(error)"), now: now)
                    report.proofsRejected += 1
                } else {
                    try await services.ledger.updateProof(proof.proofId, state: .pending, error: "\(error)",
                                                          retryAt: now.addingTimeInterval(Self.backoff(attempts: proof.attempts)), notFound: true, now: now)
                    report.proofsPostponed += 1
                }
            } catch where Self.isFinal(error) {
                let answer = Self.refusal(error)
                try await services.ledger.updateProof(proof.proofId, state: .rejected, error: "\(answer)", audit: .init(
                    actor: "reconciler", action: .proofRejected, subject: proof.proofId, detail: "\(answer)"), now: now)
                report.proofsRejected += 1
            } catch {
                // Apple down, an expired API key, a database restarting: a paid purchase waits for the next attempt.
                try await services.ledger.updateProof(proof.proofId, state: .pending, error: "\(error)",
                                                      retryAt: now.addingTimeInterval(Self.backoff(attempts: proof.attempts)), now: now)
                report.proofsPostponed += 1
            }
        }
        do {
            (report.notificationsRecovered, report.notificationHistoryStalled) = try await recoverNotifications(now: now)
        } catch {
            // Storage failing mid-read: reported, and the pass goes on to the work after it (the cursor did not move).
            report.notificationHistoryStalled = "reading Apple's notification history failed: \(error)"
        }
        report.subscriptionsRefreshed = try await refreshStaleSubscriptions(now: now)
        report.ordersRepaired = try await repairStaleOrders(now: now)
        // Consumption requests recovered from Apple's history, or not sent while Apple was away: answered while due.
        report.consumptionAnswersTried = try await ConsumptionResponder(services: services).answerOwed()
        services.metrics.reconciled(report)
        return report
    }

    /// Asks the Server API for the current state of series whose last known period ended in the past day and stores
    /// what it says as a notification would (once per transaction and status: an unchanged answer stores nothing).
    /// At most 50 series a pass, those not asked about yet first, then the longest ago, each asked again after a
    /// growing delay (``Ledger/recordSubscriptionCheck(_:at:forgettingBefore:)``): one in billing retry stays stale all
    /// day and must not take every pass.
    func refreshStaleSubscriptions(now: Date) async throws -> Int {
        guard let serverAPI = services.verifier.apple.serverAPI else { return 0 }
        var refreshed = 0
        let window = now.addingTimeInterval(-86_400)
        let stale = try await services.ledger.staleSubscriptions(since: window, before: now, limit: 50, dueBy: now)
        for series in stale {
            let (original, account) = (series.originalTransactionId, series.accountId)
            let statuses: StatusResponse?
            do {
                statuses = try await serverAPI.subscriptionStatuses(original)
            } catch let error as AppStoreClientError where error.code == .unavailable || error.code == .unauthorized {
                // Apple away (or our key refused): nothing was learnt, and the series keeps its place in line.
                continue
            } catch {
                // Refused or answered out of spec: an answer all the same, and asking again at once would be refused again.
                statuses = nil
            }
            try await services.ledger.recordSubscriptionCheck(series, at: now, forgettingBefore: window)
            guard let statuses else { continue }
            for item in (statuses.data ?? []).flatMap({ $0.lastTransactions ?? [] }) {
                guard let signed = item.signedTransactionInfo,
                      let transaction = try? await services.verifier.transaction(signed), transaction.originalTransactionId == original else { continue }
                let renewal = try? await item.signedRenewalInfo.asyncMap { try await services.verifier.signedData.verifyRenewalInfo($0).payload }
                let signedDate = transaction.signedDate ?? now
                let expires = Int64((transaction.expiresDate ?? .distantPast).timeIntervalSince1970 * 1000)
                let event = NotificationEvent(
                    notificationUUID: "reconcile-\(transaction.transactionId ?? original)-\(item.status?.rawValue ?? 0)-\(expires)",
                    type: .reconciled,
                    subtype: nil, signedDate: signedDate, signedPayload: signed, transaction: transaction, renewal: renewal, status: item.status)
                if try await services.ledger.apply(event, now: now) == .applied {
                    try await services.ledger.audit(actor: "reconciler", action: .subscriptionRefreshed, subject: original,
                                                    detail: "status \(item.status?.rawValue ?? 0) for \(account)", now: now)
                    refreshed += 1
                }
            }
        }
        return refreshed
    }
}

extension Reconciler {
    /// For orders open for over ten minutes, reads the customer's transaction history from the Server API (when the
    /// account has any transaction to ask with) and grants what carries an open order's `appAccountToken`: the app paid,
    /// and neither the app nor a notification told the server.
    func repairStaleOrders(now: Date) async throws -> Int {
        guard let serverAPI = services.verifier.apple.serverAPI else { return 0 }
        let open = try await services.ledger.openOrders(createdBefore: now.addingTimeInterval(-600), after: now.addingTimeInterval(-7 * 86_400),
                                                        limit: 100)
        var repaired = 0
        for (account, orders) in Dictionary(grouping: open, by: \.accountId) {
            guard let handle = try await services.ledger.anyTransactionId(accountId: account) else { continue }
            let byToken = Dictionary(orders.map { ($0.appAccountToken, $0) }, uniquingKeysWith: { first, _ in first })
            var revision: String?
            for _ in 0..<10 {
                // Newest changes first: a payment for an open order is among the customer's latest, and a long-standing
                // customer's history is longer than the pages read here (read oldest first, it was never reached).
                guard let page = try? await serverAPI.history(handle, revision: revision, sort: .descending) else { break }
                for signed in page.signedTransactions ?? [] {
                    guard let transaction = try? await services.verifier.transaction(signed), let token = transaction.appAccountToken,
                          let order = byToken[token], order.productId == transaction.productId else { continue }
                    // One order's refusal (another account's transaction) must not stop the repair of the others.
                    guard let result = try? await services.ledger.submit(.init(accountId: account, orderId: order.orderId, transaction: transaction,
                                                                               source: .reconcile), now: now) else { continue }
                    try await services.ledger.audit(actor: "reconciler", action: .orderRepaired, subject: order.orderId,
                                                    detail: "transaction \(result.transactionId) (\(result.outcome.rawValue)) from the Server API history",
                                                    now: now)
                    repaired += 1
                }
                guard page.hasMore == true, let next = page.revision else { break }
                revision = next
            }
        }
        return repaired
    }
}

/// Runs the reconciler every `interval` until the server shuts down.
public struct ReconciliationService: Service {
    let reconciler: Reconciler
    let interval: Duration
    let logger: Logger

    public init(reconciler: Reconciler, interval: Duration, logger: Logger = Logger(label: "iapkit.reconciler")) {
        self.reconciler = reconciler
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let report = try await reconciler.runOnce()
                if let stalled = report.notificationHistoryStalled { logger.warning("notification history not read to the present: \(stalled)") }
                if report != Reconciler.Report() { logger.info("reconciled", metadata: ["report": "\(report)"]) }
            } catch {
                logger.error("reconciliation failed: \(error)")
            }
            // A shutdown (SIGTERM, SIGINT) ends the wait, and the job with it: a pass under way finishes first. Ending
            // on the cancelled wait's error would make the whole server exit as failed.
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) } } catch is CancellationError { return }
        }
    }
}
