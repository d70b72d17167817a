import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseLedger

/// `/admin/...` reads of what the ledger knows: transactions (those only notifications told of too), a subscription
/// series, the notifications log and an account's timeline.
extension AdminRoutes {
    func addRecordRoutes(to admin: RouterGroup<BasicRequestContext>) {
        admin.get("transactions", use: transactions)
        admin.get("transactions/:id", use: transaction)
        admin.get("subscriptions/:originalTransactionId", use: series)
        admin.get("notifications", use: notifications)
        admin.get("accounts/:id/timeline", use: timeline)
    }

    /// A stored transaction as the admin API shows it.
    struct TransactionItem: Encodable {
        var transactionId: String
        var originalTransactionId: String
        var accountId: String?
        var orderId: String?
        var productId: String
        var type: String
        var environment: String
        var quantity: Int
        var purchaseDate: Date
        var expiresDate: Date?
        var revocationDate: Date?
        var revocationReason: Int?
        var revocationType: String?
        var revocationPercentage: Int?
        var appTransactionId: String?
        var isUpgraded: Bool
        var appAccountToken: String?
        var signedDate: Date

        init(_ record: PurchaseRecord) {
            transactionId = record.transactionId
            originalTransactionId = record.originalTransactionId
            accountId = record.accountId
            orderId = record.orderId
            productId = record.productId
            type = record.productType.rawValue
            environment = record.environment.rawValue
            quantity = record.quantity
            purchaseDate = record.purchaseDate
            expiresDate = record.expiresDate
            revocationDate = record.revocationDate
            revocationReason = record.revocationReason?.rawValue
            revocationType = record.revocationType?.rawValue
            revocationPercentage = record.revocationPercentage
            appTransactionId = record.appTransactionId
            isUpgraded = record.isUpgraded
            appAccountToken = record.appAccountToken?.uuidString.lowercased()
            signedDate = record.signedDate
        }
    }

    struct SeriesStatusItem: Encodable {
        var status: Int?
        var gracePeriodExpiresDate: Date?
        var autoRenew: Bool?
        var autoRenewProductId: String?
        var signedDate: Date
        /// The latest period's, by purchase date.
        var productId: String?
        var expiresDate: Date?
    }

    /// `GET /admin/transactions?unbound=true&limit=N`: newest first.
    func transactions(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let unbound = ["true", "1"].contains(request.uri.queryParameters["unbound"].map(String.init) ?? "")
        let records = try await ledgerCall { try await services.ledger.transactions(unboundOnly: unbound, limit: limit(request)) }
        return try JSONReply.encode(["transactions": records.map(TransactionItem.init)])
    }

    /// `GET /admin/transactions/{id}`.
    func transaction(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let id = try context.parameters.decoded("id")
        guard let record = try await ledgerCall({ try await services.ledger.transaction(id) }) else {
            throw APIError(.notFound, code: "not_found", "the ledger holds no transaction \(id)")
        }
        return try JSONReply.encode(TransactionItem(record))
    }

    /// `GET /admin/subscriptions/{originalTransactionId}`: the series' periods, its latest status and its notifications.
    func series(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let original = try context.parameters.decoded("originalTransactionId")
        guard let series = try await ledgerCall({ try await services.ledger.series(originalTransactionId: original) }) else {
            throw APIError(.notFound, code: "not_found", "the ledger knows no series \(original)")
        }
        struct Reply: Encodable {
            var originalTransactionId: String
            var status: SeriesStatusItem?
            var transactions: [TransactionItem]
            var notifications: [LoggedNotification]
        }
        let status = series.status.map {
            SeriesStatusItem(status: $0.status?.rawValue, gracePeriodExpiresDate: $0.gracePeriodExpiresDate, autoRenew: $0.autoRenew,
                             autoRenewProductId: $0.autoRenewProductId, signedDate: $0.signedDate, productId: $0.productId, expiresDate: $0.expiresDate)
        }
        return try JSONReply.encode(Reply(originalTransactionId: original, status: status, transactions: series.transactions.map(TransactionItem.init),
                                          notifications: series.notifications))
    }

    /// `GET /admin/notifications?originalTransactionId=…&payload=true&limit=N`: newest first.
    func notifications(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let original = try InputCheck.query(request, "originalTransactionId")
        let payload = ["true", "1"].contains(request.uri.queryParameters["payload"].map(String.init) ?? "")
        let logged = try await ledgerCall {
            try await services.ledger.notifications(originalTransactionId: original, limit: limit(request), withPayload: payload)
        }
        return try JSONReply.encode(["notifications": logged])
    }

    /// `GET /admin/accounts/{id}/timeline`: oldest first.
    func timeline(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let account = try context.parameters.decoded("id")
        let entries = try await ledgerCall { try await services.ledger.timeline(accountId: account, limit: limit(request, default: 1_000)) }
        let owned = try await ledgerCall { try await services.ledger.entitlements(accountId: account, now: services.now()) }
        struct Reply: Encodable { var accountId: String; var timeline: [TimelineEntry]; var entitlements: AccountEntitlements }
        return try JSONReply.encode(Reply(accountId: account, timeline: entries, entitlements: owned))
    }

    func limit(_ request: Request, default fallback: Int = 200) throws -> Int {
        guard let text = request.uri.queryParameters["limit"] else { return fallback }
        guard let value = Int(String(text)), (1...10_000).contains(value) else { throw APIError.badRequest("limit is 1 to 10000") }
        return value
    }
}
