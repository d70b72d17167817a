import AppStoreFormats
import Foundation
import SQLKit

/// The purchase ledger: orders, transactions bound to accounts, grants, consumable balances, subscription state and
/// the notification log, over one ``LedgerStore``.
///
/// Every operation is one database transaction. Exactly-once rests on the database: a transaction id is a primary
/// key, a notification UUID too, and each balance movement has a unique key (`grant:<transactionId>`,
/// `spend:<idempotencyKey>`…), so a repeated or concurrent request finds the first one's rows and grants nothing more.
public struct Ledger: Sendable {
    public let store: any LedgerStore
    public let catalog: LedgerCatalog
    /// How long an unpaid order stays open.
    public var orderLifetime: TimeInterval = 24 * 3600

    public init(store: any LedgerStore, catalog: LedgerCatalog) {
        self.store = store
        self.catalog = catalog
    }

    /// Creates or upgrades the schema.
    public func migrate() async throws {
        try await Schema.migrate(store)
    }

    /// Runs `body` in one database transaction, turning storage failures into ``LedgerError`` `storage`.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        do {
            return try await store.transaction(body)
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError(.storage, "the database refused the operation: \(String(reflecting: error))")
        }
    }
}

// MARK: Orders

extension Ledger {
    /// Opens an order for `accountId` to buy `productId`; its `appAccountToken` goes on the payment.
    public func createOrder(accountId: String, productId: String, now: Date = Date()) async throws -> Order {
        guard catalog.rule(for: productId) != nil else { throw LedgerError(.unknownProduct, "no product \(productId) is sold here") }
        try Self.checkAccountId(accountId)
        let order = Order(orderId: UUID().uuidString.lowercased(), accountId: accountId, productId: productId, appAccountToken: UUID(),
                          state: .created, transactionId: nil, createdAt: now, expiresAt: now.addingTimeInterval(orderLifetime))
        try await transaction { db in
            try await db.raw("""
                INSERT INTO orders (order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, updated_at)
                VALUES (\(bind: order.orderId), \(bind: order.accountId), \(bind: order.productId), \(bind: order.appAccountToken.uuidString.lowercased()),
                        \(bind: order.state.rawValue), NULL, \(bind: Millis.of(now)), \(bind: Millis.of(order.expiresAt)), \(bind: Millis.of(now)))
                """).run()
        }
        return order
    }

    /// The order with `orderId`, if any.
    public func order(_ orderId: String) async throws -> Order? {
        try await transaction { db in try await Self.order(db, where: "order_id", equals: orderId) }
    }

    static func order(_ db: any SQLDatabase, where column: String, equals value: String) async throws -> Order? {
        guard let row = try await db.raw("""
            SELECT order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at
            FROM orders WHERE \(ident: column) = \(bind: value)
            """).first() else { return nil }
        return try decodeOrder(row)
    }

    static func decodeOrder(_ row: any SQLRow) throws -> Order {
        Order(orderId: try row.decode(column: "order_id", as: String.self), accountId: try row.decode(column: "account_id", as: String.self),
              productId: try row.decode(column: "product_id", as: String.self),
              appAccountToken: UUID(uuidString: try row.decode(column: "app_account_token", as: String.self)) ?? UUID(),
              state: Order.State(rawValue: try row.decode(column: "state", as: String.self)) ?? .created,
              transactionId: try row.decode(column: "transaction_id", as: String?.self),
              createdAt: Millis.date(try row.decode(column: "created_at", as: Int64.self)),
              expiresAt: Millis.date(try row.decode(column: "expires_at", as: Int64.self)))
    }

    static func checkAccountId(_ accountId: String) throws {
        guard !accountId.isEmpty, accountId.utf8.count <= 128 else { throw LedgerError(.invalidInput, "account ids are 1 to 128 bytes") }
    }
}
