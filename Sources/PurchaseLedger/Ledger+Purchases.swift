import AppStoreFormats
import Foundation

/// A verified transaction presented by an account, perhaps for a named order.
public struct PurchaseSubmission: Sendable {
    public var accountId: String
    public var orderId: String?
    public var transaction: JWSTransactionDecodedPayload
    /// `jws`, `receipt`, `transactionId`, `restore`, `admin`, `reconcile`…: where the proof came from.
    public var source: String
    /// Device-integrity signals the app reported with it, recorded in the same transaction as the grant.
    public var deviceSignals: [String]?

    public init(accountId: String, orderId: String? = nil, transaction: JWSTransactionDecodedPayload, source: String = "jws",
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
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// This submission bound and granted the transaction.
        case granted
        /// The transaction was already bound to this account: nothing more was granted.
        case alreadyGranted
        /// The transaction's `appAccountToken` names another account's order: it was granted to that account (now or
        /// before), and nothing to the submitter. The device may finish it: it reached its owner.
        case deliveredToOwner
    }

    public var outcome: Outcome
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
    /// and refusal records commit together. Each gets its own answer; one refused leaves the others granted.
    public func submitAll(_ submissions: [PurchaseSubmission], now: Date = Date()) async throws -> [Result<SubmissionResult, LedgerError>] {
        let catalog = catalog
        let records = try submissions.map { submission -> PurchaseRecord in
            try Self.checkAccountId(submission.accountId)
            let record = try PurchaseRecord(submission.transaction)
            guard catalog.rule(for: record.productId) != nil else { throw LedgerError(.unknownProduct, "no product \(record.productId) is sold here") }
            return record
        }
        let results = try await write { session in
            try zip(submissions, records).map { submission, record -> Result<SubmissionResult, LedgerError> in
                let facts = try session.facts(for: record, namedOrderId: submission.orderId, catalog: catalog)
                let decision = try SubmissionRules.submit(record, uploader: submission.accountId, orderId: submission.orderId,
                                                          source: submission.source, facts: facts, catalog: catalog, now: now)
                try session.apply(decision.effects)
                if let signals = submission.deviceSignals {
                    try session.apply(.recordDeviceReport(transactionId: record.transactionId, accountId: submission.accountId,
                                                          signals: Self.cleaned(signals), at: now))
                }
                let outcome: SubmissionResult.Outcome
                switch decision.outcome {
                case .granted: outcome = .granted
                case .alreadyGranted: outcome = .alreadyGranted
                case .deliveredToOwner: outcome = .deliveredToOwner
                case .refused:
                    return .failure(LedgerError(.transactionBoundElsewhere, "transaction \(record.transactionId) belongs to another account"))
                }
                let entitlements = try session.entitlements(accountId: submission.accountId, catalog: catalog, now: now)
                return .success(SubmissionResult(outcome: outcome, transactionId: record.transactionId,
                                                 orderId: outcome == .deliveredToOwner ? nil : decision.orderId, entitlements: entitlements))
            }
        }
        return results
    }

    /// Attempts to present another account's transaction, most recent first.
    public func conflicts(limit: Int = 100) async throws -> [(transactionId: String, claimedBy: String, owner: String, attempts: Int64)] {
        try await read { session in
            try session.sql.rows("SELECT transaction_id, claimed_by, owner, attempts FROM conflicts ORDER BY first_seen DESC LIMIT $1",
                                 [.int(Int64(limit))]).map { (try $0.text(0), try $0.text(1), try $0.text(2), try $0.int(3)) }
        }
    }

    static func cleaned(_ signals: [String]) -> [String] {
        signals.prefix(20).map { String($0.prefix(64)) }
    }
}
