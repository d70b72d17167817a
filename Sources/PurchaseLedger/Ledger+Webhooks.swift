import Foundation

/// An outbox row: an event for the app's backend and where its delivery stands.
public struct StoredWebhookEvent: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, CaseIterable {
        /// Waiting for (another) delivery attempt.
        case pending
        case delivered
        /// Out of attempts: waits for an operator's replay.
        case failed
    }

    public var eventId: String
    public var type: String
    public var accountId: String?
    /// The JSON the receiver gets.
    public var body: String
    public var state: State
    public var attempts: Int
    public var nextAttemptAt: Date
    public var lastError: String?
    public var createdAt: Date
    public var deliveredAt: Date?
}

extension Ledger {
    /// How long one sender holds a claimed event before another may take it (a sender that died mid-delivery).
    public static let webhookClaimLease: TimeInterval = 60

    /// Takes up to `limit` events due for delivery, oldest first, for one sender: each is held for
    /// ``webhookClaimLease`` so that replicas do not send it at the same time.
    public func claimWebhookEvents(now: Date = Date(), limit: Int = 20) async throws -> [StoredWebhookEvent] {
        try await write { session in
            let due = try session.sql.rows("""
                SELECT event_id FROM webhook_events WHERE state = 'pending' AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until < $1)
                ORDER BY created_at, event_id LIMIT $2
                """, [.of(now), .int(Int64(limit))]).map { try $0.text(0) }
            var claimed: [StoredWebhookEvent] = []
            for id in due {
                let row = try session.sql.first("""
                    UPDATE webhook_events SET claimed_until = $2
                    WHERE event_id = $1 AND state = 'pending' AND (claimed_until IS NULL OR claimed_until < $3)
                    RETURNING \(Self.webhookColumns)
                    """, [.text(id), .of(now.addingTimeInterval(Self.webhookClaimLease)), .of(now)])
                if let row { claimed.append(try Self.decodeWebhook(row)) }
            }
            return claimed
        }
    }

    /// Ends a delivery attempt: delivered; or failed with `error`, retried at `retryAt` (nil: out of attempts).
    public func settleWebhookEvent(_ eventId: String, delivered: Bool, error: String?, retryAt: Date?, now: Date = Date()) async throws {
        try await write { session in
            if delivered {
                try session.sql.execute("""
                    UPDATE webhook_events SET state = 'delivered', attempts = attempts + 1, delivered_at = $2, claimed_until = NULL, last_error = NULL
                    WHERE event_id = $1 AND state = 'pending'
                    """, [.text(eventId), .of(now)])
            } else {
                try session.sql.execute("""
                    UPDATE webhook_events SET state = $2, attempts = attempts + 1, next_attempt_at = $3, claimed_until = NULL, last_error = $4
                    WHERE event_id = $1 AND state = 'pending'
                    """, [.text(eventId), .text(retryAt == nil ? "failed" : "pending"), .of(retryAt ?? now), .of(error.map { String($0.prefix(500)) })])
            }
        }
    }

    /// The outbox, newest first; with `state`, only those.
    public func webhookEvents(state: StoredWebhookEvent.State? = nil, limit: Int = 200) async throws -> [StoredWebhookEvent] {
        try await read { session in
            let filter = state == nil ? "" : "WHERE state = $2"
            return try session.sql.rows("""
                SELECT \(Self.webhookColumns) FROM webhook_events \(filter) ORDER BY created_at DESC, event_id DESC LIMIT $1
                """, [.int(Int64(limit))] + (state.map { [.text($0.rawValue)] } ?? [])).map(Self.decodeWebhook)
        }
    }

    /// Sends an event again from its first attempt (an operator's replay, audited). False when no event has the id.
    public func replayWebhookEvent(_ eventId: String, actor: String, now: Date = Date()) async throws -> Bool {
        try await write { session in
            let replayed = try session.sql.first("""
                UPDATE webhook_events SET state = 'pending', attempts = 0, next_attempt_at = $2, claimed_until = NULL WHERE event_id = $1 RETURNING event_id
                """, [.text(eventId), .of(now)]) != nil
            if replayed { try session.apply(.audit(actor: actor, action: "webhook-replay", subject: eventId, detail: "", at: now)) }
            return replayed
        }
    }

    /// Queues a `TEST` event; returns it.
    public func emitTestWebhook(actor: String, now: Date = Date()) async throws -> WebhookEvent {
        let event = WebhookEvent(id: "TEST.\(UUID().uuidString.lowercased())", type: .test, accountId: nil, occurredAt: now)
        try await write { session in
            try session.apply(.emitEvent(event))
            try session.apply(.audit(actor: actor, action: "webhook-test", subject: event.id, detail: "", at: now))
        }
        return event
    }

    static let webhookColumns = "event_id, type, account_id, body, state, attempts, next_attempt_at, last_error, created_at, delivered_at"

    static func decodeWebhook(_ row: SQLRow) throws -> StoredWebhookEvent {
        StoredWebhookEvent(eventId: try row.text(0), type: try row.text(1), accountId: row.optionalText(2), body: try row.text(3),
                           state: StoredWebhookEvent.State(rawValue: try row.text(4)) ?? .pending, attempts: Int(try row.int(5)),
                           nextAttemptAt: Millis.date(try row.int(6)), lastError: row.optionalText(7), createdAt: Millis.date(try row.int(8)),
                           deliveredAt: row.optionalInt(9).map(Millis.date))
    }
}
