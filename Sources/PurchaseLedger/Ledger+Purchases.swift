import AppStoreFormats
import Foundation
import PurchaseAPI

/// How a transaction reached the ledger: kept with it, shown on the operator's timeline.
public enum PurchaseSource: String, Sendable, Hashable, CaseIterable {
    /// The app uploaded Apple's signed transaction.
    case signedTransaction = "jws"
    /// A purchase of an app receipt the app uploaded.
    case receipt
    /// Looked up at Apple's Server API by the transaction id the app sent.
    case serverAPI = "server-api"
    /// The customer's restore.
    case restore
    /// Apple's history of the customer, by their app transaction.
    case appTransaction
    /// The reconciliation job (a proof held while Apple was down, or Apple's history).
    case reconcile
    /// App Store Server Notifications.
    case notification
    /// An operator's settle.
    case admin
}

/// A verified transaction presented by an account, perhaps for a named order.
public struct PurchaseSubmission: Sendable {
    public var accountId: String
    public var orderId: String?
    public var transaction: JWSTransactionDecodedPayload
    /// Where the proof came from.
    public var source: PurchaseSource
    /// Device-integrity signals the app reported with it, recorded in the same transaction as the grant.
    public var deviceSignals: [String]?

    public init(accountId: String, orderId: String? = nil, transaction: JWSTransactionDecodedPayload, source: PurchaseSource = .signedTransaction,
                deviceSignals: [String]? = nil) {
        self.accountId = accountId
        self.orderId = orderId
        self.transaction = transaction
        self.source = source
        self.deviceSignals = deviceSignals
    }
}

/// What a submission came to.
public struct SubmissionResult: Sendable, Hashable {
    /// The wire type itself: what the server answers is what the ledger decided.
    public typealias Outcome = SubmissionOutcome

    public var outcome: Outcome
    /// As it was signed: what the app's StoreKit knows it by (not the ledger's key of a test environment's).
    public var transactionId: String
    /// The order it fulfils; nil when delivered to another account's order.
    public var orderId: String?
    /// The submitter's entitlements after the submission.
    public var entitlements: AccountEntitlements
}

extension Ledger {
    /// Binds a verified transaction to an order and an account and grants it — once. The order comes from
    /// `orderId`, or from the transaction's `appAccountToken` when the app lost its order id; renewals follow their
    /// series' account; a transaction whose token names another account's order goes to that account
    /// (``SubmissionResult/Outcome/deliveredToOwner``). Another account's transaction is refused
    /// (``LedgerError/Code/transactionBoundElsewhere``) and the attempt recorded.
    public func submit(_ submission: PurchaseSubmission, now: Date = Date()) async throws -> SubmissionResult {
        try await submitAll([submission], now: now)[0].get()
    }

    /// Submits several transactions (an app receipt's) as one database transaction: all their grants, device reports
    /// and refusal records commit together. Each gets its own answer; one refused leaves the others granted — a product
    /// this server does not sell (a catalog behind App Store Connect) or a malformed purchase among them included, so
    /// one such line in a receipt never keeps its other, paid purchases from their owners.
    public func submitAll(_ submissions: [PurchaseSubmission], now: Date = Date()) async throws -> [Result<SubmissionResult, LedgerError>] {
        let catalog = catalog
        for submission in submissions { try Self.checkAccountId(submission.accountId) }
        let records = submissions.map { submission -> Result<PurchaseRecord, LedgerError> in
            Result {
                let record = try PurchaseRecord(submission.transaction)
                guard catalog.rule(for: record.productId) != nil else { throw LedgerError(.unknownProduct, "no product \(record.productId) is sold here") }
                return record
            }.mapError { $0 as? LedgerError ?? LedgerError(.invalidInput, "\($0)") }
        }
        if let fast = sqlStore.fastPath, submissions.count == 1 {
            // A refusal is the line's answer here too, as in a transaction of several; only storage failures throw.
            switch records[0] {
            case .failure(let refusal): return [.failure(refusal)]
            case .success(let record):
                do {
                    return [try await submitInAutocommit(submissions[0], record: record, through: fast, now: now)]
                } catch let refusal as LedgerError where refusal.code != .storage {
                    return [.failure(refusal)]
                }
            }
        }
        return try await submitInTransaction(submissions, records: records, now: now)
    }

    /// Submissions in one held transaction, each decided from facts read in it.
    func submitInTransaction(_ submissions: [PurchaseSubmission], records: [Result<PurchaseRecord, LedgerError>],
                             now: Date) async throws -> [Result<SubmissionResult, LedgerError>] {
        let catalog = catalog
        return try await write { session in
            var answers: [Result<SubmissionResult, LedgerError>] = []
            for (submission, checked) in zip(submissions, records) {
                answers.append(try await Self.submitLine(submission, checked, session: session, catalog: catalog, now: now))
            }
            return answers
        }
    }

    /// One line of ``submitInTransaction(_:records:now:)``, decided from facts read in its transaction.
    static func submitLine(_ submission: PurchaseSubmission, _ checked: Result<PurchaseRecord, LedgerError>, session: LedgerSession,
                           catalog: LedgerCatalog, now: Date) async throws -> Result<SubmissionResult, LedgerError> {
        let record: PurchaseRecord
        switch checked {
        case .success(let valid): record = valid
        case .failure(let refusal): return .failure(refusal)
        }
        try await session.lockSeries(record.originalTransactionId)
        let facts = try await session.facts(for: record, namedOrderId: submission.orderId, catalog: catalog)
        // A refusal of one line (another environment's id, an id alone) leaves the others to be granted.
        let decision = SubmissionRules.submit(record, uploader: submission.accountId, orderId: submission.orderId,
                                              source: submission.source, facts: facts, catalog: catalog, now: now)
        if case .rejected(let refusal) = decision.outcome { return .failure(refusal) }
        try await session.apply(decision.effects)
        if let signals = submission.deviceSignals {
            try await session.apply(.recordDeviceReport(transactionId: record.transactionId, accountId: submission.accountId,
                                                        signals: Self.cleaned(signals), at: now))
        }
        let outcome: SubmissionResult.Outcome
        switch decision.outcome {
        case .granted: outcome = .granted
        case .alreadyGranted: outcome = .alreadyGranted
        case .deliveredToOwner: outcome = .deliveredToOwner
        case .refused:
            return .failure(LedgerError(.transactionBoundElsewhere, "transaction \(record.transactionId) belongs to another account"))
        case .rejected(let refusal):
            return .failure(refusal)
        }
        let entitlements = try await session.entitlements(accountId: submission.accountId, catalog: catalog, now: now)
        return .success(SubmissionResult(outcome: outcome, transactionId: record.signedTransactionId,
                                         orderId: outcome == .deliveredToOwner ? nil : decision.orderId, entitlements: entitlements))
    }

    /// One submission as two statements in autocommit — the facts, then the effects with the answer — decided again
    /// from fresh facts when another replica changed them in between.
    func submitInAutocommit(_ submission: PurchaseSubmission, record: PurchaseRecord, through fast: any LedgerFastPath,
                            now: Date) async throws -> Result<SubmissionResult, LedgerError> {
        let catalog = catalog
        var attempt = 0
        // First, the common case without reading: a transaction not stored yet, of a series nobody holds, for an order
        // this process made (or none). The effects then carry those assumptions as preconditions, and a wrong guess
        // costs one rolled-back statement before the facts are read.
        var guess = speculativeFacts(submission, record)
        while true {
            do {
                var facts: TransactionFacts
                if let guessed = guess {
                    facts = guessed
                } else {
                    guard let row = try await fast.facts(LedgerSession.factsBinds(record, namedOrderId: submission.orderId)) else {
                        throw LedgerError(.storage, "the facts query returned no row")
                    }
                    facts = try LedgerSession.decodeFacts(row)
                    if LedgerSession.needsEntries(facts, record, catalog) {
                        facts.entries = try await fast.entries(transactionId: record.transactionId).map(LedgerSession.decodeEntry)
                        facts.entriesRead = true
                    }
                }
                let decision = SubmissionRules.submit(record, uploader: submission.accountId, orderId: submission.orderId, source: submission.source,
                                                      facts: facts, catalog: catalog, now: now)
                if case .rejected(let refusal) = decision.outcome { return .failure(refusal) }
                var effects = decision.effects
                if let signals = submission.deviceSignals {
                    effects.append(.recordDeviceReport(transactionId: record.transactionId, accountId: submission.accountId,
                                                       signals: Self.cleaned(signals), at: now))
                }
                if case .refused = decision.outcome {
                    _ = try await fast.apply(effects, owner: nil, events: recordsWebhookEvents)
                    return .failure(LedgerError(.transactionBoundElsewhere, "transaction \(record.transactionId) belongs to another account"))
                }
                let rows = try await fast.apply(effects, owner: submission.accountId, events: recordsWebhookEvents)
                let entitlements = try LedgerSession.owned(rows, accountId: submission.accountId, catalog: catalog, now: now)
                let outcome: SubmissionResult.Outcome = switch decision.outcome {
                case .granted: .granted
                case .deliveredToOwner: .deliveredToOwner
                default: .alreadyGranted
                }
                return .success(SubmissionResult(outcome: outcome, transactionId: record.signedTransactionId,
                                                 orderId: outcome == .deliveredToOwner ? nil : decision.orderId, entitlements: entitlements))
            } catch is LedgerRace where guess != nil || attempt < 8 {
                if guess != nil { guess = nil } else { attempt += 1 }
            } catch is LedgerHandBack {
                // An effect decided in Swift (a series' periods claimed, with their events): decided again, in a held
                // transaction, from facts read there.
                return try await submitInTransaction([submission], records: [.success(record)], now: now)[0]
            } catch {
                throw Self.ledgerError(error)
            }
        }
    }

    /// The facts of a first submission, when nothing needs reading: no order, or one this process made (its account,
    /// product and token never change); the transaction and its series presumed unstored and unbound — which the
    /// effects then require. Nil when a read is needed.
    func speculativeFacts(_ submission: PurchaseSubmission, _ record: PurchaseRecord) -> TransactionFacts? {
        // A migrated subscription's first period goes to whoever held the series it continues: read, never guessed. So is
        // what an id alone presents: it binds only what the ledger already ties to the uploader, which a guess cannot see.
        guard record.previousOriginalTransactionId == nil, submission.source != .serverAPI else { return nil }
        var facts = TransactionFacts()
        if let orderId = submission.orderId {
            guard let order = recentOrders.order(id: orderId) else { return nil }
            facts.namedOrder = order
        }
        if let token = record.appAccountToken {
            guard let order = recentOrders.order(token: token) else { return nil }
            facts.tokenOrder = order
        }
        return facts
    }

    /// Attempts to present another account's transaction, most recent first.
    public func conflicts(limit: Int = 100) async throws -> [(transactionId: String, claimedBy: String, owner: String, attempts: Int64)] {
        try await read { session in
            try await session.sql.rows("SELECT transaction_id, claimed_by, owner, attempts FROM conflicts ORDER BY first_seen DESC LIMIT $1",
                                       [.int(Int64(max(1, min(limit, 10_000))))]).map { (try $0.text(0), try $0.text(1), try $0.text(2), try $0.int(3)) }
        }
    }

    static func cleaned(_ signals: [String]) -> [String] {
        signals.prefix(20).map { String($0.prefix(64)) }
    }
}
