import Foundation
import SQLKit

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
}

extension Ledger {
    /// Keeps a proof for later (once per `proofId`; holding it again changes nothing). Returns it as stored.
    @discardableResult
    public func holdProof(proofId: String, accountId: String, orderId: String?, kind: PendingProof.Kind, proof: String, error: String,
                          retryAt: Date, now: Date = Date()) async throws -> PendingProof {
        try Self.checkAccountId(accountId)
        return try await transaction { db in
            try await db.raw("""
                INSERT INTO pending_proofs (proof_id, account_id, order_id, kind, proof, state, attempts, next_attempt_at, last_error, created_at, updated_at)
                VALUES (\(bind: proofId), \(bind: accountId), \(bind: orderId), \(bind: kind.rawValue), \(bind: proof), 'pending', 1,
                        \(bind: Millis.of(retryAt)), \(bind: error), \(bind: Millis.of(now)), \(bind: Millis.of(now)))
                ON CONFLICT (proof_id) DO NOTHING
                """).run()
            return try await Self.pendingProof(db, proofId)!
        }
    }

    /// Claims up to `limit` proofs due at `now`, leasing each for `lease` seconds so that another replica does not
    /// take the same one meanwhile.
    public func claimDueProofs(now: Date = Date(), limit: Int = 20, lease: TimeInterval = 60) async throws -> [PendingProof] {
        try await transaction { db in
            let due = try await db.raw("""
                SELECT proof_id FROM pending_proofs WHERE state = 'pending' AND next_attempt_at <= \(bind: Millis.of(now))
                ORDER BY next_attempt_at LIMIT \(bind: Int64(limit))
                """).all().map { try $0.decode(column: "proof_id", as: String.self) }
            var claimed: [PendingProof] = []
            for id in due {
                let taken = try await db.raw("""
                    UPDATE pending_proofs SET next_attempt_at = \(bind: Millis.of(now.addingTimeInterval(lease))), updated_at = \(bind: Millis.of(now))
                    WHERE proof_id = \(bind: id) AND state = 'pending' AND next_attempt_at <= \(bind: Millis.of(now)) RETURNING proof_id
                    """).first()
                if taken != nil, let proof = try await Self.pendingProof(db, id) { claimed.append(proof) }
            }
            return claimed
        }
    }

    /// Records how a retry went: `granted` or `rejected` end it; `pending` schedules the next attempt at `retryAt`.
    public func updateProof(_ proofId: String, state: PendingProof.State, error: String?, retryAt: Date? = nil, now: Date = Date()) async throws {
        try await transaction { db in
            try await db.raw("""
                UPDATE pending_proofs SET state = \(bind: state.rawValue), attempts = attempts + 1, last_error = \(bind: error),
                    next_attempt_at = \(bind: Millis.of(retryAt ?? now)), updated_at = \(bind: Millis.of(now))
                WHERE proof_id = \(bind: proofId)
                """).run()
        }
    }

    /// Proofs in `state`, oldest first.
    public func pendingProofs(state: PendingProof.State = .pending, limit: Int = 500) async throws -> [PendingProof] {
        try await transaction { db in
            try await db.raw("""
                SELECT proof_id FROM pending_proofs WHERE state = \(bind: state.rawValue) ORDER BY created_at LIMIT \(bind: Int64(limit))
                """).all().map { try $0.decode(column: "proof_id", as: String.self) }
                .asyncCompactMap { try await Self.pendingProof(db, $0) }
        }
    }

    static func pendingProof(_ db: any SQLDatabase, _ id: String) async throws -> PendingProof? {
        guard let row = try await db.raw("""
            SELECT proof_id, account_id, order_id, kind, proof, state, attempts, next_attempt_at, last_error FROM pending_proofs WHERE proof_id = \(bind: id)
            """).first() else { return nil }
        return PendingProof(
            proofId: try row.decode(column: "proof_id", as: String.self), accountId: try row.decode(column: "account_id", as: String.self),
            orderId: try row.decode(column: "order_id", as: String?.self),
            kind: PendingProof.Kind(rawValue: try row.decode(column: "kind", as: String.self)) ?? .receipt,
            proof: try row.decode(column: "proof", as: String.self),
            state: PendingProof.State(rawValue: try row.decode(column: "state", as: String.self)) ?? .pending,
            attempts: Int(try row.decode(column: "attempts", as: Int64.self)),
            nextAttemptAt: Millis.date(try row.decode(column: "next_attempt_at", as: Int64.self)),
            lastError: try row.decode(column: "last_error", as: String?.self))
    }
}

extension Array {
    func asyncCompactMap<T>(_ transform: (Element) async throws -> T?) async rethrows -> [T] {
        var result: [T] = []
        for element in self { if let value = try await transform(element) { result.append(value) } }
        return result
    }
}
