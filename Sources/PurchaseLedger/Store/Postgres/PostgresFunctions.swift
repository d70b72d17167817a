import AppStoreFormats
import Foundation

/// What the migrations install on PostgreSQL so that a purchase is two round trips in autocommit — one statement
/// reading the facts, one applying the rules' effects and answering what the account owns — instead of a held
/// transaction of ten statements.
///
/// `iapkit_apply` is an interpreter of ``LedgerEffect`` values, not a second copy of the rules: the decision is made in
/// Swift. It applies the effects in order as one statement (atomic in autocommit). When an effect's precondition no
/// longer holds (another replica stored or claimed the transaction, or changed the series, since the facts were
/// read) it undoes what it applied and answers one row of kind `r`; the ledger then decides again from fresh facts.
enum PostgresFunctions {
    static let raceState = "P0R01"
    /// Answered as a lost race, so the operation runs again from fresh facts: the interpreter's own, a deadlock
    /// (two receipts taking two series' locks in opposite orders) and a serialization failure.
    static let retriedStates: Set<String> = [raceState, "40P01", "40001"]

    /// The interpreter's name in the database: `iapkit_apply_` and a hash of its body. Replicas of different versions
    /// share one database during a rolling deploy; each installs and calls its own body, so none runs a body that
    /// lacks an effect or a guard its rules rely on (under one shared name, the replica that started last would
    /// decide for all of them). Bodies of older versions stay installed, unused once those replicas are gone.
    static let applyFunction = "iapkit_apply_" + fnv1a(applyBody)

    static let applyEffects = "CREATE OR REPLACE FUNCTION \(applyFunction)" + applyBody

    /// ``Ledger/metricFactsChange(expires:price:currency:offerDiscountType:offerPeriod:)`` over the refresh effect's JSON.
    static let refreshChangesMetricFacts = Ledger.metricFactsChange(
        expires: "(e->>'expires')", price: "(e->'m'->>0)", currency: "(e->'m'->>1)", offerDiscountType: "(e->'m'->>3)", offerPeriod: "(e->'m'->>4)")

    /// 64-bit FNV-1a, in hex: a stable name for a body (not a security boundary: anyone who can create functions in
    /// the ledger's database owns it anyway).
    static func fnv1a(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    private static let applyBody = """
        (effects jsonb, p_owner text)
        RETURNS TABLE(o_kind text, o0 text, o1 text, o2 text, o3 text, o4 text, o5 text, o6 text, o7 bigint, o8 bigint, o9 bigint,
                      o10 bigint, o11 bigint, o12 bigint, o13 text, o14 text, o15 bigint)
        LANGUAGE plpgsql
        -- Key lookups only: a generic plan serves every call, so the statements inside are planned once per connection.
        SET plan_cache_mode = force_generic_plan
        AS $fn$
        #variable_conflict use_column
        DECLARE
          e jsonb;
          r jsonb;
          n bigint;
        BEGIN
          -- A lost race is answered as a row, not an error: the block's savepoint undoes every effect applied before it.
          BEGIN
          FOR e IN SELECT value FROM jsonb_array_elements(effects) LOOP
            CASE e->>'op'
            WHEN 'insertPurchase' THEN
              r := e->'r';
              INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment,
                  quantity, purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token,
                  signed_date, source, recorded_at, revocation_type, revocation_percentage, app_transaction_id\(LedgerSession.moneyColumns))
              VALUES (r->>0, r->>1, r->>2, r->>3, r->>4, r->>5, r->>6, (r->>7)::bigint, (r->>8)::bigint, (r->>9)::bigint, (r->>10)::bigint,
                  (r->>11)::bigint, (r->>12)::bigint, r->>13, r->>14, (r->>15)::bigint, e->>'source',
                  \(Ledger.recordedNoEarlierThan("(e->>'at')::bigint", Ledger.purchasesWatermark)), r->>16, (r->>17)::bigint, r->>18,
                  (r->>19)::bigint, r->>20, (r->>21)::bigint, r->>22, r->>23, r->>24)
              ON CONFLICT (transaction_id) DO NOTHING;
              GET DIAGNOSTICS n = ROW_COUNT;
              IF n = 0 THEN RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01'; END IF;
            WHEN 'claimPurchase' THEN
              UPDATE purchases SET account_id = e->>'account', order_id = e->>'order' WHERE transaction_id = e->>'tx' AND account_id IS NULL;
              GET DIAGNOSTICS n = ROW_COUNT;
              IF n = 0 THEN RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01'; END IF;
            WHEN 'refreshPurchase' THEN
              -- As LedgerSession's: news that changes what the business view's rollup summed of the row takes the old
              -- facts back and has the row summed again, decided while no rollup moves the watermark.
              PERFORM pg_advisory_xact_lock_shared(hashtextextended('\(Ledger.metricRollupLock)', 727274));
              INSERT INTO metric_retractions (\(Ledger.retractionColumns))
              SELECT \(Ledger.retractionColumns) FROM purchases
              WHERE transaction_id = e->>'tx' AND signed_date < (e->>'signed')::bigint AND recorded_at < \(Ledger.purchasesWatermark)
                AND \(Self.refreshChangesMetricFacts);
              UPDATE purchases SET expires_date = (e->>'expires')::bigint, revocation_date = (e->>'revoked')::bigint,
                  revocation_reason = (e->>'reason')::bigint, is_upgraded = (e->>'upgraded')::bigint, signed_date = (e->>'signed')::bigint,
                  revocation_type = e->>'revocationType', revocation_percentage = (e->>'revocationPercentage')::bigint,
                  app_transaction_id = COALESCE(app_transaction_id, e->>'appTransactionId'),
                  price = COALESCE(price, (e->'m'->>0)::bigint), currency = COALESCE(currency, e->'m'->>1),
                  offer_type = COALESCE(offer_type, (e->'m'->>2)::bigint), offer_discount_type = COALESCE(offer_discount_type, e->'m'->>3),
                  offer_period = COALESCE(offer_period, e->'m'->>4), storefront = COALESCE(storefront, e->'m'->>5),
                  recorded_at = CASE WHEN \(Self.refreshChangesMetricFacts) AND recorded_at < \(Ledger.purchasesWatermark)
                                     THEN \(Ledger.purchasesWatermark) ELSE recorded_at END
              WHERE transaction_id = e->>'tx' AND signed_date < (e->>'signed')::bigint;
            WHEN 'linkOrder' THEN
              UPDATE purchases SET order_id = e->>'order' WHERE transaction_id = e->>'tx' AND order_id IS NULL;
            WHEN 'fulfilOrder' THEN
              -- As LedgerSession's: a payment for an order an operator settled without one is granted and audited. The
              -- updates decide under the row's lock, so a settle committed while this waited for it is seen.
              UPDATE orders SET state = 'granted', transaction_id = e->>'tx', updated_at = (e->>'at')::bigint
              WHERE order_id = e->>'order' AND transaction_id IS NULL AND state <> 'settled';
              GET DIAGNOSTICS n = ROW_COUNT;
              IF n = 0 THEN
                UPDATE orders SET state = 'granted', transaction_id = e->>'tx', updated_at = (e->>'at')::bigint
                WHERE order_id = e->>'order' AND transaction_id IS NULL AND state = 'settled';
                GET DIAGNOSTICS n = ROW_COUNT;
                IF n > 0 THEN
                  INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at)
                  VALUES (e->>'auditId', 'ledger', 'settled-order-paid', e->>'order', e->>'tx', (e->>'at')::bigint);
                END IF;
              END IF;
            WHEN 'moveBalance' THEN
              INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at)
              VALUES (e->>'key', e->>'account', e->>'currency', (e->>'delta')::bigint, e->>'tx', (e->>'at')::bigint)
              ON CONFLICT (entry_key) DO NOTHING;
              GET DIAGNOSTICS n = ROW_COUNT;
              IF n > 0 THEN
                INSERT INTO balances (account_id, currency, amount) VALUES (e->>'account', e->>'currency', (e->>'delta')::bigint)
                ON CONFLICT (account_id, currency) DO UPDATE SET amount = balances.amount + excluded.amount;
              END IF;
            WHEN 'recordConflict' THEN
              INSERT INTO conflicts (transaction_id, claimed_by, owner, first_seen, attempts)
              VALUES (e->>'tx', e->>'claimedBy', e->>'owner', (e->>'at')::bigint, 1)
              ON CONFLICT (transaction_id, claimed_by) DO UPDATE SET attempts = conflicts.attempts + 1;
            WHEN 'requireFacts' THEN
              -- Held to the end of this statement's transaction: the same lock the held-transaction path takes.
              PERFORM pg_advisory_xact_lock(hashtextextended(e->>'original', 727274));
              IF e ? 'seriesEnvironment' AND (\(LedgerSession.seriesEnvironmentQuery("e->>'original'")))
                    IS DISTINCT FROM (e->>'seriesEnvironment') THEN
                RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01';
              END IF;
              IF e ? 'seriesOwner' AND (\(LedgerSession.seriesHolderQuery("e->>'original'", latest: false)))
                    IS DISTINCT FROM (e->>'seriesOwner') THEN
                RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01';
              END IF;
              IF e ? 'entryCount' AND (SELECT COUNT(*) FROM balance_entries b WHERE b.transaction_id = e->>'tx') <> (e->>'entryCount')::bigint THEN
                RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01';
              END IF;
              IF e ? 'storedSignedDate' AND (SELECT p.signed_date FROM purchases p WHERE p.transaction_id = e->>'tx')
                    IS DISTINCT FROM (e->>'storedSignedDate')::bigint THEN
                RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01';
              END IF;
              IF e ? 'previousOriginal' THEN
                PERFORM pg_advisory_xact_lock(hashtextextended(e->>'previousOriginal', 727274));
                IF (\(LedgerSession.seriesHolderQuery("e->>'previousOriginal'", latest: true))) IS DISTINCT FROM (e->>'previousOwner') THEN
                  RAISE EXCEPTION 'iapkit_race' USING ERRCODE = 'P0R01';
                END IF;
              END IF;
            WHEN 'claimSeries' THEN
              -- The periods so bound reach the account like any grant: each one's event (WebhookRules.grantEvent's, the
              -- same id and fields) goes to the outbox with it.
              FOR r IN
                UPDATE purchases SET account_id = e->>'account'
                WHERE original_transaction_id = e->>'original' AND account_id IS NULL
                  AND (app_account_token IS NULL OR app_account_token = e->>'token')
                RETURNING to_jsonb(purchases.*)
              LOOP
                CONTINUE WHEN r->>'revocation_date' IS NOT NULL OR e->>'events' = 'false';
                INSERT INTO webhook_events (event_id, type, account_id, body, state, attempts, next_attempt_at, created_at)
                SELECT k || '.' || (r->>'transaction_id'), k, e->>'account', jsonb_strip_nulls(jsonb_build_object(
                    'id', k || '.' || (r->>'transaction_id'), 'type', k, 'accountId', e->>'account', 'occurredAt', (e->>'at')::bigint,
                    'productId', r->>'product_id', 'transactionId', r->>'transaction_id',
                    'originalTransactionId', r->>'original_transaction_id', 'environment', r->>'environment',
                    'purchaseDate', (r->>'purchase_date')::bigint, 'expiresDate', (r->>'expires_date')::bigint,
                    'orderId', r->>'order_id', 'ownership', r->>'ownership'))::text,
                  'pending', 0, (e->>'due')::bigint, (e->>'at')::bigint
                FROM (SELECT CASE WHEN r->>'transaction_id' = r->>'original_transaction_id' THEN 'INITIAL_PURCHASE' ELSE 'RENEWAL' END AS k) kinds
                ON CONFLICT (event_id) DO NOTHING;
              END LOOP;
            WHEN 'updateSeriesPeriod' THEN
              INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, signed_date, period_purchase_date)
              VALUES (e->>'original', e->>'product', NULL, (e->>'expires')::bigint, 0, (e->>'purchased')::bigint)
              ON CONFLICT (original_transaction_id) DO UPDATE SET product_id = excluded.product_id, expires_date = excluded.expires_date,
                  period_purchase_date = excluded.period_purchase_date
              WHERE subscriptions.period_purchase_date IS NULL OR subscriptions.period_purchase_date < excluded.period_purchase_date
                  OR (subscriptions.period_purchase_date = excluded.period_purchase_date
                      AND COALESCE(excluded.expires_date, 0) >= COALESCE(subscriptions.expires_date, 0));
            WHEN 'emitEvent' THEN
              INSERT INTO webhook_events (event_id, type, account_id, body, state, attempts, next_attempt_at, created_at)
              VALUES (e->>'id', e->>'type', e->>'account', e->>'body', 'pending', 0, (e->>'due')::bigint, (e->>'at')::bigint)
              ON CONFLICT (event_id) DO NOTHING;
            WHEN 'recordDeviceReport' THEN
              INSERT INTO device_reports (report_id, transaction_id, account_id, signals, reported_at)
              VALUES (e->>'id', e->>'tx', e->>'account', e->>'signals', (e->>'at')::bigint);
            ELSE
              RAISE EXCEPTION 'iapkit_apply: no effect %', e->>'op';
            END CASE;
          END LOOP;
          EXCEPTION WHEN SQLSTATE 'P0R01' THEN
            RETURN QUERY SELECT 'r'::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::bigint,
                NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::bigint;
            RETURN;
          END;
          IF p_owner IS NOT NULL THEN
            RETURN QUERY
              SELECT 'p'::text, transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment, quantity,
                  purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token, signed_date
              FROM purchases WHERE account_id = p_owner AND product_type <> 'Consumable'
              UNION ALL
              SELECT 's'::text, s.original_transaction_id, s.product_id, s.auto_renew_product_id, CAST(s.billing_retry AS TEXT),
                  CAST(s.price_increase_status AS TEXT), NULL, NULL, s.status, s.expires_date, s.grace_period_expires_date, s.auto_renew,
                  s.period_purchase_date, s.expiration_intent, NULL, NULL, s.signed_date
              FROM (SELECT DISTINCT original_transaction_id AS series FROM purchases
                  WHERE account_id = p_owner AND product_type <> 'Consumable' AND product_type = 'Auto-Renewable Subscription') mine
              JOIN subscriptions s ON s.original_transaction_id = mine.series
              UNION ALL
              SELECT 'b'::text, currency, NULL, NULL, NULL, NULL, NULL, NULL, amount, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
              FROM balances WHERE account_id = p_owner;
          END IF;
        END
        $fn$
        """

    /// The effects a submission applies, as the JSON `iapkit_apply` reads. Only submission effects travel this way;
    /// other operations run in a held transaction.
    /// Without `events`, `emitEvent` effects are left out and `claimSeries` writes none (``Ledger/recordsWebhookEvents``).
    static func json(_ effects: [LedgerEffect], events: Bool) throws -> String {
        var out = "[", first = true
        for effect in effects {
            if case .emitEvent = effect, !events { continue }
            if !first { out += "," }
            first = false
            var object = JSONObject()
            switch effect {
            case .insertPurchase(let record, let source, let at):
                object.set("op", .text("insertPurchase"))
                let row: [SQLValue] = [.text(record.transactionId), .text(record.originalTransactionId), .of(record.accountId), .of(record.orderId),
                                       .text(record.productId), .text(record.productType.rawValue), .text(record.environment.rawValue),
                                       .int(Int64(record.quantity)), .of(record.purchaseDate), .of(record.expiresDate), .of(record.revocationDate),
                                       .of(record.revocationReason.map { Int64($0.rawValue) }), .of(record.isUpgraded), .of(record.ownership?.rawValue),
                                       .of(record.appAccountToken?.lowercasedString), .of(record.signedDate),
                                       .of(record.revocationType?.rawValue), .of(record.revocationPercentage.map(Int64.init)),
                                       .of(record.appTransactionId)] + LedgerSession.moneyBinds(record)
                object.raw("r", "[" + row.map(JSONObject.literal).joined(separator: ",") + "]")
                object.set("source", .text(source.rawValue))
                object.set("at", .of(at))
            case .claimPurchase(let transactionId, let accountId, let orderId):
                object.set("op", .text("claimPurchase"))
                object.set("tx", .text(transactionId))
                object.set("account", .text(accountId))
                object.set("order", .of(orderId))
            case .refreshPurchase(let record):
                object.set("op", .text("refreshPurchase"))
                object.set("tx", .text(record.transactionId))
                object.set("expires", .of(record.expiresDate))
                object.set("revoked", .of(record.revocationDate))
                object.set("reason", .of(record.revocationReason.map { Int64($0.rawValue) }))
                object.set("upgraded", .of(record.isUpgraded))
                object.set("signed", .of(record.signedDate))
                object.set("revocationType", .of(record.revocationType?.rawValue))
                object.set("revocationPercentage", .of(record.revocationPercentage.map(Int64.init)))
                object.set("appTransactionId", .of(record.appTransactionId))
                object.raw("m", "[" + LedgerSession.moneyBinds(record).map(JSONObject.literal).joined(separator: ",") + "]")
            case .linkOrder(let transactionId, let orderId):
                object.set("op", .text("linkOrder"))
                object.set("tx", .text(transactionId))
                object.set("order", .text(orderId))
            case .fulfilOrder(let orderId, let transactionId, let at):
                object.set("op", .text("fulfilOrder"))
                object.set("order", .text(orderId))
                object.set("tx", .text(transactionId))
                object.set("at", .of(at))
                object.set("auditId", .text(UUID().lowercasedString))
            case .moveBalance(let move) where move.requiresCover:
                // A spend's debit, decided and applied in a held transaction (``Ledger/spend``): not interpreted here.
                throw LedgerError(.storage, "iapkit_apply does not take a covered debit: \(move.key)")
            case .moveBalance(let move):
                object.set("op", .text("moveBalance"))
                object.set("key", .text(move.key))
                object.set("account", .text(move.accountId))
                object.set("currency", .text(move.currency))
                object.set("delta", .int(move.delta))
                object.set("tx", .of(move.transactionId))
                object.set("at", .of(move.at))
            case .recordConflict(let transactionId, let claimedBy, let owner, let at):
                object.set("op", .text("recordConflict"))
                object.set("tx", .text(transactionId))
                object.set("claimedBy", .text(claimedBy))
                object.set("owner", .text(owner))
                object.set("at", .of(at))
            case .recordDeviceReport(let transactionId, let accountId, let signals, let at):
                object.set("op", .text("recordDeviceReport"))
                object.set("id", .text(UUID().lowercasedString))
                object.set("tx", .text(transactionId))
                object.set("account", .text(accountId))
                object.set("signals", .text(signals.joined(separator: ",")))
                object.set("at", .of(at))
            case .requireFacts(let facts):
                object.set("op", .text("requireFacts"))
                object.set("original", .text(facts.originalTransactionId))
                object.set("tx", .text(facts.transactionId))
                // Present with null: the series must have no owner; absent: not checked.
                if case .some(let owner) = facts.seriesOwner { object.set("seriesOwner", .of(owner)) }
                if case .some(let environment) = facts.seriesEnvironment { object.set("seriesEnvironment", .of(environment?.rawValue)) }
                if let count = facts.entryCount { object.set("entryCount", .int(Int64(count))) }
                if let signed = facts.storedSignedDate { object.set("storedSignedDate", .of(signed)) }
                if let previous = facts.previousOriginalTransactionId, case .some(let owner) = facts.previousSeriesOwner {
                    object.set("previousOriginal", .text(previous))
                    object.set("previousOwner", .of(owner))
                }
            case .claimSeries(let original, let accountId, let token, let at):
                object.set("op", .text("claimSeries"))
                object.set("at", .of(at))
                object.set("original", .text(original))
                object.set("account", .text(accountId))
                object.set("token", .of(token?.lowercasedString))
                if !events { object.raw("events", "false") }
                object.set("due", .int(Millis.now))
            case .updateSeriesPeriod(let original, let productId, let purchaseDate, let expiresDate):
                object.set("op", .text("updateSeriesPeriod"))
                object.set("original", .text(original))
                object.set("product", .text(productId))
                object.set("purchased", .of(purchaseDate))
                object.set("expires", .of(expiresDate))
            case .emitEvent(let event):
                object.set("op", .text("emitEvent"))
                object.set("id", .text(event.id))
                object.set("type", .text(event.type.rawValue))
                object.set("account", .of(event.accountId))
                object.set("body", .text(try event.body()))
                object.set("at", .of(event.occurredAt))
                // Due from now by this replica's wall clock, which senders' claims read too (see LedgerSession's emitEvent).
                object.set("due", .int(Millis.now))
            case .updateSeriesStatus, .audit, .settleOrder:
                throw LedgerError(.storage, "iapkit_apply does not take \(effect)")
            }
            out += object.closed
        }
        // jsonb refuses `\u0000` as text does a NUL: refused here as the binds are (``SQLValue/refuseNUL(in:)``).
        if StorableText.jsonCarriesNUL(out.utf8) { throw SQLValue.nulRefused }
        return out + "]"
    }
}

/// A flat JSON object written by hand: the effects are small and this is on every purchase.
struct JSONObject {
    private(set) var text = "{"
    private var empty = true

    mutating func set(_ key: String, _ value: SQLValue) { raw(key, Self.literal(value)) }

    mutating func raw(_ key: String, _ literal: String) {
        text += (empty ? "" : ",") + Self.literal(.text(key)) + ":" + literal
        empty = false
    }

    var closed: String { text + "}" }

    static func literal(_ value: SQLValue) -> String {
        switch value {
        case .null: return "null"
        case .int(let number): return String(number)
        case .text(let string):
            var out = "\""
            for scalar in string.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
    }
}
