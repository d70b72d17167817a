import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// `/admin/...`: finding and settling lost orders, held proofs, replays, the audit log, running reconciliation now,
/// and reading what the ledger knows (`AdminRoutes+Records.swift`). Closed unless an admin key is configured; the key comes as `Authorization: Bearer <key>` (``AdminKeyMiddleware``).
struct AdminRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    /// Into the `/admin` group, behind ``AdminKeyMiddleware``.
    func add(to admin: some RouterMethods<Context>) {
        admin.get("orders", use: orders)
        admin.post("orders/:id/settle", use: settle)
        admin.get("proofs", use: proofs)
        admin.post("reconcile", use: reconcile)
        admin.get("conflicts", use: conflicts)
        admin.get("audit", use: audit)
        admin.get("consistency", use: consistency)
        addRecordRoutes(to: admin)
        addWebhookRoutes(to: admin)
        addMetricRoutes(to: admin)
    }

    /// `GET /admin/orders?state=…`: open, stuck, granted or settled orders.
    @Sendable func orders(_ request: Request, context: Context) async throws -> Response {
        let name = request.uri.queryParameters["state"].map(String.init) ?? "paid-unfulfilled"
        guard let filter = Ledger.OrderFilter(rawValue: name) else {
            throw APIError.badRequest("state is one of \(Ledger.OrderFilter.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let orders = try await services.ledger.orders(filter, now: services.now())
        return try JSONReply.encode(AdminOrdersReply(orders: orders.map(AdminOrder.init)))
    }

    /// `POST /admin/orders/{id}/settle`: grant a transaction to the order, or close it with a note (audited).
    @Sendable func settle(_ request: Request, context: Context) async throws -> Response {
        let orderId = try context.parameters.decoded("id")
        let body = try await request.decodeJSON(SettleRequest.self, limit: services.maxBodyBytes)
        var transaction: JWSTransactionDecodedPayload?
        if let jws = body.signedTransaction {
            transaction = try await ProofIntake.verify(.signedTransaction(jws), with: services).first
        } else if let id = body.transactionId {
            transaction = try await ProofIntake.verify(.transactionId(id), with: services).first
        }
        let order = try await services.ledger.settle(orderId: orderId, transaction: transaction, note: body.note, actor: "admin", now: services.now())
        return try JSONReply.encode(SettleReply(orderId: order.orderId, state: order.state.rawValue, transactionId: order.transactionId ?? ""))
    }


    /// `GET /admin/proofs`: proofs held while Apple could not be asked.
    @Sendable func proofs(_ request: Request, context: Context) async throws -> Response {
        let state = PendingProof.State(rawValue: request.uri.queryParameters["state"].map(String.init) ?? "pending") ?? .pending
        let proofs = try await services.ledger.pendingProofs(state: state)
        return try JSONReply.encode(HeldProofsReply(proofs: proofs.map {
            .init(proofId: $0.proofId, accountId: $0.accountId, orderId: $0.orderId, kind: $0.kind.rawValue, attempts: $0.attempts, lastError: $0.lastError)
        }))
    }

    /// `POST /admin/reconcile`: the reconciliation job, now.
    @Sendable func reconcile(_ request: Request, context: Context) async throws -> Response {
        let report = try await Reconciler(services: services).runOnce()
        try await services.ledger.audit(actor: "admin", action: .reconcile, subject: "-", detail: "\(report)", now: services.now())
        return try JSONReply.encode(report)
    }


    /// `GET /admin/conflicts`: transactions another account tried to claim.
    @Sendable func conflicts(_ request: Request, context: Context) async throws -> Response {
        let conflicts = try await services.ledger.conflicts()
        return try JSONReply.encode(ConflictsReply(conflicts: conflicts.map {
            .init(transactionId: $0.transactionId, claimedBy: $0.claimedBy, owner: $0.owner, attempts: $0.attempts)
        }))
    }

    /// `GET /admin/audit`: the audit log.
    @Sendable func audit(_ request: Request, context: Context) async throws -> Response {
        try JSONReply.encode(AuditReply(entries: try await services.ledger.auditLog()))
    }


    /// `GET /admin/consistency`: the ledger's own checks.
    @Sendable func consistency(_ request: Request, context: Context) async throws -> Response {
        let found = try await services.ledger.inconsistencies()
        return try JSONReply.encode(ConsistencyReply(consistent: found.isEmpty, inconsistencies: found.map { .init(check: $0.check, detail: $0.detail) }))
    }
}
