import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `/admin/webhooks`: the outbox of events for the app's backend — what waits, what was delivered, what failed — a
/// replay of one event, and a `TEST` event.
extension AdminRoutes {
    func addWebhookRoutes(to admin: some RouterMethods<Context>) {
        admin.get("webhooks", use: webhooks)
        admin.post("webhooks/test", use: testWebhook)
        admin.post("webhooks/:id/replay", use: replayWebhook)
    }


    /// `GET /admin/webhooks?state=pending|delivered|failed&limit=N`: newest first.
    @Sendable func webhooks(_ request: Request, context: Context) async throws -> Response {
        var state: StoredWebhookEvent.State?
        if let name = request.uri.queryParameters["state"].map(String.init) {
            guard let known = StoredWebhookEvent.State(rawValue: name) else {
                throw APIError.badRequest("state is one of \(StoredWebhookEvent.State.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            state = known
        }
        let events = try await services.ledger.webhookEvents(state: state, limit: limit(request))
        return try JSONReply.encode(WebhooksReply(configured: services.webhooks != nil, events: events))
    }

    /// `POST /admin/webhooks/{id}/replay`: from the first attempt again (audited); 404 for an unknown id.
    @Sendable func replayWebhook(_ request: Request, context: Context) async throws -> Response {
        let id = try context.parameters.decoded("id")
        guard try await services.ledger.replayWebhookEvent(id, actor: "admin", now: Date()) else {
            throw APIError(.notFound, code: .webhookEventNotFound, "no webhook event \(id)")
        }
        return try JSONReply.encode(WebhookReplayReply(replayed: id))
    }

    /// `POST /admin/webhooks/test`: queues a `TEST` event (audited); 400 `webhooks_not_configured` without a receiver.
    @Sendable func testWebhook(_ request: Request, context: Context) async throws -> Response {
        guard services.webhooks != nil else {
            throw APIError(.badRequest, code: .webhooksNotConfigured, "no webhook URL is configured: set webhooks.url or IAPKIT_WEBHOOK_URL")
        }
        let event = try await services.ledger.emitTestWebhook(actor: "admin", now: Date())
        return try JSONReply.encode(WebhookTestReply(queued: event.id))
    }
}
