import AppStoreFormats
import Crypto
import Foundation
import Hummingbird

/// The Advanced Commerce API's server endpoints (`/advancedCommerce/v1/…`, the same hosts, key and JWT as the App
/// Store Server API): every one a POST with a JSON body naming a subscription by any of its transactions.
struct AdvancedCommerceRoutes {
    let services: SimulatorServer.Services
    var engine: StoreEngine { services.engine }

    func add(to router: Router<BasicRequestContext>) {
        let api = router.group("advancedCommerce/v1").add(middleware: ServerAPIRoutes.AuthMiddleware(authenticator: services.authenticator))
        api.post("subscription/changeMetadata/:id", use: changeMetadata)
        api.post("subscription/changePrice/:id", use: changePrice)
        api.post("subscription/migrate/:id", use: migrate)
        api.post("subscription/cancel/:id", use: cancel)
        api.post("subscription/revoke/:id", use: revoke)
        api.post("transaction/requestRefund/:id", use: requestRefund)
    }

    @Sendable func changeMetadata(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommerceChangeMetadataRequest.self) { try await engine.advancedCommerceChangeMetadata(transactionId: $0, $1, fingerprint: $2) }
    }

    @Sendable func changePrice(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommercePriceChangeRequest.self) { try await engine.advancedCommerceChangePrice(transactionId: $0, $1, fingerprint: $2) }
    }

    @Sendable func migrate(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommerceMigrateRequest.self) { try await engine.advancedCommerceMigrate(transactionId: $0, $1, fingerprint: $2) }
    }

    @Sendable func cancel(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommerceCancelRequest.self) { try await engine.advancedCommerceCancel(transactionId: $0, $1, fingerprint: $2) }
    }

    @Sendable func revoke(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommerceRevokeRequest.self) { try await engine.advancedCommerceRevoke(transactionId: $0, $1, fingerprint: $2) }
    }

    @Sendable func requestRefund(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try await serve(request, context, AdvancedCommerceRequestRefundRequest.self) { try await engine.advancedCommerceRequestRefund(transactionId: $0, $1, fingerprint: $2) }
    }

    /// Reads the body as `Body` (a body of another shape is Apple's MalformedPayload), runs the operation with a
    /// fingerprint of what was asked (a retry with the same request reference id must ask the same), answers JSON,
    /// delivers the notification the change made.
    private func serve<Body: Codable & Sendable, Answer: Encodable & Sendable>(
        _ request: Request, _ context: BasicRequestContext, _ type: Body.Type,
        _ operation: @Sendable (String, Body, String) async throws -> Result<Answer, AdvancedCommerceRefusal>
    ) async throws -> Response {
        let id = try context.parameters.require("id")
        guard ServerAPIRoutes.isTransactionId(id) else { return try Reply.apiError(.invalidTransactionId, "Invalid transaction id.") }
        let bytes = try await request.bytes()
        guard let body = try? AppStoreJSON.decoder().decode(Body.self, from: Data(bytes)) else {
            return try Reply.apiError(.malformedPayload, "Malformed payload.")
        }
        // What was asked, not how it was spelled: a retry may order its keys otherwise.
        let canonical = JSONEncoder()
        canonical.outputFormatting = .sortedKeys
        let fingerprint = request.uri.path + "#" + SHA256.hash(data: try canonical.encode(body)).map { String(format: "%02x", $0) }.joined()
        switch try await operation(id, body, fingerprint) {
        case .failure(let refusal): return try Reply.apiError(refusal.code, refusal.message)
        case .success(let answer):
            try await services.delivery?.deliverDue()
            return try Reply.json(answer)
        }
    }
}
