import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseLedger

/// `POST /v1/notifications/appstore`: App Store Server Notifications V2. No token: the signature is the proof.
/// The answer is 200 as soon as the notification is durably stored and applied, so Apple does not retry needlessly;
/// a storage failure answers 503 so that Apple does retry.
struct NotificationRoutes {
    let services: PurchaseServer.Services

    func add(to router: Router<BasicRequestContext>) {
        router.post("v1/notifications/appstore") { request, _ in
            do {
                let body = try await request.decodeJSON(ResponseBodyV2.self, limit: 256 * 1024)
                let event = try await proof { try await services.verifier.notification(body.signedPayload) }
                let outcome = try await ledgerCall { try await services.ledger.apply(event, now: services.now()) }
                // After the notification is stored: a redelivery finds it stored and answers what was left unanswered.
                do { try await ConsumptionResponder(services: services).answer(event) } catch let error as AppStoreClientError {
                    throw APIError(error)
                }
                services.metrics.notification(outcome.rawValue)
                return try JSONReply.encode(["result": outcome.rawValue])
            } catch {
                services.metrics.notification("refused")
                throw error
            }
        }
    }
}
