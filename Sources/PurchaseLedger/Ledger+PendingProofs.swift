import Foundation

/// A proof of purchase the server could not judge yet because Apple was unavailable: kept durably, retried by the
/// reconciliation job, never dropped. A paid order is never lost to an outage.
public struct PendingProof: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A base64 app receipt for verifyReceipt.
        case receipt
        /// A transaction id for the Server API.
        case transactionId
    }

    public enum State: String, Sendable, Hashable, Codable {
        case pending
        /// Verified and submitted.
        case granted
        /// Apple refused it for a reason retrying cannot change.
        case rejected
    }

    public var proofId: String
    public var accountId: String
    public var orderId: String?
    public var kind: Kind
    public var proof: String
    public var state: State
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    /// When it was first held.
    public var heldAt: Date
    /// How many of its retries Apple answered that it does not know the transaction id (``Ledger/updateProof(_:state:error:retryAt:notFound:audit:now:)``).
    public var notFoundAnswers: Int = 0
}

/// An account already has as many proofs held as the server keeps for one (``Ledger/holdProof(proofId:accountId:orderId:kind:proof:error:retryAt:now:perAccountLimit:)``).
public struct HeldProofLimitReached: Error, Sendable {
    public let accountId: String
    public let limit: Int
}

extension Ledger {
    /// Keeps a proof for later (once per `proofId`; holding it again changes nothing). Returns it as stored.
    /// `perAccountLimit`: a new proof of an account that already has this many pending is not kept
    /// (``HeldProofLimitReached``); the same proof again still answers as stored. Concurrent holds of one account may
    /// pass the limit by the few under way at once.
    @discardableResult
    public func holdProof(proofId: String, accountId: String, orderId: String?, kind: PendingProof.Kind, proof: String, error: String,
                          retryAt: Date, now: Date = Date(), perAccountLimit: Int? = nil) async throws -> PendingProof {
        try Self.checkAccountId(accountId)
        let stored: PendingProof? = try await write { session in
            if let perAccountLimit, try await session.pendingProof(proofId) == nil {
                let waiting = try await session.sql.first("SELECT COUNT(*) FROM pending_proofs WHERE state = 'pending' AND account_id = $1",
                                                          [.text(accountId)])?.int(0) ?? 0
                if waiting >= perAccountLimit { return nil }
            }
            try await session.sql.execute("""
                INSERT INTO pending_proofs (proof_id, account_id, order_id, kind, proof, state, attempts, next_attempt_at, last_error, created_at, updated_at)
                VALUES ($1, $2, $3, $4, $5, 'pending', 1, $6, $7, $8, $8) ON CONFLICT (proof_id) DO NOTHING
                """, [.text(proofId), .text(accountId), .of(orderId), .text(kind.rawValue), .text(proof), .of(retryAt), .text(error), .of(now)])
            guard let stored = try await session.pendingProof(proofId) else { throw LedgerError(.storage, "the held proof was not stored") }
            return stored
        }
        guard let stored else { throw HeldProofLimitReached(accountId: accountId, limit: perAccountLimit ?? 0) }
        return stored
    }

    /// Claims up to `limit` proofs due at `now`, leasing each for `lease` seconds so that another replica does not
    /// take the same one meanwhile. Accounts take turns: each account's longest-due proof first, then each one's
    /// second, and so on — one account's flood of held junk cannot keep another's real purchase waiting pass after pass.
    public func claimDueProofs(now: Date = Date(), limit: Int = 20, lease: TimeInterval = 60) async throws -> [PendingProof] {
        try await write { session in
            let due = try await session.sql.rows("""
                SELECT \(LedgerSession.proofColumns) FROM (
                    SELECT \(LedgerSession.proofColumns),
                           ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY next_attempt_at, proof_id) AS turn
                    FROM pending_proofs WHERE state = 'pending' AND next_attempt_at <= $1) due
                ORDER BY turn, next_attempt_at, proof_id LIMIT \(max(1, min(limit, 10_000)))
                """, [.of(now)]).map(LedgerSession.decodeProof)
            var claimed: [PendingProof] = []
            for proof in due where try await session.sql.first("""
                    UPDATE pending_proofs SET next_attempt_at = $1, updated_at = $2
                    WHERE proof_id = $3 AND state = 'pending' AND next_attempt_at <= $2 RETURNING proof_id
                    """, [.of(now.addingTimeInterval(lease)), .of(now), .text(proof.proofId)]) != nil {
                claimed.append(proof)
            }
            return claimed
        }
    }

    /// Records how a retry went: `granted` or `rejected` end it; `pending` schedules the next attempt at `retryAt`.
    /// `notFound`: Apple answered that it does not know the transaction id (counted in ``PendingProof/notFoundAnswers``).
    /// A proof already ended stays as it ended (a slow replica cannot reopen it). The audit entry commits with it.
    public func updateProof(_ proofId: String, state: PendingProof.State, error: String?, retryAt: Date? = nil, notFound: Bool = false,
                            audit: AuditEntry? = nil, now: Date = Date()) async throws {
        try await write { session in
            try await session.sql.execute("""
                UPDATE pending_proofs SET state = $1, attempts = attempts + 1, last_error = $2, next_attempt_at = $3, updated_at = $4,
                    not_found_answers = not_found_answers + $6
                WHERE proof_id = $5 AND state = 'pending'
                """, [.text(state.rawValue), .of(error), .of(retryAt ?? now), .of(now), .text(proofId), .int(notFound ? 1 : 0)])
            if let audit { try await session.apply(.audit(actor: audit.actor, action: audit.action, subject: audit.subject, detail: audit.detail, at: now)) }
        }
    }

    /// Proofs in `state`, oldest first.
    public func pendingProofs(state: PendingProof.State = .pending, limit: Int = 500) async throws -> [PendingProof] {
        try await read { try await $0.pendingProofs(where: "state = $1", [.text(state.rawValue)], order: "created_at", limit: limit) }
    }
}
