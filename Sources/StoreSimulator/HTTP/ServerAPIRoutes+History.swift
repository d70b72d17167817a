import AppStoreFormats
import Foundation
import Hummingbird

/// The Server API's paged lists: transaction history (v2 and the deprecated v1), refund history, notification history.
extension ServerAPIRoutes {
    /// Get Transaction History: “Get a customer’s in-app purchase transaction history for your app.”
    @Sendable func getTransactionHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await history(request, context, refundsOnly: false)
    }

    /// Get Transaction History V1 (deprecated): “Get a customer’s in-app purchase transaction history for your app, except
    /// finished consumable in-app purchases.”
    ///
    /// Version 1 (deprecated, still answered): the same, less the consumables the app finished (unless revoked).
    @Sendable func getTransactionHistoryV1(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await history(request, context, refundsOnly: false, finishedConsumables: false)
    }

    /// Get Refund History: “Get a paginated list of all of a customer’s refunded in-app purchases for your app.”
    @Sendable func getRefundHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await history(request, context, refundsOnly: true)
    }

    /// History (or refund history): the customer's transactions in the order they last changed, filtered, 20 a page.
    /// `revision` names the last change a page held: the next call continues after it, and a revision kept from a
    /// last page later brings what changed since (a refund of an old purchase comes again, as at Apple).
    private func history(_ request: Request, _ context: BasicRequestContext, refundsOnly: Bool, finishedConsumables: Bool = true) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let query = request.uri.queryParameters
        var items = refundsOnly ? await engine.refunds(containing: id) : await engine.changes(containing: id)
        guard await engine.knows(id) else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
        if !finishedConsumables {
            let unfinished = await engine.unfinishedTransactionIds()
            items = items.filter { $0.payload.type != .consumable || $0.payload.revocationDate != nil || unfinished.contains($0.payload.transactionId ?? "") }
        }
        var descending = false
        if !refundsOnly {
            // Milliseconds since 1970, whole and not negative; the start before the end.
            let start = query["startDate"].map { Int64($0).flatMap { $0 >= 0 ? $0 : nil } }
            let end = query["endDate"].map { Int64($0).flatMap { $0 >= 0 ? $0 : nil } }
            if case .some(nil) = start { return try Reply.apiError(.invalidStartDate, "Invalid start date.") }
            if case .some(nil) = end { return try Reply.apiError(.invalidEndDate, "Invalid end date.") }
            if let start = start ?? nil, let end = end ?? nil, start >= end {
                return try Reply.apiError(.startDateAfterEndDate, "Start date after end date.")
            }
            if let ms = start ?? nil { items = items.filter { ($0.payload.purchaseDate ?? .distantPast).timeIntervalSince1970 * 1000 >= Double(ms) } }
            if let ms = end ?? nil { items = items.filter { ($0.payload.purchaseDate ?? .distantPast).timeIntervalSince1970 * 1000 < Double(ms) } }
            let products = query.getAll("productId").map { String($0) }
            if !products.isEmpty { items = items.filter { products.contains($0.payload.productId ?? "") } }
            let named: [String: ProductType] = ["AUTO_RENEWABLE": .autoRenewableSubscription, "NON_RENEWABLE": .nonRenewingSubscription,
                                                "CONSUMABLE": .consumable, "NON_CONSUMABLE": .nonConsumable]
            let asked = query.getAll("productType").map { String($0) }
            guard asked.allSatisfy({ named[$0] != nil }) else { return try Reply.apiError(.invalidProductType, "Invalid product type.") }
            let types = asked.compactMap { named[$0] }
            if !types.isEmpty { items = items.filter { types.contains($0.payload.type ?? ProductType(rawValue: "")) } }
            let groups = query.getAll("subscriptionGroupIdentifier").map { String($0) }
            if !groups.isEmpty { items = items.filter { groups.contains($0.payload.subscriptionGroupIdentifier ?? "") } }
            if let text = query["revoked"] {
                // Apple's Python client sends Python's spelling ("True"); Apple takes either case.
                let revoked = text.lowercased()
                guard revoked == "true" || revoked == "false" else { return try Reply.apiError(.invalidRevoked, "Invalid revoked.") }
                items = items.filter { ($0.payload.revocationDate != nil) == (revoked == "true") }
            }
            if let ownership = query["inAppOwnershipType"] {
                guard ownership == "PURCHASED" || ownership == "FAMILY_SHARED" else { return try Reply.apiError(.invalidInAppOwnershipType, "Invalid in-app ownership type.") }
                items = items.filter { $0.payload.inAppOwnershipType?.rawValue == String(ownership) }
            }
            switch query["sort"] {
            case nil, "ASCENDING": break
            case "DESCENDING": descending = true
            default: return try Reply.apiError(.invalidSort, "Invalid sort.")
            }
        }
        // Where each transaction stands: history by its last change; refunds by revocation date (Apple's milliseconds),
        // then last change. The pages run in this order, so the revision's cursor can neither skip nor repeat one.
        let position: @Sendable (StoreEngine.Revised) -> HistoryPosition = { item in
            refundsOnly ? HistoryPosition(major: Int64(((item.payload.revocationDate ?? .distantPast).timeIntervalSince1970 * 1000).rounded()), minor: item.revision)
                        : HistoryPosition(major: item.revision, minor: 0)
        }
        items.sort { position($0) < position($1) }
        if descending { items.reverse() }
        var after: HistoryPosition?
        if let revision = query["revision"] {
            guard let decoded = Base64.decode(revision.utf8), let cursor = HistoryPosition(token: String(decoding: decoded, as: UTF8.self)),
                  cursor.descending == descending else {
                return try Reply.apiError(.invalidRequestRevision, "Invalid request revision.")
            }
            after = cursor
            items = items.filter { descending ? position($0) < cursor : position($0) > cursor }
        }
        let page = Array(items.prefix(Self.pageSize))
        // A page with nothing new hands back the revision it was asked with: nothing is skipped on the next call.
        var last = page.last.map(position) ?? after ?? (descending ? HistoryPosition(major: .max, minor: .max) : HistoryPosition(major: 0, minor: 0))
        last.descending = descending
        let hasMore = items.count > page.count
        let signed = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, item) in page.enumerated() { group.addTask { (index, try await engine.sign(item.payload)) } }
            var result = [String](repeating: "", count: page.count)
            for try await (index, jws) in group { result[index] = jws }
            return result
        }
        let revision = Base64.urlEncode(Array(last.token.utf8))
        if refundsOnly {
            var response = RefundHistoryResponse()
            response.signedTransactions = signed
            response.revision = revision
            response.hasMore = hasMore
            return try Reply.json(response)
        }
        var response = HistoryResponse()
        response.revision = revision
        response.hasMore = hasMore
        response.bundleId = engine.catalog.bundleId
        response.appAppleId = engine.catalog.appAppleId
        response.environment = engine.environment
        response.signedTransactions = signed
        return try Reply.json(response)
    }

    /// Get Notification History: “Get a list of notifications that the App Store server attempted to send to your server.”
    /// 20 a page, `paginationToken` to continue; start within the last 180 days, before end.
    @Sendable func getNotificationHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await request.decode(NotificationHistoryRequest.self)
        let now = engine.clock.now
        guard let start = body.startDate else { return try Reply.apiError(.invalidStartDate, "Invalid start date.") }
        guard let end = body.endDate else { return try Reply.apiError(.invalidEndDate, "Invalid end date.") }
        guard now.timeIntervalSince(start) <= 180 * 86_400 else { return try Reply.apiError(.startDateTooFarInPast, "Start date too far in past.") }
        guard start < end else { return try Reply.apiError(.startDateAfterEndDate, "Start date after end date.") }
        if body.notificationSubtype != nil, body.notificationType == nil {
            return try Reply.apiError(.invalidNotificationType, "A subtype needs a notification type.")
        }
        // "Include either the transactionId or the notificationType in your query, but not both."
        if body.transactionId != nil, body.notificationType != nil {
            return try Reply.apiError(.multipleFiltersSupplied, "Invalid request. Supply either a transactionId or a notificationType.")
        }
        if let id = body.transactionId, !Self.isTransactionId(id) { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let records = await engine.notificationHistory(from: start, to: end, type: body.notificationType, subtype: body.notificationSubtype,
                                                       transactionId: body.transactionId, onlyFailures: body.onlyFailures ?? false)
        var offset = 0
        if let token = request.uri.queryParameters["paginationToken"] {
            guard let decoded = Base64.decode(token.utf8), let text = String(validating: decoded, as: UTF8.self),
                  text.hasPrefix("n:"), let value = Int(text.dropFirst(2)), value >= 0 else {
                return try Reply.apiError(.invalidPaginationToken, "Invalid pagination token.")
            }
            offset = min(value, records.count)
        }
        let page = records[offset..<min(offset + Self.pageSize, records.count)]
        var response = NotificationHistoryResponse()
        response.hasMore = offset + page.count < records.count
        response.paginationToken = response.hasMore == true ? Base64.urlEncode(Array("n:\(offset + page.count)".utf8)) : nil
        response.notificationHistory = page.map { NotificationHistoryResponseItem(signedPayload: $0.signedPayload, sendAttempts: $0.attempts) }
        return try Reply.json(response)
    }
}

/// Where a page of history ended, as its `revision` says it: the last transaction's sort key, and which way the pages
/// run (a revision read one way is refused the other way, as a mixed-up cursor would skip or repeat transactions).
struct HistoryPosition: Comparable, Sendable {
    var major: Int64
    var minor: Int64
    var descending = false

    init(major: Int64, minor: Int64) {
        self.major = major
        self.minor = minor
    }

    init?(token: String) {
        let parts = token.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "a" || parts[0] == "d", let major = Int64(parts[1]), let minor = Int64(parts[2]) else { return nil }
        self.init(major: major, minor: minor)
        descending = parts[0] == "d"
    }

    var token: String { "\(descending ? "d" : "a"):\(major):\(minor)" }

    static func < (lhs: HistoryPosition, rhs: HistoryPosition) -> Bool { (lhs.major, lhs.minor) < (rhs.major, rhs.minor) }
    static func == (lhs: HistoryPosition, rhs: HistoryPosition) -> Bool { (lhs.major, lhs.minor) == (rhs.major, rhs.minor) }
}
