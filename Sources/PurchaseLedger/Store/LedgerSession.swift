import AppStoreFormats
import Foundation
import PurchaseAPI

/// The ledger's rows read and written through one connection: the facts the rules ask for, and the effects they
/// decide on, in the SQL that SQLite and PostgreSQL share. The operator's reads, held proofs and app transactions
/// write their few statements in their own `Ledger+…` files through `sql`; no SQL type leaves `PurchaseLedger`.
struct LedgerSession {
    let sql: any SQLExecutor
    /// PostgreSQL runs operations concurrently (READ COMMITTED): decisions about one series take its lock first.
    let postgres: Bool
    /// Write `emitEvent` effects (``Ledger/recordsWebhookEvents``).
    let events: Bool
    /// The series locks this transaction holds: taking one again is a round trip that changes nothing.
    private let locked = HeldLocks()

    final class HeldLocks {
        var series: Set<String> = []
    }

    init(_ sql: any SQLExecutor, postgres: Bool = false, events: Bool = true) {
        self.sql = sql
        self.postgres = postgres
        self.events = events
    }

    /// Serialises operations on one subscription series (or one transaction) until this transaction ends. SQLite has
    /// one writer: nothing to do.
    func lockSeries(_ originalTransactionId: String) throws {
        guard postgres, !locked.series.contains(originalTransactionId) else { return }
        _ = try sql.rows("SELECT pg_advisory_xact_lock(hashtextextended($1, 727274))", [.text(originalTransactionId)])
        locked.series.insert(originalTransactionId)
    }

    // MARK: Orders

    static let orderColumns = "order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, abandoned_at, abandon_reason"

    func insertOrder(_ order: Order, at now: Date) throws {
        try sql.execute("""
            INSERT INTO orders (order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, updated_at)
            VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8)
            """, [.text(order.orderId), .text(order.accountId), .text(order.productId), .text(order.appAccountToken.lowercasedString),
                  .text(order.state.rawValue), .of(order.createdAt), .of(order.expiresAt), .of(now)])
    }

    func order(id: String) throws -> Order? {
        try sql.first("SELECT \(Self.orderColumns) FROM orders WHERE order_id = $1", [.text(id)]).map(Self.decodeOrder)
    }

    func order(appAccountToken token: UUID) throws -> Order? {
        try sql.first("SELECT \(Self.orderColumns) FROM orders WHERE app_account_token = $1", [.text(token.lowercasedString)])
            .map(Self.decodeOrder)
    }

    func orders(where condition: String, _ binds: [SQLValue], limit: Int) throws -> [Order] {
        try sql.rows("SELECT \(Self.orderColumns) FROM orders o WHERE \(condition) ORDER BY o.created_at DESC LIMIT \(max(1, min(limit, 10_000)))", binds)
            .map(Self.decodeOrder)
    }

    static func decodeOrder(_ row: SQLRow) throws -> Order {
        Order(orderId: try row.text(0), accountId: try row.text(1), productId: try row.text(2),
              appAccountToken: UUID(uuidString: try row.text(3)) ?? UUID(), state: Order.State(rawValue: try row.text(4)) ?? .created,
              transactionId: row.optionalText(5), createdAt: Millis.date(try row.int(6)), expiresAt: Millis.date(try row.int(7)),
              abandonedAt: row.optionalInt(8).map(Millis.date), abandonReason: row.optionalText(9))
    }

    // MARK: Transactions

    /// The columns entitlements are judged by (the shape of ``ownedQuery``'s rows and `iapkit_apply`'s answer).

    static let entitlingColumns = """
        transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment, quantity, purchase_date, \
        expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token, signed_date
        """
    /// Every column of a stored transaction: the entitling ones, then how much of it Apple refunded, then its money.
    static let purchaseColumns = entitlingColumns + ", revocation_type, revocation_percentage, app_transaction_id" + moneyColumns
    /// What the customer paid and under which offer (``PurchaseRecord/price`` and after): NULL where unknown.
    static let moneyColumns = ", price, currency, offer_type, offer_discount_type, offer_period, storefront"
    /// How many columns ``purchaseColumns`` names (the facts row's slice of the stored transaction).
    static let purchaseColumnCount = purchaseColumns.split(separator: ",").count

    func purchase(_ transactionId: String) throws -> PurchaseRecord? {
        try sql.first("SELECT \(Self.purchaseColumns) FROM purchases WHERE transaction_id = $1", [.text(transactionId)]).map(Self.decodePurchase)
    }

    func purchases(accountId: String) throws -> [PurchaseRecord] {
        try sql.rows("SELECT \(Self.purchaseColumns) FROM purchases WHERE account_id = $1 ORDER BY purchase_date, transaction_id", [.text(accountId)])
            .map(Self.decodePurchase)
    }

    /// The account's purchases that can carry an entitlement (no consumables), through the entitling index: an account
    /// with thousands of coin purchases costs no more to judge for an offer than one with none.
    func entitlingPurchases(accountId: String) throws -> [PurchaseRecord] {
        try sql.rows(Self.entitlingPurchasesQuery, [.text(accountId)]).map(Self.decodePurchase)
    }

    static let entitlingPurchasesQuery = """
        SELECT \(purchaseColumns) FROM purchases WHERE account_id = $1 AND product_type <> 'Consumable'
        ORDER BY purchase_date, transaction_id
        """

    func purchases(where condition: String, _ binds: [SQLValue], limit: Int) throws -> [PurchaseRecord] {
        try sql.rows("""
            SELECT \(Self.purchaseColumns) FROM purchases WHERE \(condition) ORDER BY recorded_at DESC, transaction_id LIMIT \(max(1, min(limit, 10_000)))
            """, binds).map(Self.decodePurchase)
    }

    static func decodePurchase(_ row: SQLRow) throws -> PurchaseRecord {
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = try row.text(0)
        payload.originalTransactionId = try row.text(1)
        payload.productId = try row.text(4)
        payload.type = ProductType(rawValue: try row.text(5))
        payload.environment = AppStoreEnvironment(rawValue: try row.text(6))
        payload.quantity = Int(try row.int(7))
        payload.purchaseDate = Millis.date(try row.int(8))
        payload.expiresDate = row.optionalInt(9).map(Millis.date)
        payload.revocationDate = row.optionalInt(10).map(Millis.date)
        payload.revocationReason = row.optionalInt(11).map { RevocationReason(rawValue: Int($0)) }
        payload.isUpgraded = try row.int(12) != 0
        payload.inAppOwnershipType = row.optionalText(13).map(InAppOwnershipType.init(rawValue:))
        payload.appAccountToken = row.optionalText(14).flatMap(UUID.init(uuidString:))
        payload.signedDate = Millis.date(try row.int(15))
        payload.revocationType = row.optionalText(16).map(RevocationType.init(rawValue:))
        payload.revocationPercentage = row.optionalInt(17).map { Int(clamping: $0) }
        payload.appTransactionId = row.optionalText(18)
        payload.price = row.optionalInt(19)
        payload.currency = row.optionalText(20)
        payload.offerType = row.optionalInt(21).map { OfferType(rawValue: Int($0)) }
        payload.offerDiscountType = row.optionalText(22).map(OfferDiscountType.init(rawValue:))
        payload.offerPeriod = row.optionalText(23)
        payload.storefront = row.optionalText(24)
        var record = try PurchaseRecord(keyed: payload)
        record.accountId = row.optionalText(2)
        record.orderId = row.optionalText(3)
        return record
    }

    /// Everything the binding rules need about `record`, with the order the uploader named: one statement (one round
    /// trip on PostgreSQL), and a second only for a stored consumable's balance movements.
    func facts(for record: PurchaseRecord, namedOrderId: String?, catalog: LedgerCatalog) throws -> TransactionFacts {
        guard let row = try sql.first(Self.factsQuery, Self.factsBinds(record, namedOrderId: namedOrderId)) else {
            throw LedgerError(.storage, "the facts query returned no row")
        }
        var facts = try Self.decodeFacts(row)
        if Self.needsEntries(facts, record, catalog) {
            facts.entries = try balanceEntries(transactionId: record.transactionId)
            facts.entriesRead = true
        }
        return facts
    }

    static func factsBinds(_ record: PurchaseRecord, namedOrderId: String?) -> [SQLValue] {
        [.of(namedOrderId), .of(record.appAccountToken?.lowercasedString), .text(record.transactionId), .text(record.originalTransactionId),
         .of(record.previousOriginalTransactionId)]
    }

    static func decodeFacts(_ row: SQLRow) throws -> TransactionFacts {
        var facts = TransactionFacts()
        facts.namedOrder = try slice(row, from: 0, count: 8).map(decodeOrder)
        facts.tokenOrder = try slice(row, from: 8, count: 8).map(decodeOrder)
        let after = 16 + purchaseColumnCount
        facts.stored = try slice(row, from: 16, count: purchaseColumnCount).map(decodePurchase)
        if facts.stored?.accountId == nil {
            facts.seriesOwner = row.optionalText(after)
            facts.previousSeriesOwner = row.optionalText(after + 1)
        }
        facts.seriesEnvironment = row.optionalText(after + 2).map(AppStoreEnvironment.init(rawValue:))
        return facts
    }

    /// Closes an order that is still open as `settled`; false when it was not open any more (paid, or settled, since it
    /// was read: on PostgreSQL the update waits for a payment's row lock and then finds the order granted).
    func settleOpenOrder(orderId: String, note: String, at now: Date) throws -> Bool {
        try !sql.rows("UPDATE orders SET state = 'settled', note = $1, updated_at = $2 WHERE order_id = $3 AND state = 'created' RETURNING order_id",
                      [.text(note), .of(now), .text(orderId)]).isEmpty
    }

    /// A stored consumable's credit is settled against its movements so far; nothing else needs them.
    static func needsEntries(_ facts: TransactionFacts, _ record: PurchaseRecord, _ catalog: LedgerCatalog) -> Bool {
        facts.stored != nil && catalog.rule(for: record.productId)?.type == .consumable
    }

    /// The environment of the first stored period of the series `original` names (a placeholder or an expression).
    static func seriesEnvironmentQuery(_ original: String) -> String {
        "SELECT s.environment FROM purchases s WHERE s.original_transaction_id = \(original) ORDER BY s.purchase_date LIMIT 1"
    }

    /// The account of the series' earliest bound period (its owner) or of its latest (its holder now), for the facts
    /// and, the same, for the preconditions that check them (here and in `iapkit_apply`).
    static func seriesHolderQuery(_ original: String, latest: Bool) -> String {
        """
        SELECT s.account_id FROM purchases s WHERE s.original_transaction_id = \(original) AND s.account_id IS NOT NULL \
        ORDER BY s.purchase_date\(latest ? " DESC" : "") LIMIT 1
        """
    }

    /// What a decision on PostgreSQL presumed, read again under the series' lock: the series' environment and owner
    /// ($1), the transaction's balance movements and stored signing date ($2), the latest holder of the series it was
    /// migrated from ($3). The decision says which of them it rests on.
    static let preconditionsQuery = """
        SELECT (\(seriesEnvironmentQuery("$1"))), (\(seriesHolderQuery("$1", latest: false))),
            (SELECT COUNT(*) FROM balance_entries WHERE transaction_id = $2), (SELECT signed_date FROM purchases WHERE transaction_id = $2),
            (\(seriesHolderQuery("$3", latest: true)))
        """

    /// The named order, the token's order, the stored transaction, the series' owner and the holder of the latest
    /// period of the series it was migrated from (a resubscription paid through another account's order is that
    /// account's), each NULL when absent.
    static let factsQuery = """
        SELECT n.order_id, n.account_id, n.product_id, n.app_account_token, n.state, n.transaction_id, n.created_at, n.expires_at,
            t.order_id, t.account_id, t.product_id, t.app_account_token, t.state, t.transaction_id, t.created_at, t.expires_at,
            \(purchaseColumns.split(separator: ",").map { "p." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", ")),
            (\(seriesHolderQuery("$4", latest: false))),
            (\(seriesHolderQuery("$5", latest: true))),
            (\(seriesEnvironmentQuery("$4")))
        FROM (SELECT 1 AS one) AS base
        LEFT JOIN orders n ON n.order_id = $1
        LEFT JOIN orders t ON t.app_account_token = $2
        LEFT JOIN purchases p ON p.transaction_id = $3
        """

    /// Columns `from..<from+count` of `row` as a row of their own, or nil when the join found nothing (its key is NULL).
    static func slice(_ row: SQLRow, from: Int, count: Int) -> SQLRow? {
        guard from < row.values.count, row.values[from] != .null else { return nil }
        return SQLRow(Array(row.values[from..<min(row.values.count, from + count)]))
    }

    // MARK: Balances

    func balanceEntries(transactionId: String) throws -> [BalanceEntry] {
        try sql.rows(Self.entriesQuery, [.text(transactionId)]).map(Self.decodeEntry)
    }

    static let entriesQuery = "SELECT entry_key, account_id, currency, delta, transaction_id, created_at FROM balance_entries WHERE transaction_id = $1"

    func balanceEntries(accountId: String, limit: Int) throws -> [BalanceEntry] {
        try sql.rows("""
            SELECT entry_key, account_id, currency, delta, transaction_id, created_at FROM balance_entries WHERE account_id = $1
            ORDER BY created_at DESC LIMIT \(max(1, min(limit, 10_000)))
            """, [.text(accountId)]).map(Self.decodeEntry)
    }

    /// A spend's facts in one read: the movement stored under its key (nil when none) and the balance now.
    func spendFacts(key: String, accountId: String, currency: String) throws -> (earlier: BalanceEntry?, balance: Int64) {
        guard let row = try sql.first("""
            SELECT e.entry_key, e.account_id, e.currency, e.delta, e.transaction_id, e.created_at,
                (SELECT amount FROM balances WHERE account_id = $2 AND currency = $3)
            FROM (SELECT 1 AS one) o LEFT JOIN balance_entries e ON e.entry_key = $1
            """, [.text(key), .text(accountId), .text(currency)]) else { return (nil, 0) }
        return (row.optionalText(0) == nil ? nil : try Self.decodeEntry(row), row.optionalInt(6) ?? 0)
    }

    static func decodeEntry(_ row: SQLRow) throws -> BalanceEntry {
        BalanceEntry(key: try row.text(0), accountId: try row.text(1), currency: try row.text(2), delta: try row.int(3),
                     transactionId: row.optionalText(4), at: Millis.date(try row.int(5)))
    }

    func balance(accountId: String, currency: String) throws -> Int64 {
        try sql.first("SELECT amount FROM balances WHERE account_id = $1 AND currency = $2", [.text(accountId), .text(currency)])?.int(0) ?? 0
    }

    // MARK: Subscriptions

    static let seriesColumns = """
        original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew, auto_renew_product_id, signed_date,
        period_purchase_date, expiration_intent, billing_retry, price_increase_status
        """

    /// Whether any period of the series is stored.
    func knowsSeries(_ originalTransactionId: String) throws -> Bool {
        try sql.first("SELECT 1 FROM purchases WHERE original_transaction_id = $1 LIMIT 1", [.text(originalTransactionId)]) != nil
    }

    func series(_ originalTransactionId: String) throws -> SubscriptionRecord? {
        try sql.first("SELECT \(Self.seriesColumns) FROM subscriptions WHERE original_transaction_id = $1", [.text(originalTransactionId)])
            .map(Self.decodeSeries)
    }

    static func decodeSeries(_ row: SQLRow) throws -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: try row.text(0), productId: row.optionalText(1), status: row.optionalInt(2).map { SubscriptionStatus(rawValue: Int($0)) },
            expiresDate: row.optionalInt(3).map(Millis.date), gracePeriodExpiresDate: row.optionalInt(4).map(Millis.date),
            autoRenew: row.optionalInt(5).map { $0 != 0 }, autoRenewProductId: row.optionalText(6), signedDate: Millis.date(try row.int(7)),
            periodPurchaseDate: row.optionalInt(8).map(Millis.date), expirationIntent: row.optionalInt(9).map { ExpirationIntent(rawValue: Int($0)) },
            isInBillingRetryPeriod: row.optionalInt(10).map { $0 != 0 }, priceIncreaseStatus: row.optionalInt(11).map { PriceIncreaseStatus(rawValue: Int($0)) })
    }

    // MARK: Entitlements

    /// What the account owns at `now`: its entitling transactions, their series' status and its balances, read in
    /// one statement (one round trip on PostgreSQL; `/health` and every purchase answer ask for it) and judged by
    /// ``EntitlementRules``.
    func entitlements(accountId: String, catalog: LedgerCatalog, now: Date) throws -> AccountEntitlements {
        try Self.owned(try sql.rows(Self.ownedQuery, [.text(accountId)]), accountId: accountId, catalog: catalog, now: now)
    }

    /// Judges the rows of ``ownedQuery``.
    static func owned(_ rows: [SQLRow], accountId: String, catalog: LedgerCatalog, now: Date) throws -> AccountEntitlements {
        var purchases: [PurchaseRecord] = []
        var series: [String: SubscriptionRecord] = [:]
        var balances: [String: Int64] = [:]
        for row in rows {
            let rest = SQLRow(Array(row.values.dropFirst()))
            switch try row.text(0) {
            case "p":
                purchases.append(try decodePurchase(rest))
            case "s":
                let record = SubscriptionRecord(
                    originalTransactionId: try rest.text(0), productId: rest.optionalText(1), status: rest.optionalInt(7).map { SubscriptionStatus(rawValue: Int($0)) },
                    expiresDate: rest.optionalInt(8).map(Millis.date), gracePeriodExpiresDate: rest.optionalInt(9).map(Millis.date),
                    autoRenew: rest.optionalInt(10).map { $0 != 0 }, autoRenewProductId: rest.optionalText(2), signedDate: Millis.date(try rest.int(15)),
                    periodPurchaseDate: rest.optionalInt(11).map(Millis.date), expirationIntent: rest.optionalInt(12).map { ExpirationIntent(rawValue: Int($0)) },
                    isInBillingRetryPeriod: rest.optionalText(3).flatMap { Int64($0) }.map { $0 != 0 },
                    priceIncreaseStatus: rest.optionalText(4).flatMap { Int($0) }.map(PriceIncreaseStatus.init(rawValue:)))
                series[record.originalTransactionId] = record
            default:
                balances[try rest.text(0)] = try rest.int(7)
            }
        }
        let owned = EntitlementRules.entitlements(purchases: purchases, subscriptions: series, catalog: catalog, now: now,
                                                  clockLagAllowance: EntitlementRules.clockLagAllowance)
        return AccountEntitlements(accountId: accountId, entitlements: owned, balances: balances)
    }

    /// Rows of three kinds in the purchase row's shape: `p` an entitling transaction, `s` a series' status (its
    /// columns placed where their types match; billing retry and price-increase status as text, where a text column
    /// was free), `b` a balance. ``PostgresFunctions``' interpreter answers the same rows. Both reads of `purchases` repeat the partial index's
    /// `product_type <> 'Consumable'`: SQLite uses a partial index only for a query that states its condition, and
    /// without it read every coin purchase the account ever made, once per answer. The series are found from the account's
    /// own purchases (a DISTINCT the planner cannot fold into a semi-join): written as `IN (…)`, PostgreSQL with a few
    /// dozen series in the table chose a merge semi-join that read every purchase of every series, in series order.
    static let ownedQuery = """
        SELECT 'p', \(entitlingColumns) FROM purchases WHERE account_id = $1 AND product_type <> 'Consumable'
        UNION ALL
        SELECT 's', s.original_transaction_id, s.product_id, s.auto_renew_product_id, CAST(s.billing_retry AS TEXT),
            CAST(s.price_increase_status AS TEXT), NULL, NULL, s.status, s.expires_date, s.grace_period_expires_date, s.auto_renew,
            s.period_purchase_date, s.expiration_intent, NULL, NULL, s.signed_date
        FROM (SELECT DISTINCT original_transaction_id AS series FROM purchases
            WHERE account_id = $1 AND product_type <> 'Consumable' AND product_type = 'Auto-Renewable Subscription') mine
        JOIN subscriptions s ON s.original_transaction_id = mine.series
        UNION ALL
        SELECT 'b', currency, NULL, NULL, NULL, NULL, NULL, NULL, amount, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM balances WHERE account_id = $1
        """

    // MARK: Effects

    /// The binds of ``moneyColumns``, in their order (here and in ``PostgresFunctions``' JSON).
    static func moneyBinds(_ record: PurchaseRecord) -> [SQLValue] {
        [.of(record.price), .of(record.currency), .of(record.offerType.map { Int64($0.rawValue) }), .of(record.offerDiscountType?.rawValue),
         .of(record.offerPeriod), .of(record.storefront)]
    }

    func apply(_ effects: [LedgerEffect]) throws {
        for effect in effects { try apply(effect) }
    }

    func apply(_ effect: LedgerEffect) throws {
        switch effect {
        case .insertPurchase(let record, let source, let now):
            let inserted = try sql.first("""
                INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment,
                    quantity, purchase_date, expires_date, revocation_date, revocation_reason, is_upgraded, ownership, app_account_token,
                    signed_date, source, recorded_at, revocation_type, revocation_percentage, app_transaction_id\(Self.moneyColumns))
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                    \(Ledger.recordedNoEarlierThan("CAST($18 AS BIGINT)", Ledger.purchasesWatermark)), $19, $20, $21, $22, $23, $24, $25, $26, $27)
                ON CONFLICT (transaction_id) DO NOTHING RETURNING transaction_id
                """, [.text(record.transactionId), .text(record.originalTransactionId), .of(record.accountId), .of(record.orderId),
                      .text(record.productId), .text(record.productType.rawValue), .text(record.environment.rawValue), .int(Int64(record.quantity)),
                      .of(record.purchaseDate), .of(record.expiresDate), .of(record.revocationDate),
                      .of(record.revocationReason.map { Int64($0.rawValue) }), .of(record.isUpgraded), .of(record.ownership?.rawValue),
                      .of(record.appAccountToken?.lowercasedString), .of(record.signedDate), .text(source.rawValue), .of(now),
                      .of(record.revocationType?.rawValue), .of(record.revocationPercentage.map(Int64.init)), .of(record.appTransactionId)]
                      + Self.moneyBinds(record))
            // The rules decided on a transaction that was not stored; a replica that stored it meanwhile changes the facts.
            guard inserted != nil else { throw LedgerRace() }
        case .claimPurchase(let transactionId, let accountId, let orderId):
            let claimed = try sql.first("""
                UPDATE purchases SET account_id = $1, order_id = $2 WHERE transaction_id = $3 AND account_id IS NULL RETURNING transaction_id
                """, [.text(accountId), .of(orderId), .text(transactionId)])
            guard claimed != nil else { throw LedgerRace() }
        case .refreshPurchase(let record):
            // The business view's rollup may have summed this row: when the news changes what it counted, its old
            // facts are taken back and the row is summed again (``Ledger/rollUpMetrics(now:)``). On PostgreSQL a rollup
            // moving the watermark meanwhile is waited for, so the choice below is made against the watermark it leaves.
            if postgres { _ = try sql.rows("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 727274))", [.text(Ledger.metricRollupLock)]) }
            let money = Self.moneyBinds(record)
            try sql.execute("""
                INSERT INTO metric_retractions (\(Ledger.retractionColumns))
                SELECT \(Ledger.retractionColumns) FROM purchases
                WHERE transaction_id = $1 AND signed_date < $2 AND recorded_at < \(Ledger.purchasesWatermark) AND \(Ledger.metricFactsChange)
                """, [.text(record.transactionId), .of(record.signedDate), .of(record.expiresDate), money[0], money[1], money[3], money[4]])
            try sql.execute("""
                UPDATE purchases SET expires_date = $1, revocation_date = $2, revocation_reason = $3, is_upgraded = $4, signed_date = $5,
                    revocation_type = $7, revocation_percentage = $8, app_transaction_id = COALESCE(app_transaction_id, $9),
                    price = COALESCE(price, CAST($10 AS BIGINT)), currency = COALESCE(currency, $11),
                    offer_type = COALESCE(offer_type, CAST($12 AS BIGINT)), offer_discount_type = COALESCE(offer_discount_type, $13),
                    offer_period = COALESCE(offer_period, $14), storefront = COALESCE(storefront, $15),
                    recorded_at = CASE WHEN \(Ledger.metricFactsChange(expires: "$1", price: "CAST($10 AS BIGINT)", currency: "CAST($11 AS TEXT)",
                                                                      offerDiscountType: "CAST($13 AS TEXT)", offerPeriod: "CAST($14 AS TEXT)")) AND recorded_at < \(Ledger.purchasesWatermark)
                                       THEN \(Ledger.purchasesWatermark) ELSE recorded_at END
                WHERE transaction_id = $6 AND signed_date < $5
                """, [.of(record.expiresDate), .of(record.revocationDate), .of(record.revocationReason.map { Int64($0.rawValue) }),
                      .of(record.isUpgraded), .of(record.signedDate), .text(record.transactionId),
                      .of(record.revocationType?.rawValue), .of(record.revocationPercentage.map(Int64.init)), .of(record.appTransactionId)]
                      + Self.moneyBinds(record))
        case .linkOrder(let transactionId, let orderId):
            try sql.execute("UPDATE purchases SET order_id = $1 WHERE transaction_id = $2 AND order_id IS NULL", [.text(orderId), .text(transactionId)])
        case .fulfilOrder(let orderId, let transactionId, let now):
            // Each update decides under the row's lock: on PostgreSQL a settle that commits while this one waits for
            // the row is seen by the second update (a separate read first would miss it, and the audit with it).
            let fulfil = "UPDATE orders SET state = 'granted', transaction_id = $1, updated_at = $2 WHERE order_id = $3 AND transaction_id IS NULL"
            let binds: [SQLValue] = [.text(transactionId), .of(now), .text(orderId)]
            let open = try sql.first(fulfil + " AND state <> 'settled' RETURNING order_id", binds) != nil
            let settled = try !open && sql.first(fulfil + " AND state = 'settled' RETURNING order_id", binds) != nil
            // The payment is granted all the same (Apple was paid), but the operator settled the order without it,
            // perhaps with a refund or credit of their own: that is now paid twice, and the audit log says so.
            if settled { try apply(.audit(actor: "ledger", action: .settledOrderPaid, subject: orderId, detail: transactionId, at: now)) }
        case .moveBalance(let move) where move.requiresCover:
            // The debit first, guarded in the database: two replicas spending the last coins cannot both succeed.
            guard try sql.first("""
                UPDATE balances SET amount = amount + $1 WHERE account_id = $2 AND currency = $3 AND amount + $1 >= 0 RETURNING amount
                """, [.int(move.delta), .text(move.accountId), .text(move.currency)]) != nil else { throw LedgerRace() }
            // Its key's uniqueness refuses a racing replica's second spend of it (which then decides again and finds this one).
            guard try sql.first("""
                INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (entry_key) DO NOTHING RETURNING entry_key
                """, [.text(move.key), .text(move.accountId), .text(move.currency), .int(move.delta), .of(move.transactionId), .of(move.at)]) != nil
            else { throw LedgerRace() }
        case .moveBalance(let move):
            let made = try sql.first("""
                INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (entry_key) DO NOTHING RETURNING entry_key
                """, [.text(move.key), .text(move.accountId), .text(move.currency), .int(move.delta), .of(move.transactionId), .of(move.at)])
            guard made != nil else { return }
            try sql.execute("""
                INSERT INTO balances (account_id, currency, amount) VALUES ($1, $2, $3)
                ON CONFLICT (account_id, currency) DO UPDATE SET amount = balances.amount + excluded.amount
                """, [.text(move.accountId), .text(move.currency), .int(move.delta)])
        case .recordConflict(let transactionId, let claimedBy, let owner, let now):
            try sql.execute("""
                INSERT INTO conflicts (transaction_id, claimed_by, owner, first_seen, attempts) VALUES ($1, $2, $3, $4, 1)
                ON CONFLICT (transaction_id, claimed_by) DO UPDATE SET attempts = conflicts.attempts + 1
                """, [.text(transactionId), .text(claimedBy), .text(owner), .of(now)])
        case .updateSeriesStatus(let series):
            // What the news leaves out stays as it was (unknown is not "none"): renewal info without a status, or a status
            // without renewal info, must not erase a grace period. But a status (or grace date) is kept only while it is
            // about the latest period, signed no earlier than that period began: the news' date becomes the series',
            // and an EXPIRED of an earlier period would otherwise look newer than the resubscription after it.
            // The rest of the renewal info is replaced together when renewal info came (auto_renew set): Apple leaves out
            // an expiration intent, a billing retry or a price increase that no longer applies. Unless a device's renewal
            // info signed later is held (`device_renewal_signed_date`): news signed before it, delivered after it, sets the
            // status it carries and leaves the newer renewal info shown.
            let kept = "(excluded.auto_renew IS NULL OR COALESCE(subscriptions.device_renewal_signed_date, 0) > excluded.signed_date)"
            try sql.execute("""
                INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew,
                    auto_renew_product_id, signed_date, expiration_intent, billing_retry, price_increase_status)
                VALUES ($1, NULL, $2, NULL, $3, $4, $5, $6, $7, $8, $9)
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
                """, [.text(series.originalTransactionId), .of(series.status.map { Int64($0.rawValue) }), .of(series.gracePeriodExpiresDate),
                      .of(series.autoRenew.map { $0 ? 1 : 0 }), .of(series.autoRenewProductId), .of(series.signedDate),
                      .of(series.expirationIntent.map { Int64($0.rawValue) }), .of(series.isInBillingRetryPeriod.map { $0 ? 1 : 0 }),
                      .of(series.priceIncreaseStatus.map { Int64($0.rawValue) })])
        case .updateSeriesPeriod(let original, let productId, let purchaseDate, let expiresDate):
            try sql.execute("""
                INSERT INTO subscriptions (original_transaction_id, product_id, status, expires_date, signed_date, period_purchase_date)
                VALUES ($1, $2, NULL, $3, 0, $4)
                ON CONFLICT (original_transaction_id) DO UPDATE SET product_id = excluded.product_id, expires_date = excluded.expires_date,
                    period_purchase_date = excluded.period_purchase_date
                WHERE subscriptions.period_purchase_date IS NULL OR subscriptions.period_purchase_date < excluded.period_purchase_date
                    OR (subscriptions.period_purchase_date = excluded.period_purchase_date
                        AND COALESCE(excluded.expires_date, 0) >= COALESCE(subscriptions.expires_date, 0))
                """, [.text(original), .text(productId), .of(expiresDate), .of(purchaseDate)])
        case .recordDeviceReport(let transactionId, let accountId, let signals, let now):
            try sql.execute("""
                INSERT INTO device_reports (report_id, transaction_id, account_id, signals, reported_at) VALUES ($1, $2, $3, $4, $5)
                """, [.text(UUID().lowercasedString), .text(transactionId), .text(accountId), .text(signals.joined(separator: ",")), .of(now)])
        case .claimSeries(let original, let accountId, let token, let now):
            let claimed = try sql.rows("""
                UPDATE purchases SET account_id = $1
                WHERE original_transaction_id = $2 AND account_id IS NULL AND (app_account_token IS NULL OR app_account_token = $3)
                RETURNING \(Self.purchaseColumns)
                """, [.text(accountId), .text(original), .of(token?.lowercasedString)]).map(Self.decodePurchase)
            for period in claimed where events {
                if let event = WebhookRules.grantEvent(period, account: accountId, now: now) { try apply(.emitEvent(event)) }
            }
        case .requireFacts(let facts):
            // SQLite has one writer and every operation reads its facts inside its own transaction: they hold by
            // construction. PostgreSQL's held transactions took the series' lock before reading them; checked anyway.
            guard postgres else { return }
            try lockSeries(facts.originalTransactionId)
            let previous = facts.previousSeriesOwner == nil ? nil : facts.previousOriginalTransactionId
            if let previous { try lockSeries(previous) }
            // Every check in one statement (prepared once per connection), read after the locks were taken: a statement
            // that took them itself would read from a snapshot older than what it waited for.
            let row = try sql.first(Self.preconditionsQuery, [.text(facts.originalTransactionId), .text(facts.transactionId), .text(previous ?? "")])
            var checks: [(column: Int, expected: SQLValue)] = []
            if case .some(let expected) = facts.seriesEnvironment { checks.append((0, .of(expected?.rawValue))) }
            if case .some(let expected) = facts.seriesOwner { checks.append((1, .of(expected))) }
            if let count = facts.entryCount { checks.append((2, .int(Int64(count)))) }
            if let signed = facts.storedSignedDate { checks.append((3, .of(signed))) }
            if previous != nil, case .some(let expected) = facts.previousSeriesOwner { checks.append((4, .of(expected))) }
            for check in checks where row?.values[check.column] != check.expected { throw LedgerRace() }
        case .emitEvent(let event):
            guard events else { return }
            // Due from now by the wall clock, which the senders' claims read too (the event's own time is the server's
            // clock, which may be a simulated one): a claim takes events in the order they fell due.
            try sql.execute("""
                INSERT INTO webhook_events (event_id, type, account_id, body, state, attempts, next_attempt_at, created_at)
                VALUES ($1, $2, $3, $4, 'pending', 0, $6, $5) ON CONFLICT (event_id) DO NOTHING
                """, [.text(event.id), .text(event.type.rawValue), .of(event.accountId), .text(try event.body()), .of(event.occurredAt), .int(Millis.now)])
        case .settleOrder(let orderId, let note, let now):
            guard try settleOpenOrder(orderId: orderId, note: note, at: now) else { throw LedgerRace() }
        case .audit(let actor, let action, let subject, let detail, let now):
            try sql.execute("""
                INSERT INTO audit_log (entry_id, actor, action, subject, detail, created_at) VALUES ($1, $2, $3, $4, $5, $6)
                """, [.text(UUID().lowercasedString), .text(String(actor.prefix(200))), .text(action.rawValue), .text(String(subject.prefix(200))),
                      .text(String(detail.prefix(4000))), .of(now)])
        }
    }
}

/// Thrown when a write finds the rows changed since its facts were read (another replica won a race): the operation
/// is run again from fresh facts, and finds the winner's rows.
struct LedgerRace: Error {}
