import AppStoreClient
import AppStoreFormats
import Crypto
import Foundation
import Hummingbird
import PurchaseLedger

/// `/admin/...`: finding and settling lost orders, held proofs, replays, the audit log, running reconciliation now,
/// and reading what the ledger knows (`AdminRoutes+Records.swift`). Closed unless an admin key is configured; the key comes as `Authorization: Bearer <key>`.
struct AdminRoutes {
    let services: PurchaseServer.Services

    struct OrderItem: Encodable {
        var orderId: String
        var accountId: String
        var productId: String
        var appAccountToken: String
        var state: String
        var transactionId: String?
        var createdAt: Date
        var expiresAt: Date
    }

    struct SettleRequest: Decodable {
        /// Settle by granting this transaction (looked up with the Server API, or given signed).
        var transactionId: String?
        var signedTransaction: String?
        var note: String
    }

    func add(to router: Router<BasicRequestContext>) {
        let admin = router.group("admin")
        admin.get("orders", use: orders)
        admin.post("orders/:id/settle", use: settle)
        admin.get("proofs", use: proofs)
        admin.post("reconcile", use: reconcile)
        admin.get("conflicts", use: conflicts)
        admin.get("audit", use: audit)
        admin.get("consistency", use: consistency)
        addRecordRoutes(to: admin)
        addWebhookRoutes(to: admin)
    }

    /// `GET /admin/orders?state=…`: open, stuck, granted or settled orders.
    @Sendable func orders(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let name = request.uri.queryParameters["state"].map(String.init) ?? "paid-unfulfilled"
        guard let filter = Ledger.OrderFilter(rawValue: name) else {
            throw APIError.badRequest("state is one of \(Ledger.OrderFilter.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let orders = try await ledgerCall { try await services.ledger.orders(filter, now: services.now()) }
        return try JSONReply.encode(["orders": orders.map {
            OrderItem(orderId: $0.orderId, accountId: $0.accountId, productId: $0.productId, appAccountToken: $0.appAccountToken.uuidString.lowercased(),
                      state: $0.state.rawValue, transactionId: $0.transactionId, createdAt: $0.createdAt, expiresAt: $0.expiresAt)
        }])
    }

    /// `POST /admin/orders/{id}/settle`: grant a transaction to the order, or close it with a note (audited).
    @Sendable func settle(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let orderId = try context.parameters.decoded("id")
        let body = try await request.decodeJSON(SettleRequest.self, limit: services.maxBodyBytes)
        var transaction: JWSTransactionDecodedPayload?
        do {
            if let jws = body.signedTransaction {
                transaction = try await ProofIntake.verify(.signedTransaction(jws), with: services).first
            } else if let id = body.transactionId {
                transaction = try await ProofIntake.verify(.transactionId(id), with: services).first
            }
        } catch let error as AppStoreClientError {
            throw APIError(error)
        }
        let order = try await ledgerCall {
            try await services.ledger.settle(orderId: orderId, transaction: transaction, note: body.note, actor: "admin", now: services.now())
        }
        return try JSONReply.encode(["orderId": order.orderId, "state": order.state.rawValue, "transactionId": order.transactionId ?? ""])
    }

    /// `GET /admin/proofs`: proofs held while Apple could not be asked.
    @Sendable func proofs(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let state = PendingProof.State(rawValue: request.uri.queryParameters["state"].map(String.init) ?? "pending") ?? .pending
        let proofs = try await ledgerCall { try await services.ledger.pendingProofs(state: state) }
        struct Item: Encodable { var proofId: String; var accountId: String; var orderId: String?; var kind: String; var attempts: Int; var lastError: String? }
        return try JSONReply.encode(["proofs": proofs.map {
            Item(proofId: $0.proofId, accountId: $0.accountId, orderId: $0.orderId, kind: $0.kind.rawValue, attempts: $0.attempts, lastError: $0.lastError)
        }])
    }

    /// `POST /admin/reconcile`: the reconciliation job, now.
    @Sendable func reconcile(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        let report = try await ledgerCall { try await Reconciler(services: services).runOnce() }
        try await services.ledger.audit(actor: "admin", action: "reconcile", subject: "-", detail: "\(report)", now: services.now())
        return try JSONReply.encode(report)
    }

    /// `GET /admin/conflicts`: transactions another account tried to claim.
    @Sendable func conflicts(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        struct Item: Encodable { var transactionId: String; var claimedBy: String; var owner: String; var attempts: Int64 }
        let conflicts = try await ledgerCall { try await services.ledger.conflicts() }
        return try JSONReply.encode(["conflicts": conflicts.map { Item(transactionId: $0.transactionId, claimedBy: $0.claimedBy, owner: $0.owner, attempts: $0.attempts) }])
    }

    /// `GET /admin/audit`: the audit log.
    @Sendable func audit(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        return try JSONReply.encode(["entries": try await ledgerCall { try await services.ledger.auditLog() }])
    }

    /// `GET /admin/consistency`: the ledger's own checks.
    @Sendable func consistency(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try authorize(request)
        struct Item: Encodable { var check: String; var detail: String }
        struct Reply: Encodable { var consistent: Bool; var inconsistencies: [Item] }
        let found = try await ledgerCall { try await services.ledger.inconsistencies() }
        return try JSONReply.encode(Reply(consistent: found.isEmpty, inconsistencies: found.map { Item(check: $0.check, detail: $0.detail) }))
    }

    /// Compares digests, so the comparison takes the same time however much of a wrong key matches.
    func authorize(_ request: Request) throws {
        guard let key = services.adminKey, !key.isEmpty else { throw APIError(.forbidden, code: "admin_disabled", "no admin key is configured") }
        let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
        guard SHA256.hash(data: Array(given.utf8)) == SHA256.hash(data: Array(key.utf8)) else { throw APIError.unauthorized }
    }
}
