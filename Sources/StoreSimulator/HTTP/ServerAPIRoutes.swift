import AppStoreFormats
import Foundation
import Hummingbird

/// The App Store Server API, same paths and bodies as Apple's, behind Apple-style JWT authentication.
struct ServerAPIRoutes {
    let services: SimulatorServer.Services
    var engine: StoreEngine { services.engine }
    var authenticator: APIAuthenticator { services.authenticator }

    /// Apple answers an unauthenticated call with a bare 401 and no JSON.
    struct AuthMiddleware: RouterMiddleware {
        let authenticator: APIAuthenticator
        func handle(_ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response) async throws -> Response {
            guard authenticator.isAuthorized(request.headers[.authorization]) else {
                return Response(status: .unauthorized, headers: [.contentType: "text/plain"],
                                body: .init(byteBuffer: ByteBuffer(string: "Unauthenticated\n\nRequest ID: \(UUID().uuidString).0\n")))
            }
            return try await next(request, context)
        }
    }

    static let pageSize = 20

    func add(to router: Router<BasicRequestContext>) {
        let api = router.group("inApps").add(middleware: AuthMiddleware(authenticator: authenticator))

        api.get("v1/transactions/:id") { _, context in
            let id = try context.parameters.require("id")
            guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
            guard let payload = await engine.transaction(id) else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
            return try Reply.json(TransactionInfoResponse(signedTransactionInfo: try await engine.sign(payload)))
        }

        api.get("v2/history/:id") { request, context in try await history(request, context, refundsOnly: false) }
        // Version 1 (deprecated, still answered): the same, less the consumables the app finished (unless revoked).
        api.get("v1/history/:id") { request, context in try await history(request, context, refundsOnly: false, finishedConsumables: false) }
        api.get("v2/refund/lookup/:id") { request, context in try await history(request, context, refundsOnly: true) }

        api.get("v1/subscriptions/:id") { request, context in
            let id = try context.parameters.require("id")
            guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
            let wanted = request.uri.queryParameters.getAll("status").compactMap { Int($0) }
            guard wanted.allSatisfy({ (1...5).contains($0) }) else { return try Reply.apiError(.invalidStatus, "Invalid status.") }
            let statuses = try await engine.subscriptionStatuses(containing: id)
            let known = await engine.transaction(id) != nil
            guard !statuses.isEmpty || known else {
                return try Reply.apiError(.originalTransactionIdNotFound, "Original transaction id not found.")
            }
            var response = StatusResponse()
            response.environment = engine.environment
            response.bundleId = engine.catalog.bundleId
            response.appAppleId = engine.catalog.appAppleId
            var groups: [String: [LastTransactionsItem]] = [:]
            for status in statuses where wanted.isEmpty || wanted.contains(status.status.rawValue) {
                var item = LastTransactionsItem()
                item.status = status.status
                item.originalTransactionId = status.latest.originalTransactionId
                item.signedTransactionInfo = try await engine.sign(status.latest)
                item.signedRenewalInfo = try await engine.sign(status.renewal)
                groups[status.group, default: []].append(item)
            }
            response.data = groups.keys.sorted().map { group in
                var entry = SubscriptionGroupIdentifierItem()
                entry.subscriptionGroupIdentifier = group
                entry.lastTransactions = groups[group]
                return entry
            }
            return try Reply.json(response)
        }

        api.get("v1/lookup/:orderId") { _, context in
            // The simulator's order id for a purchase is "SIM" followed by its transaction id.
            let orderId = try context.parameters.require("orderId")
            var response = OrderLookupResponse()
            if orderId.hasPrefix("SIM"), let payload = await engine.transaction(String(orderId.dropFirst(3))) {
                response.status = 0
                response.signedTransactions = [try await engine.sign(payload)]
            } else {
                response.status = 1
                response.signedTransactions = []
            }
            return try Reply.json(response)
        }

        api.put("v1/transactions/:id/appAccountToken") { request, context in
            let id = try context.parameters.require("id")
            struct Body: Decodable { var appAccountToken: String? }
            let body = try await request.decode(Body.self)
            guard let text = body.appAccountToken, let token = UUID(uuidString: text) else {
                return try Reply.apiError(.invalidAppAccountTokenUUID, "Invalid appAccountToken.")
            }
            guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidOriginalTransactionId, "Invalid original transaction id.") }
            switch try await engine.setAppAccountToken(originalTransactionId: id, token) {
            case .set: return Reply.empty()
            case .notFound: return try Reply.apiError(.originalTransactionIdNotFound, "Original transaction id not found.")
            case .notOriginal:
                return try Reply.apiError(.transactionIdIsNotOriginalTransactionId, "The transaction id is not an original transaction id.")
            case .familyShared: return try Reply.apiError(.familyTransactionNotSupported, "Family Sharing transactions are not supported.")
            }
        }

        api.post("v1/transactions/:id/finish") { _, context in
            let id = try context.parameters.require("id")
            guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
            guard try await engine.finishEverywhere(id) else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
            return Reply.empty()
        }

        api.get("v1/transactions/appTransactions/:id") { _, context in
            let id = try context.parameters.require("id")
            guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
            guard let payload = try await engine.appTransaction(containing: id) else {
                return try Reply.apiError(.appTransactionDoesNotExist, "No app transaction exists for the customer.")
            }
            return try Reply.json(AppTransactionInfoResponse(signedAppTransactionInfo: try await engine.sign(payload)))
        }

        api.post("v1/subscriptions/extend/mass") { request, _ in
            let body = try await request.decode(MassExtendRenewalDateRequest.self)
            guard let days = body.extendByDays, (1...90).contains(days) else { return try Reply.apiError(.invalidExtendByDays, "Invalid extend by days value.") }
            guard let reason = body.extendReasonCode, (0...3).contains(reason) else { return try Reply.apiError(.invalidExtendReasonCode, "Invalid extend reason code.") }
            guard let requestId = body.requestIdentifier, !requestId.isEmpty, requestId.count <= 128 else {
                return try Reply.apiError(.invalidRequestIdentifier, "Invalid request identifier.")
            }
            guard let productId = body.productId, engine.catalog.product(productId)?.type == .autoRenewableSubscription else {
                return try Reply.apiError(.invalidProductId, "Invalid product id.")
            }
            if let codes = body.storefrontCountryCodes {
                guard !codes.isEmpty else { return try Reply.apiError(.invalidEmptyStorefrontCountryCodeList, "Invalid empty storefront country code list.") }
                guard codes.allSatisfy({ $0.utf8.count == 3 && $0.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) } }) else {
                    return try Reply.apiError(.invalidStorefrontCountryCode, "Invalid storefront country code.")
                }
            }
            try await engine.massExtendRenewal(productId: productId, days: days, storefronts: body.storefrontCountryCodes, requestIdentifier: requestId)
            var response = MassExtendRenewalDateResponse()
            response.requestIdentifier = requestId
            return try Reply.json(response)
        }
        api.get("v1/subscriptions/extend/mass/:productId/:requestId") { _, context in
            let (productId, requestId) = (try context.parameters.require("productId"), try context.parameters.require("requestId"))
            guard let found = await engine.massExtension(productId: productId, requestIdentifier: requestId) else {
                return try Reply.apiError(.statusRequestNotFound, "Status request not found.")
            }
            var response = MassExtendRenewalDateStatusResponse()
            response.requestIdentifier = requestId
            response.complete = true
            response.completeDate = found.completed
            response.succeededCount = found.succeeded
            response.failedCount = found.failed
            return try Reply.json(response)
        }

        api.put("v1/subscriptions/extend/:id") { request, context in
            let id = try context.parameters.require("id")
            let body = try await request.decode(ExtendRenewalDateRequest.self)
            guard let days = body.extendByDays, (1...90).contains(days) else { return try Reply.apiError(.invalidExtendByDays, "Invalid extend by days value.") }
            guard let reason = body.extendReasonCode, (0...3).contains(reason) else { return try Reply.apiError(.invalidExtendReasonCode, "Invalid extend reason code.") }
            guard let requestId = body.requestIdentifier, !requestId.isEmpty, requestId.count <= 128 else {
                return try Reply.apiError(.invalidRequestIdentifier, "Invalid request identifier.")
            }
            switch try await engine.extendRenewal(originalTransactionId: id, days: days, requestIdentifier: requestId) {
            case .notFound: return try Reply.apiError(.originalTransactionIdNotFound, "Original transaction id not found.")
            case .ineligible: return try Reply.apiError(.subscriptionExtensionIneligible, "Subscription extension ineligible.")
            case .familyShared:
                return try Reply.apiError(.familySharedSubscriptionExtensionIneligible, "Family Sharing subscriptions are not eligible for a renewal date extension.")
            case .limitReached: return try Reply.apiError(.subscriptionMaxExtension, "Subscription max extension.")
            case .extended(let payload):
                var response = ExtendRenewalDateResponse()
                response.originalTransactionId = id
                response.webOrderLineItemId = payload.webOrderLineItemId
                response.success = true
                response.effectiveDate = payload.expiresDate
                return try Reply.json(response)
            }
        }

        api.post("v1/notifications/test") { _, _ in
            let token = try await engine.requestTestNotification()
            try await services.delivery?.deliverDue()
            return try Reply.json(SendTestNotificationResponse(testNotificationToken: token))
        }
        api.get("v1/notifications/test/:token") { _, context in
            let token = try context.parameters.require("token")
            guard let record = await engine.notifications().first(where: { $0.testToken == token }) else {
                return try Reply.apiError(.testNotificationNotFound, "Test notification not found.")
            }
            var response = CheckTestNotificationResponse()
            response.signedPayload = record.signedPayload
            response.sendAttempts = record.attempts
            return try Reply.json(response)
        }
        api.post("v1/notifications/history") { request, _ in try await notificationHistory(request) }

        api.put("v1/transactions/consumption/:id") { request, context in
            let id = try context.parameters.require("id")
            struct Body: Decodable { var customerConsented: Bool? }
            let body = try await request.decode(Body.self)
            guard body.customerConsented == true else { return try Reply.apiError(.invalidCustomerConsented, "Invalid customer consented.") }
            guard await engine.transaction(id) != nil else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
            return Reply.empty(.accepted)
        }
        api.put("v2/transactions/consumption/:id") { request, context in try await sendConsumptionInformation(request, context) }
    }

    /// Send Consumption Information (API 1.19), checked as Apple documents it; what passes is kept for the customer's
    /// open refund request, which Apple then decides by it (``StoreEngine/decideRefund(_:)``).
    private func sendConsumptionInformation(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let body = try await request.decode(ConsumptionRequest.self)
        guard body.customerConsented == true else {
            return try Reply.apiError(.invalidCustomerConsented, "Invalid request. The customer consented field is required and must indicate the customer consented.")
        }
        guard body.sampleContentProvided != nil else {
            return try Reply.apiError(.invalidSampleContentProvided, "Invalid request. The sample content provided field is invalid.")
        }
        guard let delivery = body.deliveryStatus, DeliveryStatus.known.contains(delivery) else {
            return try Reply.apiError(.invalidDeliveryStatus, "Invalid request. The delivery status field is invalid.")
        }
        if let preference = body.refundPreference, !RefundPreference.known.contains(preference) {
            return try Reply.apiError(.invalidRefundPreference, "Invalid request. The refund preference field is invalid.")
        }
        guard let transaction = await engine.transaction(id) else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
        if transaction.inAppOwnershipType == .familyShared {
            return try Reply.apiError(.familyTransactionNotSupported, "Invalid request. Family Sharing transactions aren't supported by this endpoint.")
        }
        if let percentage = body.consumptionPercentage {
            if transaction.type == .autoRenewableSubscription {
                return try Reply.apiError(.consumptionPercentageAutoRenewableSubscription,
                                          "Invalid request. The consumption percentage field is not supported for auto-renewable subscription transactions.")
            }
            // Apple documents ConsumptionPercentageOutOfRangeError and UndeliveredConsumptionPercentageNonZeroError
            // without their codes in any source at hand: answered as the general bad request until they are known.
            guard (0...100_000).contains(percentage) else {
                return try Reply.apiError(.generalBadRequest, "Invalid request. The consumption percentage is out of range.")
            }
            guard delivery == .delivered || percentage == 0 else {
                return try Reply.apiError(.generalBadRequest, "Invalid request. The consumption percentage must be zero for the provided delivery status.")
            }
        }
        // GRANT_PRORATED needs a share for what is not an auto-renewable subscription: more than nothing, less than all.
        if body.refundPreference == .grantProrated, transaction.type != .autoRenewableSubscription {
            guard let percentage = body.consumptionPercentage, percentage > 0, percentage < 100_000 else {
                return try Reply.apiError(.generalBadRequest, "Invalid request. A prorated refund preference needs a consumption percentage above 0 and below 100000.")
            }
        }
        try await engine.recordConsumption(id, body)
        return Reply.empty(.accepted)
    }
    /// History (or refund history): the customer's transactions, filtered, 20 a page, continued by `revision`.
    private func history(_ request: Request, _ context: BasicRequestContext, refundsOnly: Bool, finishedConsumables: Bool = true) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let query = request.uri.queryParameters
        var items = refundsOnly ? await engine.refunds(containing: id) : await engine.history(containing: id)
        let known = await engine.transaction(id) != nil
        guard !items.isEmpty || known else {
            return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.")
        }
        if !finishedConsumables {
            let unfinished = await engine.unfinishedTransactionIds()
            items = items.filter { $0.type != .consumable || $0.revocationDate != nil || unfinished.contains($0.transactionId ?? "") }
        }
        if !refundsOnly {
            if let start = query["startDate"] {
                guard let ms = Double(start) else { return try Reply.apiError(.invalidStartDate, "Invalid start date.") }
                items = items.filter { ($0.purchaseDate ?? .distantPast).timeIntervalSince1970 * 1000 >= ms }
            }
            if let end = query["endDate"] {
                guard let ms = Double(end) else { return try Reply.apiError(.invalidEndDate, "Invalid end date.") }
                items = items.filter { ($0.purchaseDate ?? .distantPast).timeIntervalSince1970 * 1000 < ms }
            }
            let products = query.getAll("productId").map { String($0) }
            if !products.isEmpty { items = items.filter { products.contains($0.productId ?? "") } }
            let types = try query.getAll("productType").map { value -> ProductType in
                switch value {
                case "AUTO_RENEWABLE": return .autoRenewableSubscription
                case "NON_RENEWABLE": return .nonRenewingSubscription
                case "CONSUMABLE": return .consumable
                case "NON_CONSUMABLE": return .nonConsumable
                default: throw HTTPError(.badRequest, message: "invalid productType")
                }
            }
            if !types.isEmpty { items = items.filter { types.contains($0.type ?? ProductType(rawValue: "")) } }
            let groups = query.getAll("subscriptionGroupIdentifier").map { String($0) }
            if !groups.isEmpty { items = items.filter { groups.contains($0.subscriptionGroupIdentifier ?? "") } }
            if let text = query["revoked"] {
                // Apple's Python client sends Python's spelling ("True"); Apple takes either case.
                let revoked = text.lowercased()
                guard revoked == "true" || revoked == "false" else { return try Reply.apiError(.invalidRevoked, "Invalid revoked.") }
                items = items.filter { ($0.revocationDate != nil) == (revoked == "true") }
            }
            if let ownership = query["inAppOwnershipType"] {
                guard ownership == "PURCHASED" || ownership == "FAMILY_SHARED" else { return try Reply.apiError(.invalidInAppOwnershipType, "Invalid in-app ownership type.") }
                items = items.filter { $0.inAppOwnershipType?.rawValue == String(ownership) }
            }
            switch query["sort"] {
            case nil, "ASCENDING": break
            case "DESCENDING": items.reverse()
            default: return try Reply.apiError(.invalidSort, "Invalid sort.")
            }
        }
        var offset = 0
        if let revision = query["revision"] {
            guard let decoded = Base64.decode(revision.utf8), let text = String(validating: decoded, as: UTF8.self),
                  text.hasPrefix("o:"), let value = Int(text.dropFirst(2)), value >= 0 else {
                return try Reply.apiError(.invalidRequestRevision, "Invalid request revision.")
            }
            offset = min(value, items.count)
        }
        let page = Array(items[offset..<min(offset + Self.pageSize, items.count)])
        let next = offset + page.count
        let signed = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, payload) in page.enumerated() { group.addTask { (index, try await engine.sign(payload)) } }
            var result = [String](repeating: "", count: page.count)
            for try await (index, jws) in group { result[index] = jws }
            return result
        }
        let revision = Base64.urlEncode(Array("o:\(next)".utf8))
        if refundsOnly {
            var response = RefundHistoryResponse()
            response.signedTransactions = signed
            response.revision = revision
            response.hasMore = next < items.count
            return try Reply.json(response)
        }
        var response = HistoryResponse()
        response.revision = revision
        response.hasMore = next < items.count
        response.bundleId = engine.catalog.bundleId
        response.appAppleId = engine.catalog.appAppleId
        response.environment = engine.environment
        response.signedTransactions = signed
        return try Reply.json(response)
    }

    /// Notification history: 20 a page, `paginationToken` to continue; start within the last 180 days, before end.
    private func notificationHistory(_ request: Request) async throws -> Response {
        let body = try await request.decode(NotificationHistoryRequest.self)
        let now = engine.clock.now
        guard let start = body.startDate else { return try Reply.apiError(.invalidStartDate, "Invalid start date.") }
        guard let end = body.endDate else { return try Reply.apiError(.invalidEndDate, "Invalid end date.") }
        guard now.timeIntervalSince(start) <= 180 * 86_400 else { return try Reply.apiError(.startDateTooFarInPast, "Start date too far in past.") }
        guard start < end else { return try Reply.apiError(.startDateAfterEndDate, "Start date after end date.") }
        if body.notificationSubtype != nil, body.notificationType == nil {
            return try Reply.apiError(.invalidNotificationType, "A subtype needs a notification type.")
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

    static func isTransactionId(_ id: String) -> Bool { !id.isEmpty && id.count <= 32 && id.allSatisfy(\.isNumber) }
}
