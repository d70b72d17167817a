import AppStoreFormats
import Foundation

/// The purchase ledger: orders, transactions bound to accounts, grants, consumable balances, subscription state and
/// the notification log, over one ``LedgerStore``.
///
/// Each operation reads the facts its rules need, lets the rules (pure functions in `Rules/`) decide, and applies
/// their effects — all in one database transaction. Exactly-once rests on the database: a transaction id is a primary
/// key, a notification UUID too, and each balance movement has a unique key (`grant:<transactionId>`,
/// `spend:<idempotencyKey>`…), so a repeated or concurrent request finds the first one's rows and grants nothing more.
public struct Ledger: Sendable {
    public let store: any LedgerStore
    /// The same store, as the ledger runs its operations through it.
    let sqlStore: any SQLLedgerStore
    public let catalog: LedgerCatalog
    /// How long an unpaid order stays open.
    public var orderLifetime: TimeInterval = 24 * 3600
    /// Orders this process created, by id and by `appAccountToken`: their account, product and token never change, so
    /// a purchase for one needs no read of it before its effects are applied (PostgreSQL's one-round-trip path).
    let recentOrders = RecentOrders(capacity: 50_000)
    /// Write the outgoing webhooks' events to the outbox with the changes they report. Off when no receiver is
    /// configured: events are then not recorded at all (one fewer write per grant, and no outbox growing unsent); a
    /// receiver configured later hears of changes from then on.
    public var recordsWebhookEvents = true

    let healthProbe: HealthProbe

    public init(store: any LedgerStore, catalog: LedgerCatalog) {
        let sqlStore = store.operations.store
        self.store = store
        self.sqlStore = sqlStore
        self.catalog = catalog
        // PostgreSQL's is a statement kept prepared on the pool's connections.
        if let fast = sqlStore.fastPath {
            healthProbe = HealthProbe(read: { try await fast.ping() })
        } else {
            healthProbe = HealthProbe(read: { _ = try await sqlStore.read { try await $0.rows(Ledger.healthQuery, []) } })
        }
    }

    static let healthQuery = "SELECT COUNT(*) FROM ledger_migrations"

    /// Throws unless the database answers a read that began after this call (concurrent checks share one: ``HealthProbe``).
    public func checkHealth() async throws {
        do {
            try await healthProbe.check()
        } catch {
            throw Self.ledgerError(error)
        }
    }

    /// Creates or upgrades the schema.
    public func migrate() async throws {
        try await Schema.migrate(sqlStore)
    }

    /// Runs `body` as one write transaction. An operation that lost a race to another replica runs again from fresh
    /// facts; storage failures become ``LedgerError`` `storage`.
    func write<R: Sendable>(_ body: @escaping @Sendable (LedgerSession) async throws -> R) async throws -> R {
        var attempt = 0
        while true {
            do {
                let postgres = sqlStore.kind == .postgres, events = recordsWebhookEvents
                return try await sqlStore.write { try await body(LedgerSession($0, postgres: postgres, events: events)) }
            } catch is LedgerRace where attempt < 8 {
                attempt += 1
            } catch {
                throw Self.ledgerError(error)
            }
        }
    }

    /// Runs `body` as a read.
    func read<R: Sendable>(_ body: @escaping @Sendable (LedgerSession) async throws -> R) async throws -> R {
        do {
            return try await sqlStore.read { try await body(LedgerSession($0)) }
        } catch {
            throw Self.ledgerError(error)
        }
    }

    static func ledgerError(_ error: any Error) -> LedgerError {
        if let error = error as? LedgerError { return error }
        return LedgerError(.storage, "the database refused the operation: \(String(reflecting: error))")
    }
}

// MARK: Orders

extension Ledger {
    /// Opens an order for `accountId` to buy `productId`; its `appAccountToken` goes on the payment.
    /// - Throws: ``LedgerError/Code/unknownProduct`` when the catalog does not list it, ``LedgerError/Code/productRetired``
    ///   when it is no longer sold (``ProductRule/retired``): no order is made either way.
    public func createOrder(accountId: String, productId: String, now: Date = Date()) async throws -> Order {
        guard let rule = catalog.rule(for: productId) else { throw LedgerError(.unknownProduct, "no product \(productId) is sold here") }
        // Retired: what was bought of it stays honoured, but it is sold no more (Apple never reuses its id).
        guard !rule.isRetired else { throw LedgerError(.productRetired, "\(productId) is no longer sold") }
        try Self.checkAccountId(accountId)
        let order = Order(orderId: UUID().lowercasedString, accountId: accountId, productId: productId, appAccountToken: UUID(),
                          state: .created, transactionId: nil, createdAt: now, expiresAt: now.addingTimeInterval(orderLifetime))
        try await write { try await $0.insertOrder(order, at: now) }
        recentOrders.keep(order)
        return order
    }

    /// The order with `orderId`, if any.
    public func order(_ orderId: String) async throws -> Order? {
        try await read { try await $0.order(id: orderId) }
    }

    /// The order whose `appAccountToken` is `token`, if any.
    public func order(appAccountToken token: UUID) async throws -> Order? {
        try await read { try await $0.order(appAccountToken: token) }
    }

    static func checkAccountId(_ accountId: String) throws {
        guard !accountId.isEmpty, accountId.utf8.count <= 128 else { throw LedgerError(.invalidInput, "account ids are 1 to 128 bytes") }
        // A NUL or other control character could make two account ids compare equal somewhere down the line (C strings).
        guard !accountId.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw LedgerError(.invalidInput, "account ids hold no control characters")
        }
    }
}

/// Orders this process created, bounded; when full it starts again empty (a miss only costs a read).
final class RecentOrders: @unchecked Sendable {
    private let lock = NSLock()
    private var byId: [String: Order] = [:]
    private var byToken: [UUID: Order] = [:]
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func keep(_ order: Order) {
        lock.withLock {
            if byId.count >= capacity {
                byId.removeAll(keepingCapacity: true)
                byToken.removeAll(keepingCapacity: true)
            }
            byId[order.orderId] = order
            byToken[order.appAccountToken] = order
        }
    }

    func order(id: String) -> Order? { lock.withLock { byId[id] } }
    func order(token: UUID) -> Order? { lock.withLock { byToken[token] } }
}
