import AppStoreFormats
import Foundation
import PurchaseAPI

/// What an operator sees and does about orders that did not end well. Every action is audited in the same
/// transaction as the action itself.
extension Ledger {
    /// Which orders to list.
    public enum OrderFilter: String, Sendable, CaseIterable {
        case created, granted, settled
        /// Open orders with evidence of payment: a proof waiting for Apple, or a stored transaction carrying the
        /// order's token that is not bound to it.
        case paidUnfulfilled = "paid-unfulfilled"
        /// Open orders past their expiry with no transaction seen and no word from the app that nothing was charged:
        /// paid and lost on the way, or left by an app that could not say (killed during the payment sheet, offline).
        case stuck
        /// Open orders the app said ended with nothing charged (``Ledger/abandonOrder(orderId:accountId:reason:now:)``),
        /// with no payment seen since.
        case abandoned
    }

    /// An order `o` open with evidence of payment (``OrderFilter/paidUnfulfilled``), as SQL.
    static let paidUnfulfilled = """
        o.state = 'created' AND (
            EXISTS (SELECT 1 FROM pending_proofs p WHERE p.order_id = o.order_id AND p.state = 'pending')
            OR EXISTS (SELECT 1 FROM purchases t WHERE t.app_account_token = o.app_account_token))
        """

    /// Orders matching `filter`, newest first.
    public func orders(_ filter: OrderFilter, now: Date = Date(), limit: Int = 200) async throws -> [Order] {
        try await read { session in
            switch filter {
            case .created, .granted, .settled:
                return try await session.orders(where: "o.state = $1", [.text(filter.rawValue)], limit: limit)
            case .paidUnfulfilled:
                return try await session.orders(where: Self.paidUnfulfilled, [], limit: limit)
            case .stuck:
                return try await session.orders(where: """
                    o.state = 'created' AND o.expires_at < $1 AND o.abandoned_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM purchases t WHERE t.app_account_token = o.app_account_token)
                    """, [.of(now)], limit: limit)
            case .abandoned:
                return try await session.orders(where: """
                    o.state = 'created' AND o.abandoned_at IS NOT NULL AND NOT (\(Self.paidUnfulfilled))
                    """, [], limit: limit)
            }
        }
    }

    /// Records the app's word that `orderId`'s payment ended with nothing charged (`reason`: `cancelled`, `failed`,
    /// `notStarted`), so that the `stuck` list leaves it out. Only for the order's own account (another's is answered
    /// as not found), only while it is open with no payment seen (a transaction or a held proof carrying it wins over
    /// the word), and once. Nothing else reads it: a payment that arrives later binds and grants as ever.
    /// Returns the order and whether the report was recorded.
    public func abandonOrder(orderId: String, accountId: String, reason: String, now: Date = Date()) async throws -> (order: Order, recorded: Bool) {
        guard OrderAbandonRequest.Reason(rawValue: reason) != nil else {
            throw LedgerError(.invalidInput, "the reason is one of \(OrderAbandonRequest.Reason.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return try await write { session in
            guard let order = try await session.order(id: orderId), order.accountId == accountId else {
                throw LedgerError(.orderNotFound, "no order \(orderId) of this account")
            }
            let recorded = try await !session.sql.rows("""
                UPDATE orders SET abandoned_at = $1, abandon_reason = $2, updated_at = $1
                WHERE order_id = $3 AND state = 'created' AND abandoned_at IS NULL
                AND order_id IN (SELECT o.order_id FROM orders o WHERE o.order_id = $3 AND NOT (\(Self.paidUnfulfilled)))
                RETURNING order_id
                """, [.of(now), .text(reason), .text(orderId)]).isEmpty
            return (try await session.order(id: orderId) ?? order, recorded)
        }
    }

    /// Settles an open order by hand: with a verified `transaction`, binds and grants it to the order's account (once,
    /// as any submission); without one, closes the order as `settled` with `note` (e.g. refunded outside the store).
    /// The settle and its audit entry are one transaction.
    public func settle(orderId: String, transaction: JWSTransactionDecodedPayload?, note: String, actor: String, now: Date = Date()) async throws -> Order {
        guard note.utf8.count <= 2000 else { throw LedgerError(.invalidInput, "the note is over 2000 bytes") }
        let record = try transaction.map { try PurchaseRecord($0) }
        if let record, catalog.rule(for: record.productId) == nil { throw LedgerError(.unknownProduct, "no product \(record.productId) is sold here") }
        let catalog = catalog
        return try await write { session in
            guard let order = try await session.order(id: orderId) else { throw LedgerError(.orderNotFound, "no order \(orderId)") }
            if let record {
                try await session.lockSeries(record.originalTransactionId)
                let facts = try await session.facts(for: record, namedOrderId: orderId, catalog: catalog)
                let decision = SettleRules.settle(order, with: record, note: note, actor: actor, facts: facts, catalog: catalog, now: now)
                if case .rejected(let refusal) = decision.outcome { throw refusal }
                try await session.apply(decision.effects)
            } else {
                try await session.apply(SettleRules.settle(order, note: note, actor: actor, now: now))
            }
            return try await session.order(id: orderId) ?? order
        }
    }

    /// Records an operator's or the reconciliation job's action.
    public func audit(actor: String, action: AuditAction, subject: String, detail: String, now: Date = Date()) async throws {
        try await write { try await $0.apply(.audit(actor: actor, action: action, subject: subject, detail: detail, at: now)) }
    }

    /// One audit entry.
    public typealias AuditEntry = PurchaseAPI.AuditEntry

    /// The audit log, newest first.
    public func auditLog(limit: Int = 200) async throws -> [AuditEntry] {
        try await read { try await $0.auditEntries(where: "1 = 1", [], limit: limit) }
    }

    /// Auto-renewable series whose latest known expiry fell between `since` and `before` with no newer period:
    /// candidates for asking Apple whether a renewal notification was missed. A series Apple already called over since
    /// that expiry (`EXPIRED` or `REVOKED` signed at or after it) is not one: asking about it on every pass would spend
    /// the Server API's rate limit on answers already known.
    ///
    /// Series not asked about since their latest expiry come first (newest expiry first), then those asked longest ago;
    /// one whose next ask is after `dueBy` is left out (``recordSubscriptionCheck(_:at:forgettingBefore:)`` notes the
    /// asks). Without that, a pass limited to the newest stale series would ask about the same ones every time (a
    /// series in billing retry stays stale all day) while older ones waited behind them until they left the window.
    public func staleSubscriptions(since: Date, before: Date, limit: Int = 100, dueBy: Date = .distantFuture) async throws -> [StaleSeries] {
        try await read { session in
            try await session.sql.rows(Self.staleSeriesQuery, [.text(ProductType.autoRenewableSubscription.rawValue), .of(before), .of(since), .int(Int64(limit)),
                      .int(Int64(SubscriptionStatus.expired.rawValue)), .int(Int64(SubscriptionStatus.revoked.rawValue)), .of(dueBy)])
                .map { StaleSeries(originalTransactionId: try $0.text(0), accountId: try $0.text(1), expiresDate: Millis.date(try $0.int(2))) }
        }
    }

    /// The series ``staleSubscriptions(since:before:limit:dueBy:)`` reads; `$1` the product type, `$2`/`$3` the window.
    static let staleSeriesQuery = """
        SELECT p.original_transaction_id, p.account_id, p.latest FROM (
            SELECT original_transaction_id, MIN(account_id) AS account_id, MAX(expires_date) AS latest FROM purchases
            WHERE product_type = $1 AND account_id IS NOT NULL AND revocation_date IS NULL
            -- Only series with a period ending in the window (the latest one does): an index step, not every purchase.
            AND original_transaction_id IN (SELECT original_transaction_id FROM purchases WHERE expires_date >= $3 AND expires_date < $2)
            GROUP BY original_transaction_id HAVING MAX(expires_date) < $2 AND MAX(expires_date) >= $3
        ) p LEFT JOIN subscriptions s ON s.original_transaction_id = p.original_transaction_id
        LEFT JOIN subscription_checks c ON c.original_transaction_id = p.original_transaction_id AND c.expires_date >= p.latest
        WHERE (s.original_transaction_id IS NULL OR COALESCE(s.status, 0) NOT IN ($5, $6) OR s.signed_date < p.latest)
        AND (c.original_transaction_id IS NULL OR c.next_check_at <= $7)
        ORDER BY COALESCE(c.checked_at, 0), p.latest DESC, p.original_transaction_id LIMIT $4
        """

    /// Notes that Apple answered about `series` at `at`, and when to ask again: 1 minute after the first answer about
    /// its latest expiry, then 2, 4, 8, 16, and every 30 minutes (a renewal that billing retry recovers is found soon; a
    /// series that stays in retry all day costs ~50 asks, not one a pass). Forgets asks from before `forgettingBefore`
    /// (their series have left the window ``staleSubscriptions(since:before:limit:dueBy:)`` looks in).
    public func recordSubscriptionCheck(_ series: StaleSeries, at: Date, forgettingBefore: Date) async throws {
        try await write { session in
            try await session.sql.execute("DELETE FROM subscription_checks WHERE checked_at < $1", [.of(forgettingBefore)])
            let known = try await session.sql.first("SELECT expires_date, asks, checked_at FROM subscription_checks WHERE original_transaction_id = $1",
                                                    [.text(series.originalTransactionId)])
            let expires = Millis.of(series.expiresDate)
            // Another replica's later ask stands.
            if let known, try known.int(0) == expires, try known.int(2) > Millis.of(at) { return }
            let asks = try known.map { try $0.int(0) == expires ? $0.int(1) + 1 : 1 } ?? 1
            try await session.sql.execute("""
                INSERT INTO subscription_checks (original_transaction_id, expires_date, asks, checked_at, next_check_at) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (original_transaction_id) DO UPDATE SET expires_date = excluded.expires_date, asks = excluded.asks,
                    checked_at = excluded.checked_at, next_check_at = excluded.next_check_at
                """, [.text(series.originalTransactionId), .int(expires), .int(asks), .of(at),
                      .of(at.addingTimeInterval(Self.recheckDelay(afterAsks: asks)))])
        }
    }

    /// Seconds before asking again about a series Apple answered about `asks` times since its latest expiry.
    public static func recheckDelay(afterAsks asks: Int64) -> TimeInterval {
        min(1_800, 60 * pow(2, Double(min(max(asks, 1), 16) - 1)))
    }

    /// ``openOrders(createdBefore:after:limit:)``'s read: through `orders_state_created`, newest first, so the
    /// abandoned carts of years are not read on every pass.
    static let openOrdersQuery = """
        SELECT \(LedgerSession.orderColumns) FROM orders WHERE state = 'created' AND created_at < $1 AND created_at >= $2
        ORDER BY created_at DESC LIMIT $3
        """

    /// Open orders created before `before`: payments that may have happened without reaching the server.
    /// Newest first, and only those created since `after`: abandoned carts pile up, and must not crowd out the orders
    /// a recent payment may still be looking for.
    public func openOrders(createdBefore before: Date, after: Date = .distantPast, limit: Int = 100) async throws -> [Order] {
        try await read { session in
            try await session.sql.rows(Self.openOrdersQuery, [.of(before), .of(after), .int(Int64(max(1, min(limit, 10_000))))]).map(LedgerSession.decodeOrder)
        }
    }

    /// One transaction id bound to `accountId`, if any: a handle for asking Apple about the customer's history.
    public func anyTransactionId(accountId: String) async throws -> String? {
        try await read { session in
            try await session.sql.first("SELECT transaction_id FROM purchases WHERE account_id = $1 ORDER BY purchase_date DESC LIMIT 1",
                                        [.text(accountId)])?.optionalText(0)
        }
    }

    /// The account the latest bound period of a subscription series belongs to, if any: the purchaser's (a family
    /// member's copy is theirs to use, not to be offered anything for).
    public func seriesAccount(originalTransactionId: String) async throws -> String? {
        try await read { session in
            try await session.sql.first("""
                SELECT account_id FROM purchases WHERE original_transaction_id = $1 AND account_id IS NOT NULL
                AND (ownership IS NULL OR ownership <> 'FAMILY_SHARED')
                ORDER BY purchase_date DESC, transaction_id DESC LIMIT 1
                """, [.text(originalTransactionId)])?.optionalText(0)
        }
    }

    /// Which of `uuids` the ledger has stored already (a notification is stored once, by its `notificationUUID`).
    public func knownNotifications(_ uuids: [String]) async throws -> Set<String> {
        guard !uuids.isEmpty else { return [] }
        let chunk = Array(uuids.prefix(100))
        let placeholders = chunk.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
        let known = try await read { session in
            try await session.sql.rows("SELECT notification_uuid FROM notifications WHERE notification_uuid IN (\(placeholders))", chunk.map { .text($0) })
                .map { try $0.text(0) }
        }
        return Set(known).union(try await knownNotifications(Array(uuids.dropFirst(100))))
    }

    /// Where a job that reads Apple's records in time order stopped (e.g. the notification history); nil before its
    /// first pass.
    public func cursor(_ name: String) async throws -> Date? {
        try await read { session in
            try await session.sql.first("SELECT value FROM reconciler_cursors WHERE name = $1", [.text(name)])?.optionalInt(0).map(Millis.date)
        }
    }

    /// Moves the cursor `name` to `date`, never back: two replicas finishing passes out of order keep the later one.
    public func advanceCursor(_ name: String, to date: Date) async throws {
        try await write { session in
            try await session.sql.execute("""
                INSERT INTO reconciler_cursors (name, value) VALUES ($1, $2)
                ON CONFLICT (name) DO UPDATE SET value = excluded.value WHERE reconciler_cursors.value < excluded.value
                """, [.text(name), .of(date)])
        }
    }
}

/// A subscription series whose latest known period ended without news (``Ledger/staleSubscriptions(since:before:limit:dueBy:)``).
public struct StaleSeries: Sendable, Hashable {
    public var originalTransactionId: String
    /// The account the series is bound to (the first, when its periods were bound to several).
    public var accountId: String
    /// The latest known period's expiry.
    public var expiresDate: Date

    public init(originalTransactionId: String, accountId: String, expiresDate: Date) {
        self.originalTransactionId = originalTransactionId
        self.accountId = accountId
        self.expiresDate = expiresDate
    }
}

// MARK: What the ledger knows, for the operator

/// A subscription series as the ledger holds it: its periods and its latest status.
public struct SeriesRecord: Sendable, Hashable {
    public var originalTransactionId: String
    public var status: SubscriptionRecord?
    /// Every transaction of the series, oldest period first.
    public var transactions: [PurchaseRecord]
    public var notifications: [LoggedNotification]
}

extension Ledger {
    /// Stored transactions, newest first; `unboundOnly` lists those only notifications told of, which no account
    /// has claimed yet.
    public func transactions(unboundOnly: Bool = false, limit: Int = 200) async throws -> [PurchaseRecord] {
        try await read { try await $0.purchases(where: unboundOnly ? "account_id IS NULL" : "1 = 1", [], limit: limit) }
    }

    /// The transaction with `transactionId`, bound or not.
    public func transaction(_ transactionId: String) async throws -> PurchaseRecord? {
        try await read { try await $0.purchase(transactionId) }
    }

    /// The stored transactions among `transactionIds`, by id: a receipt's purchases read in a few statements, not one each.
    public func transactions(ids transactionIds: [String]) async throws -> [String: PurchaseRecord] {
        var found: [String: PurchaseRecord] = [:]
        for start in stride(from: 0, to: transactionIds.count, by: 100) {
            let chunk = Array(transactionIds[start..<min(start + 100, transactionIds.count)])
            let placeholders = chunk.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
            for record in try await read({ try await $0.purchases(where: "transaction_id IN (\(placeholders))", chunk.map { .text($0) }, limit: 100) }) {
                found[record.transactionId] = record
            }
        }
        return found
    }

    /// A subscription series by its `originalTransactionId`, or nil when the ledger knows nothing of it.
    public func series(originalTransactionId: String) async throws -> SeriesRecord? {
        try await read { session in
            let transactions = try await session.sql.rows("""
                SELECT \(LedgerSession.purchaseColumns) FROM purchases WHERE original_transaction_id = $1 ORDER BY purchase_date, transaction_id
                """, [.text(originalTransactionId)]).map(LedgerSession.decodePurchase)
            let status = try await session.series(originalTransactionId)
            guard !transactions.isEmpty || status != nil else { return nil }
            let notifications = try await session.notifications(where: "original_transaction_id = $1", [.text(originalTransactionId)], limit: 500,
                                                                withPayload: false)
            return SeriesRecord(originalTransactionId: originalTransactionId, status: status, transactions: transactions, notifications: notifications)
        }
    }

    /// The notifications log, newest first; with `originalTransactionId`, one series' only.
    public func notifications(originalTransactionId: String? = nil, limit: Int = 200, withPayload: Bool = false) async throws -> [LoggedNotification] {
        try await read { session in
            if let originalTransactionId {
                return try await session.notifications(where: "original_transaction_id = $1", [.text(originalTransactionId)], limit: limit, withPayload: withPayload)
            }
            return try await session.notifications(where: "1 = 1", [], limit: limit, withPayload: withPayload)
        }
    }

    /// Everything the ledger knows of an account, oldest first: orders, transactions and revocations, balance
    /// movements, notifications about its series, device reports, refused claims and audit entries.
    public func timeline(accountId: String, limit: Int = 1_000) async throws -> [TimelineEntry] {
        try await read { session in
            var entries: [TimelineEntry] = []
            let orders = try await session.orders(where: "o.account_id = $1", [.text(accountId)], limit: limit)
            for order in orders {
                entries.append(.init(at: order.createdAt, kind: .order, subject: order.orderId,
                                     detail: "\(order.productId): \(order.state.rawValue)\(order.transactionId.map { " by \($0)" } ?? "")"))
            }
            let purchases = try await session.purchases(accountId: accountId)
            for purchase in purchases {
                entries.append(.init(at: purchase.purchaseDate, kind: .transaction, subject: purchase.transactionId,
                                     detail: "\(purchase.productId) (\(purchase.productType.rawValue))\(purchase.orderId.map { ", order \($0)" } ?? "")"
                                         + (purchase.expiresDate.map { ", expires \(Self.iso($0))" } ?? "")))
                if let revoked = purchase.revocationDate {
                    entries.append(.init(at: revoked, kind: .revocation, subject: purchase.transactionId,
                                         detail: "revoked (reason \(purchase.revocationReason?.rawValue ?? -1))"))
                }
            }
            for entry in try await session.balanceEntries(accountId: accountId, limit: limit) {
                entries.append(.init(at: entry.at, kind: .balance, subject: entry.key, detail: "\(entry.delta > 0 ? "+" : "")\(entry.delta) \(entry.currency)"))
            }
            for original in Set(purchases.map(\.originalTransactionId)) {
                for notification in try await session.notifications(where: "original_transaction_id = $1", [.text(original)], limit: limit, withPayload: false) {
                    entries.append(.init(at: notification.signedDate, kind: .notification, subject: notification.notificationUUID,
                                         detail: notification.notificationType + (notification.subtype.map { "/\($0)" } ?? "")
                                             + (notification.transactionId.map { " for \($0)" } ?? "")))
                }
            }
            for report in try await session.deviceReports(where: "account_id = $1", [.text(accountId)]) {
                entries.append(.init(at: report.reportedAt, kind: .deviceReport, subject: report.transactionId,
                                     detail: report.signals.isEmpty ? "clean" : report.signals.joined(separator: ", ")))
            }
            for row in try await session.sql.rows("SELECT transaction_id, claimed_by, owner, first_seen, attempts FROM conflicts WHERE claimed_by = $1 OR owner = $1",
                                                  [.text(accountId)]) {
                entries.append(.init(at: Millis.date(try row.int(3)), kind: .conflict, subject: try row.text(0),
                                     detail: "claimed by \(try row.text(1)), owned by \(try row.text(2)), \(try row.int(4)) attempt(s)"))
            }
            let subjects = [accountId] + orders.map(\.orderId)
            for subject in subjects {
                for audit in try await session.auditEntries(where: "subject = $1", [.text(subject)], limit: limit) {
                    entries.append(.init(at: audit.at, kind: .audit, subject: audit.subject, detail: "\(audit.actor) \(audit.action): \(audit.detail)"))
                }
            }
            return Array(entries.sorted { ($0.at, $0.kind.rawValue, $0.subject) < ($1.at, $1.kind.rawValue, $1.subject) }.suffix(limit))
        }
    }

    static func iso(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
