import AppStoreFormats
import Foundation

/// What the migrations install on PostgreSQL so that a purchase is two round trips in autocommit at most — one statement
/// reading the facts, one applying the rules' effects and answering what the account owns — instead of a held
/// transaction of ten statements.
///
/// `iapkit_apply` applies ``LedgerEffect`` values in order as one statement (atomic in autocommit): the decision is made
/// in Swift, and the function's body is generated from the statements a session runs (``EffectStatements``), so each
/// effect's SQL is written once. When an effect's precondition no longer holds (another replica stored or claimed the
/// transaction, or changed the series, since the facts were read) it undoes what it applied and answers one row of
/// kind `r`; the ledger then decides again from fresh facts. An effect decided in Swift (``EffectStep/inSwift``) undoes
/// them the same way and answers one row of kind `h`, and the ledger runs the operation in a held transaction. Both are
/// rows, not errors: statements raising errors through PostgresNIO's pool under load were seen to leave requests
/// waiting forever (docs/LEDGER.md).
enum PostgresFunctions {
    static let raceState = "P0R01"
    static let handBackState = "P0H01"
    /// Answered as a lost race, so the operation runs again from fresh facts: the interpreter's own, a deadlock
    /// (two receipts taking two series' locks in opposite orders) and a serialization failure.
    static let retriedStates: Set<String> = [raceState, "40P01", "40001"]

    /// The function's name in the database: `iapkit_apply_` and a hash of its body. Replicas of different versions
    /// share one database during a rolling deploy; each installs and calls its own body, so none runs a body that
    /// lacks an effect or a guard its rules rely on (under one shared name, the replica that started last would
    /// decide for all of them). Bodies of older versions stay installed, unused once those replicas are gone.
    static let applyFunction = "iapkit_apply_" + fnv1a(applyBody)

    static let applyEffects = "CREATE OR REPLACE FUNCTION \(applyFunction)" + applyBody

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

    /// One step of an effect as PL/pgSQL: a statement whose rows decide (`RETURNING 1`, or a `SELECT`) sets `FOUND`.
    static func plpgsql(_ step: EffectStep) -> String {
        switch step {
        case .run(let statement):
            // `$k` is the statement's k-th bind, the effect's bind `binds[k-1]`: element `binds[k-1]` of its array, as
            // text (the statement casts where it wants an integer).
            var text = EffectStatement.placeholders(in: statement.sql) { "(e->>\(statement.binds[$0 - 1]))" }
            if text.hasPrefix("SELECT ") {
                text = "PERFORM " + text.dropFirst("SELECT ".count)
            } else if text.hasSuffix(" RETURNING 1") {
                text = String(text.dropLast(" RETURNING 1".count))
            }
            let decided = switch statement.then {
            case .next: ""
            case .raceUnlessRow: "\nIF NOT FOUND THEN RAISE EXCEPTION 'iapkit_race' USING ERRCODE = '\(raceState)'; END IF;"
            case .doneUnlessRow: "\nIF NOT FOUND THEN CONTINUE; END IF;"
            case .doneIfRow: "\nIF FOUND THEN CONTINUE; END IF;"
            }
            return text + ";" + decided
        case .lockSeries(let bind):
            // An assignment, not a PERFORM: a simple expression PL/pgSQL evaluates itself, no statement for the executor
            // to start (the lock returns void, which casts to an empty text).
            return "IF (e->>\(bind)) IS NOT NULL THEN locked := pg_advisory_xact_lock(hashtextextended(e->>\(bind), 727274))::text; END IF;"
        case .inSwift:
            return "RAISE EXCEPTION 'iapkit_hand_back' USING ERRCODE = '\(handBackState)';"
        }
    }

    /// The rest of a one-row answer of kind `r` (a lost race) or `h` (handed back).
    private static let answerNulls = """
        NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, \
        NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::bigint
        """

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
          locked text;
        BEGIN
          -- A lost race is answered as a row, not an error: the block's savepoint undoes every effect applied before it.
          BEGIN
          -- By index, each element a simple expression: no query (and its executor and cursor) to walk the array.
          FOR i IN 0 .. jsonb_array_length(effects) - 1 LOOP
            e := effects -> i;
            CASE e->>0
        \(EffectOp.allCases.map { op in
            "WHEN '\(op.rawValue)' THEN\n" + op.steps.map(plpgsql).joined(separator: "\n")
        }.joined(separator: "\n"))
            ELSE
              RAISE EXCEPTION 'iapkit_apply: no effect %', e->>0;
            END CASE;
          END LOOP;
          EXCEPTION
            WHEN SQLSTATE '\(raceState)' THEN
              RETURN QUERY SELECT 'r'::text, \(answerNulls);
              RETURN;
            WHEN SQLSTATE '\(handBackState)' THEN
              RETURN QUERY SELECT 'h'::text, \(answerNulls);
              RETURN;
          END;
          IF p_owner IS NOT NULL THEN
            RETURN QUERY \(LedgerSession.ownedQuery.replacingOccurrences(of: "$1", with: "p_owner"));
          END IF;
        END
        $fn$
        """

    /// The effects as the JSON `iapkit_apply` reads: an array of arrays, each the effect's name and its binds.
    static func json(_ effects: [LedgerEffect], events: Bool) throws -> String {
        var out = "[", first = true
        for effect in effects {
            guard let (op, binds) = try EffectStatements.binds(effect, events: events) else { continue }
            if !first { out += "," }
            first = false
            out += "[" + literal(.text(op.rawValue))
            for bind in binds { out += "," + literal(bind) }
            out += "]"
        }
        // jsonb refuses `\u0000` as text does a NUL: refused here as the binds are (``SQLValue/refuseNUL(in:)``).
        if StorableText.jsonCarriesNUL(out.utf8) { throw SQLValue.nulRefused }
        return out + "]"
    }

    /// A bind as a JSON literal, written by hand: the effects are small and this is on every purchase.
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
