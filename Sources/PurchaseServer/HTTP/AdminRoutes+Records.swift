import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `/admin/...` reads of what the ledger knows: transactions (those only notifications told of too), a subscription
/// series, the notifications log and an account's timeline.
extension AdminRoutes {
    func addRecordRoutes(to admin: some RouterMethods<Context>) {
        admin.get("transactions", use: transactions)
        admin.get("transactions/:id", use: transaction)
        admin.get("subscriptions/:originalTransactionId", use: series)
        admin.get("notifications", use: notifications)
        admin.get("accounts/:id/timeline", use: timeline)
    }

    /// `GET /admin/transactions?unbound=true&limit=N`: newest first.
    func transactions(_ request: Request, context: Context) async throws -> Response {
        let unbound = ["true", "1"].contains(request.uri.queryParameters["unbound"].map(String.init) ?? "")
        let records = try await services.ledger.transactions(unboundOnly: unbound, limit: limit(request))
        return try JSONReply.encode(TransactionsReply(transactions: records.map(TransactionRecord.init)))
    }

    /// `GET /admin/transactions/{id}`.
    func transaction(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.decoded("id")
        guard let record = try await services.ledger.transaction(id) else {
            throw APIError(.notFound, code: .notFound, "the ledger holds no transaction \(id)")
        }
        return try JSONReply.encode(TransactionRecord(record))
    }

    /// `GET /admin/subscriptions/{originalTransactionId}`: the series' periods, its latest status and its notifications.
    func series(_ request: Request, context: Context) async throws -> Response {
        let original = try context.parameters.decoded("originalTransactionId")
        guard let series = try await services.ledger.series(originalTransactionId: original) else {
            throw APIError(.notFound, code: .notFound, "the ledger knows no series \(original)")
        }
        return try JSONReply.encode(SeriesReply(originalTransactionId: original, status: series.status.map(SeriesReply.Status.init),
                                                transactions: series.transactions.map(TransactionRecord.init), notifications: series.notifications))
    }

    /// `GET /admin/notifications?originalTransactionId=…&payload=true&limit=N`: newest first.
    func notifications(_ request: Request, context: Context) async throws -> Response {
        let original = try InputCheck.query(request, "originalTransactionId")
        let payload = ["true", "1"].contains(request.uri.queryParameters["payload"].map(String.init) ?? "")
        let logged = try await services.ledger.notifications(originalTransactionId: original, limit: limit(request), withPayload: payload)
        return try JSONReply.encode(NotificationsReply(notifications: logged))
    }

    /// `GET /admin/accounts/{id}/timeline`: oldest first.
    func timeline(_ request: Request, context: Context) async throws -> Response {
        let account = try context.parameters.decoded("id")
        let entries = try await services.ledger.timeline(accountId: account, limit: limit(request, default: 1_000))
        let owned = Entitlements(try await services.ledger.entitlements(accountId: account, now: services.now()))
        return try JSONReply.encode(TimelineReply(accountId: account, timeline: entries, entitlements: owned))
    }

    func limit(_ request: Request, default fallback: Int = 200) throws -> Int {
        guard let text = request.uri.queryParameters["limit"] else { return fallback }
        guard let value = Int(String(text)), (1...10_000).contains(value) else { throw APIError.badRequest("limit is 1 to 10000") }
        return value
    }
}
