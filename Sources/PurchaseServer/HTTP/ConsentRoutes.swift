import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `GET|PUT /v1/consumption-consent`: whether the signed-in customer agreed to have their consumption data sent to
/// Apple when they ask for a refund. Apple makes the developer responsible for that consent; without it, a
/// `CONSUMPTION_REQUEST` about the customer's purchases is left unanswered.
struct ConsentRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    func add(to router: some RouterMethods<Context>) {
        router.get("v1/consumption-consent", use: show)
        router.put("v1/consumption-consent", use: change)
    }

    @Sendable func show(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let consent = try await services.ledger.consumptionConsent(accountId: account)
        return try JSONReply.encode(ConsentReply(consented: consent?.consented ?? false, changedAt: consent?.changedAt, source: consent?.source))
    }

    @Sendable func change(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let body = try await request.decodeJSON(ConsentRequest.self, limit: 1024)
        let consent = try await services.ledger.setConsumptionConsent(accountId: account, consented: body.consented, now: services.now())
        return try JSONReply.encode(ConsentReply(consented: consent.consented, changedAt: consent.changedAt, source: consent.source))
    }
}
