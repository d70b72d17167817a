import AppStoreFormats
import Foundation
import PurchaseAPI


extension Ledger {
    /// Takes the next event due for delivery for one sender, held until `now + lease` so that no other sender (another
    /// replica, or this one's next pass) sends it meanwhile; a sender that died lets it go when the lease ends. The
    /// lease's end is the claim's token: only its holder settles it. Due means due by `dueBy` (`now` unless given).
    /// In the order events fell due, by the wall clock: a new one when it was written, a retry when its backoff ended, a
    /// replay when asked. A retry is not held back by newer events, nor a new event by retries that fell due after it.
    public func claimWebhookEvent(now: Date = Date(), dueBy: Date? = nil, lease: TimeInterval) async throws -> (event: StoredWebhookEvent, claim: Date)? {
        let until = Millis.date(Millis.of(now.addingTimeInterval(lease)))
        return try await write { session in
            guard let id = try await session.sql.first(Self.dueWebhookEventQuery, [.of(now), .of(dueBy ?? now)])?.text(0) else { return nil }
            let row = try await session.sql.first("""
                UPDATE webhook_events SET claimed_until = $2
                WHERE event_id = $1 AND state = 'pending' AND (claimed_until IS NULL OR claimed_until < $3)
                RETURNING \(Self.webhookColumns)
                """, [.text(id), .of(until), .of(now)])
            return try row.map { (try Self.decodeWebhook($0), until) }
        }
    }

    /// Ends the claim `claim` on an event: delivered; or failed with `error`, retried at `retryAt` (nil: out of
    /// attempts). A claim that lapsed and was taken by another sender settles nothing.
    public func settleWebhookEvent(_ eventId: String, claim: Date, delivered: Bool, error: String?, retryAt: Date?, now: Date = Date()) async throws {
        try await write { session in
            if delivered {
                try await session.sql.execute("""
                    UPDATE webhook_events SET state = 'delivered', attempts = attempts + 1, delivered_at = $2, claimed_until = NULL, last_error = NULL
                    WHERE event_id = $1 AND state = 'pending' AND claimed_until = $3
                    """, [.text(eventId), .of(now), .of(claim)])
            } else {
                try await session.sql.execute("""
                    UPDATE webhook_events SET state = $2, attempts = attempts + 1, next_attempt_at = $3, claimed_until = NULL, last_error = $4
                    WHERE event_id = $1 AND state = 'pending' AND claimed_until = $5
                    """, [.text(eventId), .text(retryAt == nil ? "failed" : "pending"), .of(retryAt ?? now), .of(error.map { String($0.prefix(500)) }),
                          .of(claim)])
            }
        }
    }

    /// In the order of `webhook_events_due_order`: the first row it finds is the answer, however long the backlog.
    static let dueWebhookEventQuery = """
        SELECT event_id FROM webhook_events WHERE state = 'pending' AND next_attempt_at <= $2 AND (claimed_until IS NULL OR claimed_until < $1)
        ORDER BY next_attempt_at, created_at, event_id LIMIT 1
        """

    /// Through `webhook_events_delivered`: the old delivered events only, not every event ever delivered; `$2` at a time.
    /// The conditions are repeated outside the subquery: PostgreSQL re-tests only those on a row that changed while the
    /// delete waited for it, and an event an operator replayed meanwhile is pending again, not to be forgotten.
    static let pruneWebhookEventsQuery = """
        DELETE FROM webhook_events WHERE state = 'delivered' AND delivered_at < $1 AND event_id IN (
            SELECT event_id FROM webhook_events WHERE state = 'delivered' AND delivered_at < $1 LIMIT $2) RETURNING event_id
        """

    /// Forgets delivered events older than `date` (the outbox is not an archive), `batch` per write: a day of events
    /// after a server was stopped for one is many small writes between which purchases commit, not one long one that
    /// holds them all up. Returns how many.
    @discardableResult
    public func pruneWebhookEvents(deliveredBefore date: Date, batch: Int = 1_000) async throws -> Int {
        var pruned = 0
        while true {
            let deleted = try await write { session in
                try await session.sql.rows(Self.pruneWebhookEventsQuery, [.of(date), .int(Int64(max(1, batch)))]).count
            }
            pruned += deleted
            if deleted < max(1, batch) { return pruned }
            // A server stopping does not wait for the rest of a long prune: the next pass takes it up.
            try Task.checkCancellation()
        }
    }

    /// The outbox, newest first; with `state`, only those.
    public func webhookEvents(state: StoredWebhookEvent.State? = nil, limit: Int = 200) async throws -> [StoredWebhookEvent] {
        try await read { session in
            let filter = state == nil ? "" : "WHERE state = $2"
            return try await session.sql.rows("""
                SELECT \(Self.webhookColumns) FROM webhook_events \(filter) ORDER BY created_at DESC, event_id DESC LIMIT $1
                """, [.int(Int64(limit))] + (state.map { [.text($0.rawValue)] } ?? [])).map(Self.decodeWebhook)
        }
    }

    /// Sends an event again from its first attempt (an operator's replay, audited). False when no event has the id.
    ///
    /// An event a sender holds right now stays out of other senders' reach until that claim lapses (releasing it would
    /// have two senders post it at once), but the claim's token moves on by a millisecond: the holder's settle then
    /// changes nothing — its attempt began before the replay, so neither its success nor its count of attempts may
    /// stand for the replay's — and the event is sent again, from attempt 0, once the claim lapses.
    public func replayWebhookEvent(_ eventId: String, actor: String, now: Date = Date()) async throws -> Bool {
        try await write { session in
            let replayed = try await session.sql.first("""
                UPDATE webhook_events SET state = 'pending', attempts = 0, next_attempt_at = $3,
                    claimed_until = CASE WHEN state = 'pending' AND claimed_until >= $2 THEN claimed_until + 1 ELSE NULL END
                WHERE event_id = $1 RETURNING event_id
                """, [.text(eventId), .of(Date()), .int(Millis.now)]) != nil
            if replayed { try await session.apply(.audit(actor: actor, action: .webhookReplay, subject: eventId, detail: "", at: now)) }
            return replayed
        }
    }

    /// Queues a `TEST` event; returns it.
    public func emitTestWebhook(actor: String, now: Date = Date()) async throws -> WebhookEvent {
        guard recordsWebhookEvents else { throw LedgerError(.invalidInput, "webhooks are off: no receiver URL is configured") }
        let event = WebhookEvent(id: "TEST.\(UUID().lowercasedString)", type: .test, accountId: nil, occurredAt: now)
        try await write { session in
            try await session.apply(.emitEvent(event))
            try await session.apply(.audit(actor: actor, action: .webhookTest, subject: event.id, detail: "", at: now))
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
