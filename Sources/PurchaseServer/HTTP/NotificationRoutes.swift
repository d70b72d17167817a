import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `POST /v1/notifications/appstore`: App Store Server Notifications V2. No token: the signature is the proof.
/// The answer is 200 as soon as the notification is durably stored and applied, so Apple does not retry needlessly;
/// a storage failure answers 503 so that Apple does retry.
struct NotificationRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    /// The largest notification body read: Apple's are a few KiB.
    static var maxBody: Int { 256 * 1024 }

    func add(to router: some RouterMethods<Context>) {
        router.post("v1/notifications/appstore", use: receive)
    }

    @Sendable func receive(_ request: Request, _ context: Context) async throws -> Response {
        do {
            let body = try await request.decodeJSON(ResponseBodyV2.self, limit: Self.maxBody)
            let event = try await services.verifier.notification(body.signedPayload)
            services.observeAppleClock(event.signedDate, environment: event.transaction?.environment)
            let outcome = try await services.ledger.apply(event, now: services.now())
            // The answer a consumption request owes was stored with it: sent now if it can be, by the reconciler if not.
            // Now means one attempt of a few seconds: Apple expects this reply within seconds, and a call with the
            // usual retries can take longer (Apple would count the delivery failed and send it again).
            if event.type == .consumptionRequest {
                do { try await ConsumptionResponder(services: services).answer(notificationUUID: event.notificationUUID, within: .seconds(3)) } catch {
                    services.metrics.consumptionAnswer("postponed")
                }
            }
            services.metrics.notification(outcome == .applied ? .applied : .duplicate)
            return try JSONReply.encode(NotificationReply(result: outcome == .applied ? .applied : .duplicate))
        } catch {
            services.metrics.notification(.refused)
            throw error
        }
    }
}
