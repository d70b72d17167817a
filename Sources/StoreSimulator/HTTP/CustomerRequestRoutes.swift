import AppStoreFormats
import Foundation
import Hummingbird

/// What customers (and their guardians) ask of Apple: `/sim/transactions/{id}/refund-request` — a refund asked for
/// (Report a Problem), Apple's decision, and what the developer answered in between; `/sim/accounts/{id}/rescind-consent`
/// — a parent or guardian withdraws consent for the app (`RESCIND_CONSENT`).
struct CustomerRequestRoutes {
    let services: SimulatorServer.Services
    var engine: StoreEngine { services.engine }

    struct Ask: Decodable {
        /// `consumptionRequestReason`: `UNINTENDED_PURCHASE` unless given.
        var reason: ConsumptionRequestReason?
        /// The customer asking: a transaction of another customer's is refused.
        var account: String?
        /// Asked in the app's refund sheet (StoreKit's `beginRefundRequest`) rather than Report a Problem: a
        /// subscription's auto-renewal goes off, as Apple turns it off then.
        var fromApp: Bool?
    }

    struct State: Encodable {
        var reason: ConsumptionRequestReason
        /// What the developer sent with Send Consumption Information, if anything.
        var consumption: ConsumptionRequest?
        /// `REFUND` or `REFUND_DECLINED` once Apple decided.
        var decision: String?
    }

    func add(to router: Router<BasicRequestContext>) {
        let requests = router.group("sim/transactions/:id/refund-request")
        requests.post(use: ask)
        requests.get(use: show)
        requests.post("decide", use: decide)
        router.post("sim/accounts/:account/rescind-consent", use: rescindConsent)
        router.post("sim/external-purchase-tokens", use: createExternalToken)
        router.post("sim/external-purchase-tokens/:id/report", use: reportExternalToken)
    }

    struct ExternalTokenRequest: Decodable {
        /// `ACQUISITION` or `SERVICES` for a custom-link token; absent for an external purchase link's token.
        var tokenType: ExternalPurchaseTokenType?
    }

    /// A customer buys outside the App Store: Apple makes a token (and tells the developer of a custom-link one).
    @Sendable func createExternalToken(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let body = try await request.decodeIfPresent(ExternalTokenRequest.self) ?? ExternalTokenRequest()
        if let type = body.tokenType, type != .acquisition, type != .services { throw HTTPError(.badRequest, message: "tokenType is ACQUISITION or SERVICES") }
        let id = try await engine.createExternalPurchaseToken(tokenType: body.tokenType)
        try await services.delivery?.deliverDue()
        return try Reply.json(["externalPurchaseId": id])
    }

    /// The developer reported the token to Apple.
    @Sendable func reportExternalToken(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard try await engine.reportExternalPurchaseToken(try context.parameters.require("id")) else { throw HTTPError(.notFound, message: "no such token") }
        return Reply.empty()
    }

    @Sendable func rescindConsent(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard try await engine.rescindConsent(account: try context.parameters.require("account")) else { throw HTTPError(.notFound, message: "no such account") }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    /// Opens the request and sends the developer its `CONSUMPTION_REQUEST`.
    @Sendable func ask(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let body = try await request.decodeIfPresent(Ask.self) ?? Ask()
        guard try await engine.requestRefund(try context.parameters.require("id"), reason: body.reason ?? .unintendedPurchase, account: body.account,
                                             fromApp: body.fromApp ?? false) else {
            throw HTTPError(.notFound, message: "no unrefunded purchase of this customer's own without an open request")
        }
        try await services.delivery?.deliverDue()
        return Reply.empty()
    }

    @Sendable func show(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard let state = await engine.refundRequest(try context.parameters.require("id")) else { throw HTTPError(.notFound, message: "no refund request") }
        return try Reply.json(State(reason: state.reason, consumption: state.consumption, decision: state.decision))
    }

    /// Apple's decision: `REFUND` (with the share refunded) or `REFUND_DECLINED`, sent to the developer.
    @Sendable func decide(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        guard let decision = try await engine.decideRefund(try context.parameters.require("id")) else {
            throw HTTPError(.notFound, message: "no open refund request")
        }
        try await services.delivery?.deliverDue()
        struct Decided: Encodable { var decision: String; var revocationPercentage: Int? }
        switch decision {
        case .declined: return try Reply.json(Decided(decision: NotificationTypeV2.refundDeclined.rawValue))
        case .refunded(let percentage): return try Reply.json(Decided(decision: NotificationTypeV2.refund.rawValue, revocationPercentage: percentage))
        }
    }
}
