import Foundation
import PurchaseAPI

/// Each ``LedgerEffect`` as the statements that apply it, written once: a session runs them in a held transaction
/// (``LedgerSession/apply(_:)``) on either store, and PostgreSQL's purchase function is generated from the same steps at
/// migration time (``PostgresFunctions``), so no second copy of an effect's SQL is kept in step by hand.
///
/// A statement reads its effect's binds as `$1`, `$2`…; an integer bind is written `CAST($n AS BIGINT)` wherever it is
/// used, because the function reads every bind out of JSON as text. A statement whose rows decide what follows ends
/// with `RETURNING 1` (or is a `SELECT`).
enum EffectStep: Sendable {
    /// What a statement's rows decide.
    enum Then: Sendable {
        case next
        /// No row: the facts the rules decided on changed (another replica won a race): ``LedgerRace``.
        case raceUnlessRow
        /// No row: the effect is done.
        case doneUnlessRow
        /// A row: the effect is done.
        case doneIfRow
    }

    /// A statement over some of the effect's binds.
    case run(EffectStatement)
    /// The lock of the series the text bind `n` names (none when it is NULL), held to the end of the transaction:
    /// PostgreSQL only (SQLite has one writer).
    case lockSeries(bind: Int)
    /// Decided in Swift over the rows a statement returns (the grant events of a series' periods claimed): a session
    /// runs it (``LedgerSession/claimSeriesInSwift(_:)``); PostgreSQL's function hands the whole operation back, to be
    /// run again in a held transaction (``LedgerHandBack``).
    case inSwift

    /// `postgresOnly`: a guard only PostgreSQL's concurrent writers need.
    static func statement(_ sql: String, then: Then = .next, postgresOnly: Bool = false) -> EffectStep {
        .run(EffectStatement(sql, then: then, postgresOnly: postgresOnly))
    }
}

/// A statement as written over its effect's binds (`$n`, the n-th), numbered again over the binds it reads: both stores
/// refuse a bind the statement does not read (SQLite past its last placeholder, PostgreSQL any it cannot type).
struct EffectStatement: Sendable {
    /// The statement, its placeholders `$1`… naming ``binds`` in order.
    let sql: String
    /// The effect's bind numbers (from 1) the statement reads, in the order of its placeholders.
    let binds: [Int]
    let then: EffectStep.Then
    let postgresOnly: Bool

    init(_ written: String, then: EffectStep.Then, postgresOnly: Bool) {
        var used = Set<Int>()
        _ = Self.placeholders(in: written) { used.insert($0); return "" }
        binds = used.sorted()
        let renumbered = Dictionary(uniqueKeysWithValues: binds.enumerated().map { ($1, $0 + 1) })
        sql = Self.placeholders(in: written) { "$\(renumbered[$0]!)" }
        self.then = then
        self.postgresOnly = postgresOnly
    }

    /// `sql` with each placeholder `$n` replaced by `replace(n)`.
    static func placeholders(in sql: String, _ replace: (Int) -> String) -> String {
        var out = "", digits = "", inPlaceholder = false
        func flush() {
            if inPlaceholder { out += Int(digits).map(replace) ?? "$" + digits }
            inPlaceholder = false
            digits = ""
        }
        for character in sql {
            if inPlaceholder, character.isASCII, character.isNumber {
                digits.append(character)
                continue
            }
            flush()
            if character == "$" { inPlaceholder = true } else { out.append(character) }
        }
        flush()
        return out
    }
}

/// The name of an effect's statements, and the first element of its JSON for PostgreSQL's function.
enum EffectOp: String, CaseIterable, Sendable {
    // In the order a purchase's effects most often come: PostgreSQL's function tries its branches in this order.
    case requireFacts, insertPurchase, fulfilOrder, moveBalance, emitEvent, audit, claimPurchase, refreshPurchase, linkOrder, settleOrder
    case debitBalance, recordConflict, updateSeriesStatus, updateSeriesPeriod, recordDeviceReport, claimSeries

    var steps: [EffectStep] {
        switch self {
        case .insertPurchase: EffectStatements.insertPurchase
        case .claimPurchase: EffectStatements.claimPurchase
        case .refreshPurchase: EffectStatements.refreshPurchase
        case .linkOrder: EffectStatements.linkOrder
        case .fulfilOrder: EffectStatements.fulfilOrder
        case .settleOrder: EffectStatements.settleOrder
        case .debitBalance: EffectStatements.debitBalance
        case .moveBalance: EffectStatements.moveBalance
        case .recordConflict: EffectStatements.recordConflict
        case .updateSeriesStatus: EffectStatements.updateSeriesStatus
        case .updateSeriesPeriod: EffectStatements.updateSeriesPeriod
        case .recordDeviceReport: EffectStatements.recordDeviceReport
        case .audit: EffectStatements.audit
        case .claimSeries: EffectStatements.claimSeries
        case .emitEvent: EffectStatements.emitEvent
        case .requireFacts: EffectStatements.requireFacts
        }
    }
}

enum EffectStatements {
    /// `CAST($n AS BIGINT)`: an integer bind.
    private static func int(_ n: Int) -> String { "CAST($\(n) AS BIGINT)" }

    /// The effect's statements and their binds; nil when it writes nothing here (an event while none are recorded).
    static func binds(_ effect: LedgerEffect, events: Bool) throws -> (op: EffectOp, binds: [SQLValue])? {
        switch effect {
        case .insertPurchase(let record, let source, let at):
            return (.insertPurchase, [
                .text(record.transactionId), .text(record.originalTransactionId), .of(record.accountId), .of(record.orderId),
                .text(record.productId), .text(record.productType.rawValue), .text(record.environment.rawValue), .int(Int64(record.quantity)),
                .of(record.purchaseDate), .of(record.expiresDate), .of(record.revocationDate), .of(record.revocationReason.map { Int64($0.rawValue) }),
                .of(record.isUpgraded), .of(record.ownership?.rawValue), .of(record.appAccountToken?.lowercasedString), .of(record.signedDate),
                .text(source.rawValue), .of(at), .of(record.revocationType?.rawValue), .of(record.revocationPercentage.map(Int64.init)),
                .of(record.appTransactionId)] + LedgerSession.moneyBinds(record))
        case .claimPurchase(let transactionId, let accountId, let orderId):
            return (.claimPurchase, [.text(accountId), .of(orderId), .text(transactionId)])
        case .refreshPurchase(let record):
            return (.refreshPurchase, [
                .of(record.expiresDate), .of(record.revocationDate), .of(record.revocationReason.map { Int64($0.rawValue) }), .of(record.isUpgraded),
                .of(record.signedDate), .text(record.transactionId), .of(record.revocationType?.rawValue),
                .of(record.revocationPercentage.map(Int64.init)), .of(record.appTransactionId)] + LedgerSession.moneyBinds(record))
        case .linkOrder(let transactionId, let orderId):
            return (.linkOrder, [.text(orderId), .text(transactionId)])
        case .fulfilOrder(let orderId, let transactionId, let at):
            return (.fulfilOrder, [.text(transactionId), .of(at), .text(orderId), .text(UUID().lowercasedString)])
        case .settleOrder(let orderId, let note, let at):
            return (.settleOrder, [.text(note), .of(at), .text(orderId)])
        case .moveBalance(let move):
            return (move.requiresCover ? .debitBalance : .moveBalance,
                    [.int(move.delta), .text(move.accountId), .text(move.currency), .text(move.key), .of(move.transactionId), .of(move.at)])
        case .recordConflict(let transactionId, let claimedBy, let owner, let at):
            return (.recordConflict, [.text(transactionId), .text(claimedBy), .text(owner), .of(at)])
        case .updateSeriesStatus(let series):
            return (.updateSeriesStatus, [
                .text(series.originalTransactionId), .of(series.status.map { Int64($0.rawValue) }), .of(series.gracePeriodExpiresDate),
                .of(series.autoRenew.map { $0 ? 1 : 0 }), .of(series.autoRenewProductId), .of(series.signedDate),
                .of(series.expirationIntent.map { Int64($0.rawValue) }), .of(series.isInBillingRetryPeriod.map { $0 ? 1 : 0 }),
                .of(series.priceIncreaseStatus.map { Int64($0.rawValue) })])
        case .updateSeriesPeriod(let original, let productId, let purchaseDate, let expiresDate):
            return (.updateSeriesPeriod, [.text(original), .text(productId), .of(expiresDate), .of(purchaseDate)])
        case .recordDeviceReport(let transactionId, let accountId, let signals, let at):
            return (.recordDeviceReport, [.text(UUID().lowercasedString), .text(transactionId), .text(accountId), .text(signals.joined(separator: ",")), .of(at)])
        case .audit(let actor, let action, let subject, let detail, let at):
            return (.audit, [.text(UUID().lowercasedString), .text(String(actor.prefix(200))), .text(action.rawValue), .text(String(subject.prefix(200))),
                             .text(String(detail.prefix(4000))), .of(at)])
        case .claimSeries(let original, _, let token, _):
            // Its account and time are read in Swift, from the effect (``EffectStep/inSwift``).
            return (.claimSeries, [.text(original), .of(token?.lowercasedString)])
        case .emitEvent(let event):
            guard events else { return nil }
            // Due from now by this replica's wall clock, which the senders' claims read too (the event's own time is the
            // server's clock, which may be a simulated one): a claim takes events in the order they fell due.
            return (.emitEvent, [.text(event.id), .text(event.type.rawValue), .of(event.accountId), .text(try event.body()), .of(event.occurredAt),
                                 .int(Millis.now)])
        case .requireFacts(let facts):
            // Each check as a flag and its value, all text (the statement is kept prepared, which infers text): a flag
            // NULL leaves its check out; a value NULL expects none.
            let checked = SQLValue.text("1")
            let previous = facts.previousSeriesOwner == nil ? nil : facts.previousOriginalTransactionId
            var binds: [SQLValue] = [.text(facts.originalTransactionId), .text(facts.transactionId), .of(previous)]
            if case .some(let environment) = facts.seriesEnvironment { binds += [checked, .of(environment?.rawValue)] } else { binds += [.null, .null] }
            if case .some(let owner) = facts.seriesOwner { binds += [checked, .of(owner)] } else { binds += [.null, .null] }
            binds.append(.of(facts.entryCount.map { String($0) }))
            binds.append(.of(facts.storedSignedDate.map { String(Millis.of($0)) }))
            if case .some(let owner) = facts.previousSeriesOwner { binds.append(.of(owner)) } else { binds.append(.null) }
            return (.requireFacts, binds)
        }
    }

    static let insertPurchase: [EffectStep] = [
        // The rules decided on a transaction that was not stored; a replica that stored it meanwhile changes the facts.
        .statement("""
            INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment,
                quantity, purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token,
                signed_date, source, recorded_at, revocation_type, revocation_percentage, app_transaction_id\(LedgerSession.moneyColumns))
            VALUES ($1, $2, $3, $4, $5, $6, $7, \(int(8)), \(int(9)), \(int(10)), \(int(11)), \(int(12)), \(int(13)), $14, $15, \(int(16)), $17,
                \(Ledger.recordedNoEarlierThan(int(18), Ledger.purchasesWatermark)), $19, \(int(20)), $21, \(int(22)), $23, \(int(24)), $25, $26, $27)
            ON CONFLICT (transaction_id) DO NOTHING RETURNING 1
            """, then: .raceUnlessRow),
    ]

    static let claimPurchase: [EffectStep] = [
        .statement("UPDATE purchases SET account_id = $1, order_id = $2 WHERE transaction_id = $3 AND account_id IS NULL RETURNING 1", then: .raceUnlessRow),
    ]

    /// News that changes what the business view's rollup summed of the row takes the old facts back and has the row
    /// summed again (``Ledger/rollUpMetrics(now:)``). On PostgreSQL a rollup moving the watermark meanwhile is waited
    /// for, so the choice is made against the watermark it leaves.
    static let refreshPurchase: [EffectStep] = {
        let changes = Ledger.metricFactsChange(expires: "$1", price: int(10), currency: "CAST($11 AS TEXT)", offerDiscountType: "CAST($13 AS TEXT)",
                                               offerPeriod: "CAST($14 AS TEXT)")
        return [
            .statement("SELECT pg_advisory_xact_lock_shared(hashtextextended('\(Ledger.metricRollupLock)', 727274))", postgresOnly: true),
            .statement("""
                INSERT INTO metric_retractions (\(Ledger.retractionColumns))
                SELECT \(Ledger.retractionColumns) FROM purchases
                WHERE transaction_id = $6 AND signed_date < \(int(5)) AND recorded_at < \(Ledger.purchasesWatermark) AND \(changes)
                """),
            .statement("""
                UPDATE purchases SET expires_date = \(int(1)), revocation_date = \(int(2)), revocation_reason = \(int(3)), is_upgraded = \(int(4)),
                    signed_date = \(int(5)), revocation_type = $7, revocation_percentage = \(int(8)), app_transaction_id = COALESCE(app_transaction_id, $9),
                    price = COALESCE(price, \(int(10))), currency = COALESCE(currency, $11), offer_type = COALESCE(offer_type, \(int(12))),
                    offer_discount_type = COALESCE(offer_discount_type, $13), offer_period = COALESCE(offer_period, $14),
                    storefront = COALESCE(storefront, $15),
                    recorded_at = CASE WHEN \(changes) AND recorded_at < \(Ledger.purchasesWatermark) THEN \(Ledger.purchasesWatermark) ELSE recorded_at END
                WHERE transaction_id = $6 AND signed_date < \(int(5))
                """),
        ]
    }()

    static let linkOrder: [EffectStep] = [
        .statement("UPDATE purchases SET order_id = $1 WHERE transaction_id = $2 AND order_id IS NULL"),
    ]

    /// Each update decides under the order row's lock: on PostgreSQL a settle that commits while this one waits for the
    /// row is seen by the second update (a separate read first would miss it, and the audit with it). A payment for an
    /// order an operator settled without one is granted all the same (Apple was paid), but the order is now paid twice
    /// (the operator may have refunded or credited it): the audit log says so.
    static let fulfilOrder: [EffectStep] = [
        .statement("""
            UPDATE orders SET state = 'granted', transaction_id = $1, updated_at = \(int(2))
            WHERE order_id = $3 AND transaction_id IS NULL AND state <> 'settled' RETURNING 1
            """, then: .doneIfRow),
        .statement("""
            UPDATE orders SET state = 'granted', transaction_id = $1, updated_at = \(int(2))
            WHERE order_id = $3 AND transaction_id IS NULL AND state = 'settled' RETURNING 1
            """, then: .doneUnlessRow),
        .statement("""
            INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at)
            VALUES ($4, 'ledger', '\(AuditAction.settledOrderPaid.rawValue)', $3, $1, \(int(2)))
            """),
    ]

    /// An order no longer open (paid, or settled, since it was read: on PostgreSQL the update waits for a payment's
    /// row lock and then finds the order granted) makes the operation decide again.
    static let settleOrder: [EffectStep] = [
        .statement("UPDATE orders SET state = 'settled', note = $1, updated_at = \(int(2)) WHERE order_id = $3 AND state = 'created' RETURNING 1",
                   then: .raceUnlessRow),
    ]

    private static let insertEntry = """
        INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($4, $2, $3, \(int(1)), $5, \(int(6)))
        ON CONFLICT (entry_key) DO NOTHING RETURNING 1
        """

    /// A spend's debit first, guarded in the database: two replicas spending the last coins cannot both succeed. Its
    /// key's uniqueness refuses a racing replica's second spend of it (which then decides again and finds this one).
    static let debitBalance: [EffectStep] = [
        .statement("""
            UPDATE balances SET amount = amount + \(int(1)) WHERE account_id = $2 AND currency = $3 AND amount + \(int(1)) >= 0 RETURNING 1
            """, then: .raceUnlessRow),
        .statement(insertEntry, then: .raceUnlessRow),
    ]

    /// A movement made before under its key is left as it is.
    static let moveBalance: [EffectStep] = [
        .statement(insertEntry, then: .doneUnlessRow),
        .statement("""
            INSERT INTO balances (account_id, currency, amount) VALUES ($2, $3, \(int(1)))
            ON CONFLICT (account_id, currency) DO UPDATE SET amount = balances.amount + excluded.amount
            """),
    ]

    static let recordConflict: [EffectStep] = [
        .statement("""
            INSERT INTO conflicts (transaction_id, claimed_by, owner, first_seen, attempts) VALUES ($1, $2, $3, \(int(4)), 1)
            ON CONFLICT (transaction_id, claimed_by) DO UPDATE SET attempts = conflicts.attempts + 1
            """),
    ]

    /// What the news leaves out stays as it was (unknown is not "none"): renewal info without a status, or a status
    /// without renewal info, must not erase a grace period. But a status (or grace date) is kept only while it is about
    /// the latest period, signed no earlier than that period began: the news' date becomes the series', and an EXPIRED
    /// of an earlier period would otherwise look newer than the resubscription after it. The rest of the renewal info is
    /// replaced together when renewal info came (auto_renew set): Apple leaves out an expiration intent, a billing retry
    /// or a price increase that no longer applies. Unless a device's renewal info signed later is held
    /// (`device_renewal_signed_date`): news signed before it, delivered after it, sets the status it carries and leaves
    /// the newer renewal info shown.
    static let updateSeriesStatus: [EffectStep] = {
        let kept = "(excluded.auto_renew IS NULL OR COALESCE(subscriptions.device_renewal_signed_date, 0) > excluded.signed_date)"
        return [
            .statement("""
                INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew,
                    auto_renew_product_id, signed_date, expiration_intent, billing_retry, price_increase_status)
                VALUES ($1, NULL, \(int(2)), NULL, \(int(3)), \(int(4)), $5, \(int(6)), \(int(7)), \(int(8)), \(int(9)))
                ON CONFLICT (original_transaction_id) DO UPDATE SET
                    status = COALESCE(excluded.status, CASE WHEN subscriptions.signed_date >= COALESCE(subscriptions.period_purchase_date, 0)
                        THEN subscriptions.status END),
                    grace_period_expires_date = COALESCE(excluded.grace_period_expires_date,
                        CASE WHEN subscriptions.signed_date >= COALESCE(subscriptions.period_purchase_date, 0) THEN subscriptions.grace_period_expires_date END),
                    auto_renew = CASE WHEN \(kept) THEN subscriptions.auto_renew ELSE excluded.auto_renew END,
                    auto_renew_product_id = CASE WHEN \(kept) THEN subscriptions.auto_renew_product_id
                        ELSE COALESCE(excluded.auto_renew_product_id, subscriptions.auto_renew_product_id) END,
                    expiration_intent = CASE WHEN \(kept) THEN subscriptions.expiration_intent ELSE excluded.expiration_intent END,
                    billing_retry = CASE WHEN \(kept) THEN subscriptions.billing_retry ELSE excluded.billing_retry END,
                    price_increase_status = CASE WHEN \(kept) THEN subscriptions.price_increase_status ELSE excluded.price_increase_status END,
                    signed_date = excluded.signed_date
                WHERE subscriptions.signed_date < excluded.signed_date
                """),
        ]
    }()

    static let updateSeriesPeriod: [EffectStep] = [
        .statement("""
            INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, signed_date, period_purchase_date)
            VALUES ($1, $2, NULL, \(int(3)), 0, \(int(4)))
            ON CONFLICT (original_transaction_id) DO UPDATE SET product_id = excluded.product_id, expires_date = excluded.expires_date,
                period_purchase_date = excluded.period_purchase_date
            WHERE subscriptions.period_purchase_date IS NULL OR subscriptions.period_purchase_date < excluded.period_purchase_date
                OR (subscriptions.period_purchase_date = excluded.period_purchase_date
                    AND COALESCE(excluded.expires_date, 0) >= COALESCE(subscriptions.expires_date, 0))
            """),
    ]

    static let recordDeviceReport: [EffectStep] = [
        .statement("INSERT INTO device_reports (report_id, transaction_id, account_id, signals, reported_at) VALUES ($1, $2, $3, $4, \(int(5)))"),
    ]

    static let audit: [EffectStep] = [
        .statement("INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at) VALUES ($1, $2, $3, $4, $5, \(int(6)))"),
    ]

    /// The series' unbound periods whose token is none or this one: when there are any, binding them and writing each
    /// one's grant event (``WebhookRules/grantEvent(_:account:now:)``) is decided in Swift. They are rare (periods a
    /// notification stored before anyone held the series); a first purchase finds none.
    static let claimSeries: [EffectStep] = [
        .statement("SELECT 1 FROM purchases WHERE \(claimable) LIMIT 1", then: .doneUnlessRow),
        .inSwift,
    ]

    /// The claimable periods of series $1 for the account whose token is $2.
    static let claimable = "original_transaction_id = $1 AND account_id IS NULL AND (app_account_token IS NULL OR app_account_token = $2)"

    static let emitEvent: [EffectStep] = [
        .statement("""
            INSERT INTO webhook_events (event_id, type, account_id, body, state, attempts, next_attempt_at, created_at)
            VALUES ($1, $2, $3, $4, 'pending', 0, \(int(6)), \(int(5))) ON CONFLICT (event_id) DO NOTHING
            """),
    ]

    /// Not a change: what a decision presumed, read again holding the series' lock (and the lock of the series it was
    /// migrated from, when its holder decided). SQLite has one writer and every operation reads its facts inside its
    /// own transaction: they hold by construction. The check is one statement, run after the locks were taken (a
    /// statement that took them itself would read from a snapshot older than what it waited for), kept prepared on
    /// PostgreSQL's held transactions.
    static let requireFacts: [EffectStep] = [
        .lockSeries(bind: 1),
        .lockSeries(bind: 3),
        .statement(preconditionsQuery, then: .raceUnlessRow, postgresOnly: true),
    ]

    /// One row when every check ``binds(_:events:)`` asked for holds: the series' environment and owner ($1), the
    /// transaction's balance movements and stored signing date ($2), the latest holder of the series it was migrated
    /// from ($3).
    static let preconditionsBindCount = 10
    static let preconditionsQuery = """
        SELECT 1 WHERE (CAST($4 AS TEXT) IS NULL OR (\(LedgerSession.seriesEnvironmentQuery("$1"))) IS NOT DISTINCT FROM CAST($5 AS TEXT))
            AND (CAST($6 AS TEXT) IS NULL OR (\(LedgerSession.seriesHolderQuery("$1", latest: false))) IS NOT DISTINCT FROM CAST($7 AS TEXT))
            AND (CAST($8 AS TEXT) IS NULL OR (SELECT CAST(COUNT(*) AS TEXT) FROM balance_entries b WHERE b.transaction_id = $2) = CAST($8 AS TEXT))
            AND (CAST($9 AS TEXT) IS NULL OR (SELECT CAST(p.signed_date AS TEXT) FROM purchases p WHERE p.transaction_id = $2) = CAST($9 AS TEXT))
            AND (CAST($3 AS TEXT) IS NULL OR (\(LedgerSession.seriesHolderQuery("$3", latest: true))) IS NOT DISTINCT FROM CAST($10 AS TEXT))
        """
}

/// PostgreSQL's purchase function answered `h`: an effect is decided in Swift (``EffectStep/inSwift``), nothing was
/// applied, and the operation is run again in a held transaction, where the session decides it.
struct LedgerHandBack: Error {}
