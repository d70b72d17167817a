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
    func lockSeries(_ originalTransactionId: String) async throws {
        guard postgres, !locked.series.contains(originalTransactionId) else { return }
        _ = try await sql.rows("SELECT pg_advisory_xact_lock(hashtextextended($1, 727274))", [.text(originalTransactionId)])
        locked.series.insert(originalTransactionId)
    }

    // MARK: Orders

    static let orderColumns = OrderColumn.list()

    func insertOrder(_ order: Order, at now: Date) async throws {
        try await sql.execute("""
            INSERT INTO orders (order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, updated_at)
            VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8)
            """, [.text(order.orderId), .text(order.accountId), .text(order.productId), .text(order.appAccountToken.lowercasedString),
                  .text(order.state.rawValue), .of(order.createdAt), .of(order.expiresAt), .of(now)])
    }

    func order(id: String) async throws -> Order? {
        try await sql.first("SELECT \(Self.orderColumns) FROM orders WHERE order_id = $1", [.text(id)]).map(Self.decodeOrder)
    }

    func order(appAccountToken token: UUID) async throws -> Order? {
        try await sql.first("SELECT \(Self.orderColumns) FROM orders WHERE app_account_token = $1", [.text(token.lowercasedString)])
            .map(Self.decodeOrder)
    }

    func orders(where condition: String, _ binds: [SQLValue], limit: Int) async throws -> [Order] {
        try await sql.rows("SELECT \(Self.orderColumns) FROM orders o WHERE \(condition) ORDER BY o.created_at DESC LIMIT \(max(1, min(limit, 10_000)))", binds)
            .map(Self.decodeOrder)
    }

    static func decodeOrder(_ row: SQLRow) throws -> Order {
        typealias C = OrderColumn
        return Order(orderId: try row.text(C.orderId), accountId: try row.text(C.accountId), productId: try row.text(C.productId),
                     appAccountToken: UUID(uuidString: try row.text(C.appAccountToken)) ?? UUID(),
                     state: Order.State(rawValue: try row.text(C.state)) ?? .created, transactionId: row.optionalText(C.transactionId),
                     createdAt: Millis.date(try row.int(C.createdAt)), expiresAt: Millis.date(try row.int(C.expiresAt)),
                     abandonedAt: row.optionalInt(C.abandonedAt).map(Millis.date), abandonReason: row.optionalText(C.abandonReason))
    }

    // MARK: Transactions

    /// The columns entitlements are judged by (the shape of ``ownedQuery``'s rows and `iapkit_apply`'s answer).

    static let entitlingColumns = PurchaseColumn.list(nil, PurchaseColumn.entitling)
    /// Every column of a stored transaction.
    static let purchaseColumns = PurchaseColumn.list()
    /// What the customer paid and under which offer (``PurchaseRecord/price`` and after), after a comma.
    static let moneyColumns = ", " + PurchaseColumn.list(nil, PurchaseColumn.money)

    func purchase(_ transactionId: String) async throws -> PurchaseRecord? {
        try await sql.first("SELECT \(Self.purchaseColumns) FROM purchases WHERE transaction_id = $1", [.text(transactionId)]).map(Self.decodePurchase)
    }

    func purchases(accountId: String) async throws -> [PurchaseRecord] {
        try await sql.rows("SELECT \(Self.purchaseColumns) FROM purchases WHERE account_id = $1 ORDER BY purchase_date, transaction_id", [.text(accountId)])
            .map(Self.decodePurchase)
    }

    /// The account's purchases that can carry an entitlement (no consumables), through the entitling index: an account
    /// with thousands of coin purchases costs no more to judge for an offer than one with none.
    func entitlingPurchases(accountId: String) async throws -> [PurchaseRecord] {
        try await sql.rows(Self.entitlingPurchasesQuery, [.text(accountId)]).map(Self.decodePurchase)
    }

    static let entitlingPurchasesQuery = """
        SELECT \(purchaseColumns) FROM purchases WHERE account_id = $1 AND product_type <> 'Consumable'
        ORDER BY purchase_date, transaction_id
        """

    func purchases(where condition: String, _ binds: [SQLValue], limit: Int) async throws -> [PurchaseRecord] {
        try await sql.rows("""
            SELECT \(Self.purchaseColumns) FROM purchases WHERE \(condition) ORDER BY recorded_at DESC, transaction_id LIMIT \(max(1, min(limit, 10_000)))
            """, binds).map(Self.decodePurchase)
    }

    static func decodePurchase(_ row: SQLRow) throws -> PurchaseRecord {
        typealias C = PurchaseColumn
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = try row.text(C.transactionId)
        payload.originalTransactionId = try row.text(C.originalTransactionId)
        payload.productId = try row.text(C.productId)
        payload.type = ProductType(rawValue: try row.text(C.productType))
        payload.environment = AppStoreEnvironment(rawValue: try row.text(C.environment))
        payload.quantity = Int(try row.int(C.quantity))
        payload.purchaseDate = Millis.date(try row.int(C.purchaseDate))
        payload.expiresDate = row.optionalInt(C.expiresDate).map(Millis.date)
        payload.revocationDate = row.optionalInt(C.revocationDate).map(Millis.date)
        payload.revocationReason = row.optionalInt(C.revocationReason).map { RevocationReason(rawValue: Int($0)) }
        payload.isUpgraded = try row.int(C.isUpgraded) != 0
        payload.inAppOwnershipType = row.optionalText(C.ownership).map(InAppOwnershipType.init(rawValue:))
        payload.appAccountToken = row.optionalText(C.appAccountToken).flatMap(UUID.init(uuidString:))
        payload.signedDate = Millis.date(try row.int(C.signedDate))
        payload.revocationType = row.optionalText(C.revocationType).map(RevocationType.init(rawValue:))
        payload.revocationPercentage = row.optionalInt(C.revocationPercentage).map { Int(clamping: $0) }
        payload.appTransactionId = row.optionalText(C.appTransactionId)
        payload.price = row.optionalInt(C.price)
        payload.currency = row.optionalText(C.currency)
        payload.offerType = row.optionalInt(C.offerType).map { OfferType(rawValue: Int($0)) }
        payload.offerDiscountType = row.optionalText(C.offerDiscountType).map(OfferDiscountType.init(rawValue:))
        payload.offerPeriod = row.optionalText(C.offerPeriod)
        payload.storefront = row.optionalText(C.storefront)
        var record = try PurchaseRecord(keyed: payload)
        record.accountId = row.optionalText(C.accountId)
        record.orderId = row.optionalText(C.orderId)
        return record
    }

    /// Everything the binding rules need about `record`, with the order the uploader named: one statement (one round
    /// trip on PostgreSQL), and a second only for a stored consumable's balance movements.
    func facts(for record: PurchaseRecord, namedOrderId: String?, catalog: LedgerCatalog) async throws -> TransactionFacts {
        guard let row = try await sql.first(Self.factsQuery, Self.factsBinds(record, namedOrderId: namedOrderId)) else {
            throw LedgerError(.storage, "the facts query returned no row")
        }
        var facts = try Self.decodeFacts(row)
        if Self.needsEntries(facts, record, catalog) {
            facts.entries = try await balanceEntries(transactionId: record.transactionId)
            facts.entriesRead = true
        }
        return facts
    }

    static func factsBinds(_ record: PurchaseRecord, namedOrderId: String?) -> [SQLValue] {
        [.of(namedOrderId), .of(record.appAccountToken?.lowercasedString), .text(record.transactionId), .text(record.originalTransactionId),
         .of(record.previousOriginalTransactionId)]
    }

    /// Where each part of ``factsQuery``'s row begins: the named order's columns, the token order's, the stored
    /// transaction's, then the series' owner, the previous series' holder and the series' environment.
    enum FactsLayout {
        static let namedOrder = 0
        static let tokenOrder = namedOrder + OrderColumn.count
        static let stored = tokenOrder + OrderColumn.count
        static let seriesOwner = stored + PurchaseColumn.count
        static let previousSeriesOwner = seriesOwner + 1
        static let seriesEnvironment = previousSeriesOwner + 1
    }

    static func decodeFacts(_ row: SQLRow) throws -> TransactionFacts {
        var facts = TransactionFacts()
        facts.namedOrder = try row.slice(OrderColumn.self, from: FactsLayout.namedOrder).map(decodeOrder)
        facts.tokenOrder = try row.slice(OrderColumn.self, from: FactsLayout.tokenOrder).map(decodeOrder)
        facts.stored = try row.slice(PurchaseColumn.self, from: FactsLayout.stored).map(decodePurchase)
        if facts.stored?.accountId == nil {
            facts.seriesOwner = row.optionalText(FactsLayout.seriesOwner)
            facts.previousSeriesOwner = row.optionalText(FactsLayout.previousSeriesOwner)
        }
        facts.seriesEnvironment = row.optionalText(FactsLayout.seriesEnvironment).map(AppStoreEnvironment.init(rawValue:))
        return facts
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

    /// The named order, the token's order, the stored transaction, the series' owner and the holder of the latest
    /// period of the series it was migrated from (a resubscription paid through another account's order is that
    /// account's), each NULL when absent.
    static let factsQuery = """
        SELECT \(OrderColumn.list("n")), \(OrderColumn.list("t")), \(PurchaseColumn.list("p")),
            (\(seriesHolderQuery("$4", latest: false))),
            (\(seriesHolderQuery("$5", latest: true))),
            (\(seriesEnvironmentQuery("$4")))
        FROM (SELECT 1 AS one) AS base
        LEFT JOIN orders n ON n.order_id = $1
        LEFT JOIN orders t ON t.app_account_token = $2
        LEFT JOIN purchases p ON p.transaction_id = $3
        """


    // MARK: Balances

    func balanceEntries(transactionId: String) async throws -> [BalanceEntry] {
        try await sql.rows(Self.entriesQuery, [.text(transactionId)]).map(Self.decodeEntry)
    }

    static let entriesQuery = "SELECT entry_key, account_id, currency, delta, transaction_id, created_at FROM balance_entries WHERE transaction_id = $1"

    func balanceEntries(accountId: String, limit: Int) async throws -> [BalanceEntry] {
        try await sql.rows("""
            SELECT entry_key, account_id, currency, delta, transaction_id, created_at FROM balance_entries WHERE account_id = $1
            ORDER BY created_at DESC LIMIT \(max(1, min(limit, 10_000)))
            """, [.text(accountId)]).map(Self.decodeEntry)
    }

    /// A spend's facts in one read: the movement stored under its key (nil when none) and the balance now.
    func spendFacts(key: String, accountId: String, currency: String) async throws -> (earlier: BalanceEntry?, balance: Int64) {
        guard let row = try await sql.first("""
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

    func balance(accountId: String, currency: String) async throws -> Int64 {
        try await sql.first("SELECT amount FROM balances WHERE account_id = $1 AND currency = $2", [.text(accountId), .text(currency)])?.int(0) ?? 0
    }

    // MARK: Subscriptions

    static let seriesColumns = """
        original_transaction_id, product_id, status, expires_date, grace_period_expires_date, auto_renew, auto_renew_product_id, signed_date,
        period_purchase_date, expiration_intent, billing_retry, price_increase_status
        """

    /// Whether any period of the series is stored.
    func knowsSeries(_ originalTransactionId: String) async throws -> Bool {
        try await sql.first("SELECT 1 FROM purchases WHERE original_transaction_id = $1 LIMIT 1", [.text(originalTransactionId)]) != nil
    }

    func series(_ originalTransactionId: String) async throws -> SubscriptionRecord? {
        try await sql.first("SELECT \(Self.seriesColumns) FROM subscriptions WHERE original_transaction_id = $1", [.text(originalTransactionId)])
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
    func entitlements(accountId: String, catalog: LedgerCatalog, now: Date) async throws -> AccountEntitlements {
        try Self.owned(try await sql.rows(Self.ownedQuery, [.text(accountId)]), accountId: accountId, catalog: catalog, now: now)
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

    func apply(_ effects: [LedgerEffect]) async throws {
        for effect in effects { try await apply(effect) }
    }

    /// Runs the effect's statements (``EffectStatements``), in order.
    func apply(_ effect: LedgerEffect) async throws {
        guard let (op, binds) = try EffectStatements.binds(effect, events: events) else { return }
        for step in op.steps {
            switch step {
            case .run(let statement):
                if statement.postgresOnly && !postgres { continue }
                let read = statement.binds.map { binds[$0 - 1] }
                if case .next = statement.then {
                    try await sql.execute(statement.sql, read)
                    continue
                }
                let found = try await sql.first(statement.sql, read) != nil
                switch statement.then {
                case .next: break
                case .raceUnlessRow: if !found { throw LedgerRace() }
                case .doneUnlessRow: if !found { return }
                case .doneIfRow: if found { return }
                }
            case .lockSeries(let bind):
                if case .text(let series) = binds[bind - 1] { try await lockSeries(series) }
            case .inSwift:
                try await claimSeriesInSwift(effect)
            }
        }
    }

    /// Binds the series' claimable periods and writes the grant event of each (``EffectStatements/claimSeries``).
    func claimSeriesInSwift(_ effect: LedgerEffect) async throws {
        guard case .claimSeries(let original, let accountId, let token, let now) = effect else {
            throw LedgerError(.storage, "no effect of Swift's own: \(effect)")
        }
        let claimed = try await sql.rows("""
            UPDATE purchases SET account_id = $3 WHERE \(EffectStatements.claimable) RETURNING \(Self.purchaseColumns)
            """, [.text(original), .of(token?.lowercasedString), .text(accountId)]).map(Self.decodePurchase)
        for period in claimed {
            if let event = WebhookRules.grantEvent(period, account: accountId, now: now) { try await apply(.emitEvent(event)) }
        }
    }
}

/// Thrown when a write finds the rows changed since its facts were read (another replica won a race): the operation
/// is run again from fresh facts, and finds the winner's rows.
struct LedgerRace: Error {}
