import Foundation
import Hummingbird
import PurchaseLedger

/// `GET|PUT /v1/consumption-consent`: whether the signed-in customer agreed to have their consumption data sent to
/// Apple when they ask for a refund. Apple makes the developer responsible for that consent; without it, a
/// `CONSUMPTION_REQUEST` about the customer's purchases is left unanswered.
struct ConsentRoutes {
    let services: PurchaseServer.Services

    struct ConsentRequest: Decodable { var consented: Bool }
    struct ConsentReply: Encodable {
        var consented: Bool
        /// When it last changed; absent when the customer never answered.
        var changedAt: Date?
        /// `app`, or `rescind_consent` when Apple said a parent or guardian withdrew consent for the app.
        var source: String?
    }

    func add(to router: Router<BasicRequestContext>) {
        router.get("v1/consumption-consent", use: show)
        router.put("v1/consumption-consent", use: change)
    }

    @Sendable func show(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try await AppRoutes(services: services).authenticate(request)
        let consent = try await ledgerCall { try await services.ledger.consumptionConsent(accountId: account) }
        return try JSONReply.encode(ConsentReply(consented: consent?.consented ?? false, changedAt: consent?.changedAt, source: consent?.source))
    }

    @Sendable func change(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let account = try await AppRoutes(services: services).authenticate(request)
        let body = try await request.decodeJSON(ConsentRequest.self, limit: 1024)
        let consent = try await ledgerCall {
            try await services.ledger.setConsumptionConsent(accountId: account, consented: body.consented, now: services.now())
        }
        return try JSONReply.encode(ConsentReply(consented: consent.consented, changedAt: consent.changedAt, source: consent.source))
    }
}
