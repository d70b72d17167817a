/// The ledger's tables, as numbered migrations applied in order on start. SQL common to SQLite and PostgreSQL:
/// dates are milliseconds since 1970 (BIGINT), booleans 0/1, ids TEXT.
enum Schema {

    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE orders (
                order_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, product_id TEXT NOT NULL,
                app_account_token TEXT NOT NULL UNIQUE, state TEXT NOT NULL, transaction_id TEXT,
                created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)
            """,
            "CREATE INDEX orders_account ON orders (account_id)",
            "CREATE INDEX orders_state ON orders (state, expires_at)",
            """
            CREATE TABLE purchases (
                transaction_id TEXT PRIMARY KEY, original_transaction_id TEXT NOT NULL, account_id TEXT, order_id TEXT,
                product_id TEXT NOT NULL, product_type TEXT NOT NULL, environment TEXT NOT NULL, quantity BIGINT NOT NULL,
                purchase_date BIGINT NOT NULL, expires_date BIGINT, revocation_date BIGINT, revocation_reason BIGINT,
                is_upgraded BIGINT NOT NULL, ownership TEXT, app_account_token TEXT, signed_date BIGINT NOT NULL,
                source TEXT NOT NULL, recorded_at BIGINT NOT NULL)
            """,
            "CREATE INDEX purchases_account ON purchases (account_id)",
            "CREATE INDEX purchases_original ON purchases (original_transaction_id)",
            "CREATE INDEX purchases_token ON purchases (app_account_token)",
            """
            CREATE TABLE balance_entries (
                entry_key TEXT PRIMARY KEY, account_id TEXT NOT NULL, currency TEXT NOT NULL, delta BIGINT NOT NULL,
                transaction_id TEXT, created_at BIGINT NOT NULL)
            """,
            "CREATE INDEX balance_entries_transaction ON balance_entries (transaction_id)",
            """
            CREATE TABLE balances (
                account_id TEXT NOT NULL, currency TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (account_id, currency))
            """,
            """
            CREATE TABLE subscriptions (
                original_transaction_id TEXT PRIMARY KEY, product_id TEXT, status BIGINT, expires_date BIGINT,
                grace_period_expires_date BIGINT, auto_renew BIGINT, auto_renew_product_id TEXT, signed_date BIGINT NOT NULL)
            """,
            """
            CREATE TABLE notifications (
                notification_uuid TEXT PRIMARY KEY, notification_type TEXT NOT NULL, subtype TEXT, signed_date BIGINT NOT NULL,
                transaction_id TEXT, original_transaction_id TEXT, signed_payload TEXT NOT NULL, received_at BIGINT NOT NULL)
            """,
            """
            CREATE TABLE conflicts (
                transaction_id TEXT NOT NULL, claimed_by TEXT NOT NULL, owner TEXT NOT NULL, first_seen BIGINT NOT NULL,
                attempts BIGINT NOT NULL, PRIMARY KEY (transaction_id, claimed_by))
            """,
            """
            CREATE TABLE audit_log (
                entry_id TEXT PRIMARY KEY, actor TEXT NOT NULL, action TEXT NOT NULL, subject TEXT NOT NULL, detail TEXT NOT NULL,
                created_at BIGINT NOT NULL)
            """,
        ],
        [
            """
            CREATE TABLE pending_proofs (
                proof_id TEXT PRIMARY KEY, account_id TEXT NOT NULL, order_id TEXT, kind TEXT NOT NULL, proof TEXT NOT NULL,
                state TEXT NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, last_error TEXT,
                created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)
            """,
            "CREATE INDEX pending_proofs_due ON pending_proofs (state, next_attempt_at)",
            "CREATE INDEX pending_proofs_order ON pending_proofs (order_id)",
            "ALTER TABLE orders ADD COLUMN note TEXT",
        ],
        [
            """
            CREATE TABLE device_reports (
                report_id TEXT PRIMARY KEY, transaction_id TEXT NOT NULL, account_id TEXT NOT NULL, signals TEXT NOT NULL,
                reported_at BIGINT NOT NULL)
            """,
            "CREATE INDEX device_reports_transaction ON device_reports (transaction_id)",
        ],
        [
            // The series' latest period (by purchase date) decides its product and expiry, not the latest-signed news.
            "ALTER TABLE subscriptions ADD COLUMN period_purchase_date BIGINT",
            "CREATE INDEX notifications_original ON notifications (original_transaction_id)",
            "CREATE INDEX notifications_received ON notifications (received_at)",
            "CREATE INDEX purchases_recorded ON purchases (recorded_at)",
            "CREATE INDEX balance_entries_account ON balance_entries (account_id)",
            "CREATE INDEX device_reports_account ON device_reports (account_id)",
            "CREATE INDEX audit_log_subject ON audit_log (subject)",
            "CREATE INDEX conflicts_owner ON conflicts (owner)",
            // What an account owns is read on every purchase; consumables (most rows, for some apps) do not count.
            "CREATE INDEX purchases_account_entitling ON purchases (account_id, product_type) WHERE product_type <> 'Consumable'",
        ],
        [
            // Signed app transactions an account presented (proof the app itself was obtained, sent instead of asking
            // the store for a receipt, which prompts for a sign-in).
            """
            CREATE TABLE app_transactions (
                app_transaction_id TEXT NOT NULL, account_id TEXT NOT NULL, bundle_id TEXT NOT NULL, environment TEXT NOT NULL,
                original_purchase_date BIGINT, original_application_version TEXT, first_seen BIGINT NOT NULL, last_seen BIGINT NOT NULL,
                PRIMARY KEY (app_transaction_id, account_id))
            """,
            "CREATE INDEX app_transactions_account ON app_transactions (account_id)",
        ],
        [
            // How far the reconciler has read Apple's notification history (milliseconds since 1970).
            "CREATE TABLE reconciler_cursors (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
        ],
        [
            // How much of a refunded transaction Apple refunded (API 1.19): a prorated refund claws back a consumable's
            // credit in proportion.
            "ALTER TABLE purchases ADD COLUMN revocation_type TEXT",
            "ALTER TABLE purchases ADD COLUMN revocation_percentage BIGINT",
        ],
        [
            // The customer's app download (appTransactionId): a key of their install history across devices.
            "ALTER TABLE purchases ADD COLUMN app_transaction_id TEXT",
        ],
        [
            // Whether a customer agreed to have their consumption data sent to Apple with a refund request; the app
            // transactions a guardian withdrew consent for (RESCIND_CONSENT); and the answers owed to Apple, one per
            // CONSUMPTION_REQUEST, written with the notification and sent until answered or due.
            "CREATE TABLE consumption_consents (account_id TEXT PRIMARY KEY, consented BIGINT NOT NULL, changed_at BIGINT NOT NULL, source TEXT NOT NULL)",
            "CREATE TABLE rescinded_app_transactions (app_transaction_id TEXT PRIMARY KEY, signed_date BIGINT NOT NULL)",
            """
            CREATE TABLE consumption_answers (
                notification_uuid TEXT PRIMARY KEY, transaction_id TEXT NOT NULL, state TEXT NOT NULL, due_by BIGINT NOT NULL,
                claimed_at BIGINT, account_id TEXT, body TEXT, answered_at BIGINT)
            """,
            "CREATE INDEX consumption_answers_state ON consumption_answers (state, due_by)",
            "CREATE INDEX purchases_app_transaction ON purchases (app_transaction_id)",
        ],
        [
            // Outgoing webhooks: events for the app's backend, written with the change they report and delivered at least
            // once; claimed by one sender at a time (claimed_until), retried with backoff, failed after the last attempt.
            """
            CREATE TABLE webhook_events (
                event_id TEXT PRIMARY KEY, type TEXT NOT NULL, account_id TEXT, body TEXT NOT NULL, state TEXT NOT NULL,
                attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, claimed_until BIGINT, last_error TEXT,
                created_at BIGINT NOT NULL, delivered_at BIGINT)
            """,
            "CREATE INDEX webhook_events_due ON webhook_events (state, next_attempt_at)",
            "CREATE INDEX webhook_events_created ON webhook_events (created_at)",
        ],
        [
            // When the reconciler last asked Apple about a stale subscription series, about which expiry, how often
            // since it went stale, and when it may ask again: the least recently asked go first, so a pass's limit
            // cannot keep older series waiting behind the same newest ones.
            """
            CREATE TABLE subscription_checks (
                original_transaction_id TEXT PRIMARY KEY, expires_date BIGINT NOT NULL, asks BIGINT NOT NULL,
                checked_at BIGINT NOT NULL, next_check_at BIGINT NOT NULL)
            """,
            "CREATE INDEX subscription_checks_checked ON subscription_checks (checked_at)",
        ],
        [
            // Reads that grew with an account's or a series' history (docs/LEDGER.md). PostgreSQL's planner preferred the
            // plain account index to the two-column entitling one and read every consumable on each answer: keyed by the
            // account alone, both databases use it. A series' first or latest holder is one index step, not every period
            // read and sorted. The reconciler, the open-orders pass and the webhook prune read their window, not the table.
            // New names and IF NOT EXISTS: an operator of a large PostgreSQL ledger may build them beforehand with
            // CREATE INDEX CONCURRENTLY, and this migration then takes no lock that holds up purchases.
            // The drops come last: a DROP INDEX locks out reads too, the builds before it only writes.
            "CREATE INDEX IF NOT EXISTS purchases_entitling ON purchases (account_id) WHERE product_type <> 'Consumable'",
            "CREATE INDEX IF NOT EXISTS purchases_series ON purchases (original_transaction_id, purchase_date)",
            "CREATE INDEX IF NOT EXISTS purchases_expires ON purchases (expires_date)",
            "CREATE INDEX IF NOT EXISTS orders_state_created ON orders (state, created_at)",
            "CREATE INDEX IF NOT EXISTS webhook_events_delivered ON webhook_events (state, delivered_at)",
            "DROP INDEX IF EXISTS purchases_account_entitling",
            "DROP INDEX IF EXISTS purchases_original",
        ],
        [
            // The webhook sender's claim is one index step in the order it sends: events as they fell due (a new one
            // when written, a retry when its backoff ended, a replay when asked). Through (state, next_attempt_at)
            // every due event was read and sorted on each claim: after a receiver's outage, a backlog of N events took
            // N claims of N rows each.
            "CREATE INDEX IF NOT EXISTS webhook_events_due_order ON webhook_events (state, next_attempt_at, created_at, event_id)",
            "DROP INDEX IF EXISTS webhook_events_due",
        ],
        keyTestEnvironmentsApart,
        [
            // A held transaction id is rejected as unknown to Apple only after several such answers (the reconciler),
            // not one late answer. And an account's held proofs are counted on each hold (its limit) and taken in turns
            // by the reconciler's claim: one index step into that account's pending proofs, not a read of all of them.
            "ALTER TABLE pending_proofs ADD COLUMN not_found_answers INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX IF NOT EXISTS pending_proofs_account_waiting ON pending_proofs (account_id, next_attempt_at) WHERE state = 'pending'",
        ],
        [
            // One spelling for audit actions (`AuditAction`): the few the ledger wrote in snake_case read as the
            // operator's kebab-case ones do. Nothing is read back by these actions (only `sign-out` is, and it was
            // kebab-case already), so a replica of the version before that still writes the old spelling during a
            // rolling upgrade loses nothing.
            """
            UPDATE audit_log SET action = REPLACE(action, '_', '-')
            WHERE action = 'app_account_token_assigned' OR action LIKE 'consumption\\_%' ESCAPE '\\'
            """,
        ],
        [
            // The app says when an order's payment ended with nothing charged (the customer cancelled the sheet, the store
            // refused it): such an order is not a lost order, and the operator's `stuck` list leaves it out.
            "ALTER TABLE orders ADD COLUMN abandoned_at BIGINT",
            "ALTER TABLE orders ADD COLUMN abandon_reason TEXT",
        ],
        [
            // The rest of Apple's renewal info, for the app's UI beside auto-renew: why the series expired or will
            // (expirationIntent), whether Apple is retrying a failed renewal (isInBillingRetryPeriod, 0/1), and the
            // customer's answer to a price increase (priceIncreaseStatus). Nullable: rows written before stay as they were.
            "ALTER TABLE subscriptions ADD COLUMN expiration_intent BIGINT",
            "ALTER TABLE subscriptions ADD COLUMN billing_retry BIGINT",
            "ALTER TABLE subscriptions ADD COLUMN price_increase_status BIGINT",
        ],
        [
            // A device's renewal info (StoreKit's, uploaded with a purchase or a restore) carries no status: it is dated
            // apart, so that it never makes the App Store's status of the series look newer than Apple signed it.
            "ALTER TABLE subscriptions ADD COLUMN device_renewal_signed_date BIGINT",
        ],
        [
            // The money of each transaction, as Apple signed it: price in milliunits of currency, the offer it was
            // bought under (offerType an integer, offerDiscountType Apple's string), its period, the storefront. NULL is
            // unknown (a receipt-only purchase, or a row stored before this migration: not backfilled, see
            // docs/LEDGER.md), never 0: a free trial's price 0 is a real 0.
            "ALTER TABLE purchases ADD COLUMN price BIGINT",
            "ALTER TABLE purchases ADD COLUMN currency TEXT",
            "ALTER TABLE purchases ADD COLUMN offer_type BIGINT",
            "ALTER TABLE purchases ADD COLUMN offer_discount_type TEXT",
            "ALTER TABLE purchases ADD COLUMN offer_period TEXT",
            "ALTER TABLE purchases ADD COLUMN storefront TEXT",
        ],
        [
            // The business view's daily rollup (``MetricRules``): what transactions and notifications added to each
            // UTC day, per environment, product, currency and kind; filled by the metrics reads from rows recorded
            // before a watermark (`metric_watermarks`), never by the purchase path. Rebuilt from the rows by emptying
            // both tables (docs/METRICS.md).
            """
            CREATE TABLE metric_days (
                day BIGINT NOT NULL, environment TEXT NOT NULL, kind TEXT NOT NULL, product_id TEXT NOT NULL, currency TEXT NOT NULL,
                count BIGINT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (environment, kind, day, product_id, currency))
            """,
            "CREATE TABLE metric_watermarks (source TEXT PRIMARY KEY, recorded_before BIGINT NOT NULL)",
            // Refunds, revocations and upgrades, read for the revenue and the active counts: a few rows of many, in an
            // index a new purchase almost never enters (it is neither revoked nor upgraded yet).
            "CREATE INDEX IF NOT EXISTS purchases_revoked ON purchases (revocation_date) WHERE revocation_date IS NOT NULL OR is_upgraded = 1",
        ],
        [
            // A transaction the rollup summed and news then changed (an expiry Apple extended, a price or offer learnt
            // after a receipt-only record): its old facts, taken back from the rollup by the next read that fills it,
            // while the row itself is summed again with the new ones (its recorded_at moved up to the watermark).
            """
            CREATE TABLE metric_retractions (
                transaction_id TEXT NOT NULL, original_transaction_id TEXT NOT NULL, product_id TEXT NOT NULL, product_type TEXT NOT NULL,
                purchase_date BIGINT NOT NULL, expires_date BIGINT, price BIGINT, currency TEXT, ownership TEXT, offer_discount_type TEXT,
                offer_period TEXT, environment TEXT NOT NULL)
            """,
            // Free-trial periods, for trial conversions counted from the rows themselves (a conversion depends on the
            // period before it, which may arrive after).
            "CREATE INDEX IF NOT EXISTS purchases_trials ON purchases (original_transaction_id, purchase_date) WHERE offer_discount_type = 'FREE_TRIAL'",
            // The rollup's kinds changed with this migration (first trials apart, conversions from the rows): summed
            // again from the rows by the next read.
            "DELETE FROM metric_days",
            "DELETE FROM metric_watermarks",
        ],
        [
            // The business view's instant (``Ledger/seriesStates``) read from indexes alone: each running period, whether
            // a later period of its series has ended, and the series' status, without a step into either table (three
            // table steps per live series were most of an overview at a million purchases; docs/METRICS.md). The running
            // periods' index holds only rows with an expiry: a consumable or non-consumable, most purchases, no longer
            // enters any expiry index at all. Refunds and revocations, a few rows of many, carry what the revenue and the
            // revoked periods read.
            // The drops first here: on SQLite at a million purchases, the drops after the builds in one transaction
            // failed with "database or disk is full" (disk and memory to spare; not reproduced through the C API alone).
            // PostgreSQL builds them before (``postgresPreparations``), so that its drops still come last.
            "DROP INDEX IF EXISTS purchases_expires",
            "DROP INDEX IF EXISTS purchases_series",
            "DROP INDEX IF EXISTS purchases_revoked",
        ] + metricIndexes + [
            // A ledger analysed before (an operator's ANALYZE) has statistics for the primary key of `subscriptions`
            // and none for the new index: SQLite then took the key (one row, by its statistics) and a step into the
            // table per series over the index that holds all the instant reads. Both analysed, it takes the index.
            "ANALYZE subscriptions",
        ],
        [
            // The instant skips its later-period check for a period that is its series' latest by
            // `period_purchase_date` (``Ledger/runningPeriodsQuery(anyEnvironment:)``). Every period stored since
            // migration 9 moves that date on (``SubmissionRules/seriesPeriod(_:)``); a series whose row is older, or
            // behind a period stored before it, is set here to its latest period, as that effect would have set it.
            """
            UPDATE subscriptions SET
                product_id = (\(latestPeriod("product_id"))),
                expires_date = (\(latestPeriod("expires_date"))),
                period_purchase_date = (\(latestPeriod("purchase_date")))
            WHERE EXISTS (SELECT 1 FROM purchases p WHERE p.original_transaction_id = subscriptions.original_transaction_id
                            AND p.product_type = 'Auto-Renewable Subscription'
                            AND (subscriptions.period_purchase_date IS NULL OR p.purchase_date > subscriptions.period_purchase_date))
            """,
        ],
    ]

    /// Migration 24: a column of the series' latest period (by purchase date, then expiry, as the series effect keeps it).
    private static func latestPeriod(_ column: String) -> String {
        """
        SELECT p.\(column) FROM purchases p WHERE p.original_transaction_id = subscriptions.original_transaction_id
            AND p.product_type = 'Auto-Renewable Subscription' ORDER BY p.purchase_date DESC, p.expires_date DESC LIMIT 1
        """
    }

    /// Migration 23's indexes (IF NOT EXISTS: an operator may build them beforehand, CREATE INDEX CONCURRENTLY).
    static let metricIndexes = [
        "CREATE INDEX IF NOT EXISTS purchases_periods ON purchases (\(livePeriodColumns)) WHERE expires_date IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS purchases_series_ends ON purchases (original_transaction_id, purchase_date, expires_date)",
        "CREATE INDEX IF NOT EXISTS subscriptions_state ON subscriptions (original_transaction_id, signed_date, status, grace_period_expires_date, period_purchase_date)",
        "CREATE INDEX IF NOT EXISTS purchases_revocations ON purchases (\(revocationColumns)) WHERE revocation_date IS NOT NULL OR is_upgraded = 1",
    ]

    /// The running periods' index: its leading column the expiry the instant ranges over, then every column the
    /// instant's rules read of a period (``Ledger/seriesPeriodColumns``), so that no read steps into the table.
    static let livePeriodColumns = """
        expires_date, product_type, environment, purchase_date, original_transaction_id, transaction_id, product_id, revocation_date, \
        is_upgraded, ownership, signed_date, price, currency, offer_discount_type, offer_period
        """
    /// The refunds' and revocations' index: what the revenue's refunds and the revoked periods read.
    static let revocationColumns = """
        revocation_date, environment, is_upgraded, product_type, ownership, revocation_type, currency, price, revocation_percentage, \
        product_id, purchase_date, expires_date, offer_discount_type, offer_period, original_transaction_id
        """

    /// Statements run on PostgreSQL just before a migration (by its number). Before 12: an index an operator began
    /// with CREATE INDEX CONCURRENTLY and that was cancelled stays behind invalid under its name; IF NOT EXISTS would
    /// take it and the old index would be dropped, leaving every purchase to read the whole table.
    /// Before 23: the builds, so that the migration's drops come after them (a DROP INDEX locks out reads until the
    /// commit, a build only writes).
    static let postgresPreparations: [Int: [String]] = [
        12: [dropInvalidIndexes(["purchases_entitling", "purchases_series", "purchases_expires", "orders_state_created", "webhook_events_delivered"])],
        13: [dropInvalidIndexes(["webhook_events_due_order"])],
        15: [dropInvalidIndexes(["pending_proofs_account_waiting"])],
        23: [dropInvalidIndexes(["purchases_periods", "purchases_series_ends", "subscriptions_state", "purchases_revocations"])] + metricIndexes,
    ]

    private static func dropInvalidIndexes(_ names: [String]) -> String {
        """
        DO $$
        DECLARE invalid record;
        BEGIN
          FOR invalid IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE NOT i.indisvalid AND c.relname IN (\(names.map { "'\($0)'" }.joined(separator: ", "))) LOOP
            EXECUTE 'DROP INDEX ' || quote_ident(invalid.relname);
          END LOOP;
        END
        $$
        """
    }

    /// How long a start waits for a lock on PostgreSQL before it fails (and can be retried): a migration queued
    /// behind a long report or dump would otherwise hold up every purchase queued behind it.
    static let postgresLockTimeout = "10s"

    /// Applies the migrations not yet applied, all in one transaction: a start that fails half-way leaves the schema as
    /// it was, and a start over an up-to-date ledger is one write. On PostgreSQL an advisory lock keeps two replicas
    /// starting together from racing.
    static func migrate(_ store: any SQLLedgerStore) async throws {
        let postgres = store.kind == .postgres
        try await store.write { sql in
            if postgres {
                _ = try await sql.rows("SELECT pg_advisory_xact_lock(727274)", [])
                // After the advisory lock: a replica waiting for another's migration to finish must not give up.
                _ = try await sql.rows("SET LOCAL lock_timeout = '\(postgresLockTimeout)'", [])
            }
            _ = try await sql.rows("CREATE TABLE IF NOT EXISTS ledger_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
            let applied = Set(try await sql.rows("SELECT version FROM ledger_migrations", []).map { try $0.int(0) })
            for (index, statements) in migrations.enumerated() where !applied.contains(Int64(index + 1)) {
                if postgres { for preparation in postgresPreparations[index + 1] ?? [] { _ = try await sql.rows(preparation, []) } }
                for statement in statements { _ = try await sql.rows(statement, []) }
                _ = try await sql.rows("INSERT INTO ledger_migrations (version, applied_at) VALUES ($1, $2)", [.int(Int64(index + 1)), .int(Millis.now)])
            }
            // The effect interpreter is code, not schema: each version installs its own body under its own name
            // (``PostgresFunctions/applyFunction``) on every start, and calls only that one.
            if postgres {
                _ = try await sql.rows(PostgresFunctions.applyEffects, [])
                try await storeSignedPayloadsAsTheyAre(sql)
            }
        }
    }

    /// A notification's signed payload (~8 KB of base64 wrapping base64) is stored on PostgreSQL as it is, out of line
    /// (`EXTERNAL`). By default PostgreSQL tried to compress every one first, saved nothing (pglz gives up below 25 %),
    /// and that attempt was most of the cost of storing a notification: 180–240 µs an insert, against 70–100 µs without
    /// it (docs/LEDGER.md). A catalog change, but one that waits for an exclusive lock on `notifications`, and every
    /// webhook delivery queues behind the wait: it is tried on each start for at most a second, in a savepoint, and a
    /// start that cannot have the lock goes on without it (it saves time and nothing rests on it). Rows stored before
    /// stay as they are and read the same.
    static func storeSignedPayloadsAsTheyAre(_ sql: any SQLExecutor) async throws {
        _ = try await sql.rows("SAVEPOINT iapkit_signed_payload_storage", [])
        do {
            _ = try await sql.rows("""
                DO $$
                BEGIN
                  IF (SELECT attstorage FROM pg_attribute WHERE attrelid = 'notifications'::regclass AND attname = 'signed_payload') <> 'e' THEN
                    PERFORM set_config('lock_timeout', '1s', true);
                    ALTER TABLE notifications ALTER COLUMN signed_payload SET STORAGE EXTERNAL;
                  END IF;
                END
                $$
                """, [])
            _ = try await sql.rows("RELEASE SAVEPOINT iapkit_signed_payload_storage", [])
        } catch {
            _ = try await sql.rows("ROLLBACK TO SAVEPOINT iapkit_signed_payload_storage", [])
        }
    }
}
