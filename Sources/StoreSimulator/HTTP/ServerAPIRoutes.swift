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
        api.get("v1/transactions/:id", use: getTransactionInfo)
        api.get("v2/history/:id", use: getTransactionHistory)
        api.get("v1/history/:id", use: getTransactionHistoryV1)
        api.get("v2/refund/lookup/:id", use: getRefundHistory)
        api.get("v1/subscriptions/:id", use: getAllSubscriptionStatuses)
        api.get("v1/lookup/:orderId", use: lookUpOrderId)
        api.put("v1/transactions/:id/appAccountToken", use: setAppAccountToken)
        api.post("v1/transactions/:id/finish", use: finishTransaction)
        api.get("v1/transactions/appTransactions/:id", use: getAppTransactionInfo)
        api.post("v1/subscriptions/extend/mass", use: extendRenewalDatesForAllActiveSubscribers)
        api.get("v1/subscriptions/extend/mass/:productId/:requestId", use: getStatusOfRenewalDateExtensions)
        api.put("v1/subscriptions/extend/:id", use: extendRenewalDate)
        api.post("v1/notifications/test", use: requestTestNotification)
        api.get("v1/notifications/test/:token", use: getTestNotificationStatus)
        api.post("v1/notifications/history", use: getNotificationHistory)
        api.put("v1/transactions/consumption/:id", use: sendConsumptionInformationV1)
        api.put("v2/transactions/consumption/:id", use: sendConsumptionInformation)
    }

    /// Get Transaction Info: “Get information about a single transaction for your app.”
    @Sendable func getTransactionInfo(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        guard let payload = await engine.transaction(id) else {
            // Apple answers an app transaction id here with 4000048, as on the other endpoints that take none.
            if await engine.isAppTransactionId(id) {
                return try Reply.apiError(.appTransactionIdNotSupported, "Invalid request. App transactions aren't supported by this endpoint.")
            }
            return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.")
        }
        return try Reply.json(TransactionInfoResponse(signedTransactionInfo: try await engine.sign(payload)))
    }

    /// Get All Subscription Statuses: “Get the statuses for all of a customer’s auto-renewable subscriptions in your app.”
    @Sendable func getAllSubscriptionStatuses(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let wanted = request.uri.queryParameters.getAll("status").map { Int($0) ?? 0 }
        guard wanted.allSatisfy({ (1...5).contains($0) }) else { return try Reply.apiError(.invalidStatus, "Invalid status.") }
        let statuses = try await engine.subscriptionStatuses(containing: id)
        guard await engine.knows(id) else {
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

    /// Look Up Order ID: “Get a customer’s in-app purchases from a receipt using the order ID.”
    @Sendable func lookUpOrderId(_ request: Request, context: BasicRequestContext) async throws -> Response {
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

    /// Set App Account Token: “Sets the app account token value for a purchase the customer makes outside your app, or
    /// updates its value in an existing transaction.”
    @Sendable func setAppAccountToken(_ request: Request, context: BasicRequestContext) async throws -> Response {
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

    /// Finish Transaction: “Notifies the App Store server that your system has finished processing the customer’s
    /// transaction.”
    @Sendable func finishTransaction(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        guard try await engine.finishEverywhere(id) else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
        return Reply.empty()
    }

    /// Get App Transaction Info: “Get a customer’s app transaction information for your app.”
    @Sendable func getAppTransactionInfo(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        guard let payload = try await engine.appTransaction(containing: id) else {
            return try Reply.apiError(.appTransactionDoesNotExist, "No app transaction exists for the customer.")
        }
        return try Reply.json(AppTransactionInfoResponse(signedAppTransactionInfo: try await engine.sign(payload)))
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers: “Uses a subscription’s product identifier to extend
    /// the renewal date for all of its eligible active subscribers.”
    @Sendable func extendRenewalDatesForAllActiveSubscribers(_ request: Request, context: BasicRequestContext) async throws -> Response {
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

    /// Get Status of Subscription Renewal Date Extensions: “Checks whether a renewal date extension request completed,
    /// and provides the final count of successful or failed extensions.”
    @Sendable func getStatusOfRenewalDateExtensions(_ request: Request, context: BasicRequestContext) async throws -> Response {
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

    /// Extend a Subscription Renewal Date: “Extends the renewal date of a customer’s active subscription using the
    /// original transaction identifier.”
    @Sendable func extendRenewalDate(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard Self.isTransactionId(id) else { return try Reply.apiError(.invalidOriginalTransactionId, "Invalid original transaction id.") }
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

    /// Request a Test Notification: “Ask App Store Server Notifications to send a test notification to your server.”
    @Sendable func requestTestNotification(_ request: Request, context: BasicRequestContext) async throws -> Response {
        // No notification URL for the app in this environment: nothing to send to (Apple's 4040007).
        guard let delivery = services.delivery, await !delivery.urls.isEmpty else {
            return try Reply.apiError(.serverNotificationUrlNotFound, "No App Store Server Notification URL found for provided app. Check that a URL is configured in App Store Connect for this environment.")
        }
        let token = try await engine.requestTestNotification()
        try await services.delivery?.deliverDue()
        return try Reply.json(SendTestNotificationResponse(testNotificationToken: token))
    }

    /// Get Test Notification Status: “Check the status of the test App Store server notification sent to your server.”
    @Sendable func getTestNotificationStatus(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let token = try context.parameters.require("token")
        guard let record = await engine.notifications().first(where: { $0.testToken == token }) else {
            return try Reply.apiError(.testNotificationNotFound, "Test notification not found.")
        }
        var response = CheckTestNotificationResponse()
        response.signedPayload = record.signedPayload
        response.sendAttempts = record.attempts
        return try Reply.json(response)
    }

    /// Send Consumption Information V1 (deprecated): “Send consumption information about a consumable in-app purchase to
    /// the App Store after your server receives a consumption request notification.”
    @Sendable func sendConsumptionInformationV1(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        struct Body: Decodable { var customerConsented: Bool? }
        let body = try await request.decode(Body.self)
        guard body.customerConsented == true else { return try Reply.apiError(.invalidCustomerConsented, "Invalid customer consented.") }
        guard await engine.transaction(id) != nil else { return try Reply.apiError(.transactionIdNotFound, "Transaction id not found.") }
        return Reply.empty(.accepted)
    }

    /// Send Consumption Information (API 1.19): “Send consumption information about an In-App Purchase to the App Store
    /// after your server receives a consumption request notification.” Checked as Apple documents it; what passes is kept
    /// for the customer's open refund request, which Apple then decides by it (``StoreEngine/decideRefund(_:)``).
    @Sendable func sendConsumptionInformation(_ request: Request, context: BasicRequestContext) async throws -> Response {
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
        if await engine.isAppTransactionId(id) {
            return try Reply.apiError(.appTransactionIdNotSupported, "Invalid request. The endpoint doesn't support an app transaction ID.")
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

    static func isTransactionId(_ id: String) -> Bool { !id.isEmpty && id.count <= 32 && id.allSatisfy(\.isNumber) }
}
