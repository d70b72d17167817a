import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseLedger

/// What apps call, each with the account its bearer token proves: orders, purchases, entitlements, spending, restore.
struct AppRoutes {
    let services: PurchaseServer.Services

    struct OrderRequest: Decodable { var productId: String }
    struct OrderReply: Encodable {
        var orderId: String
        var productId: String
        var appAccountToken: String
        var expiresAt: Date
    }

    struct PurchaseRequest: Decodable {
        /// A StoreKit 2 signed transaction (`jwsRepresentation`).
        var signedTransaction: String?
        /// A base64 app receipt (StoreKit 1).
        var receipt: String?
        /// A transaction id alone: looked up with the App Store Server API.
        var transactionId: String?
        var orderId: String?
        /// Jailbreak heuristics the app ran (iOS): recorded with the transaction; the policy decides.
        var deviceIntegrity: DeviceIntegrityReport?
    }

    struct DeviceIntegrityReport: Decodable { var signals: [String]; var applicable: Bool? }

    /// Apple could not be asked now: the proof is kept and the purchase will be granted when Apple answers.
    struct HeldReply: Encodable {
        var status: String
        var proofId: String
        var retryAt: Date
    }

    struct PurchaseReply: Encodable {
        struct Item: Encodable { var transactionId: String; var outcome: SubmissionResult.Outcome; var orderId: String? }
        /// The outcome of the transaction the request was about (the first, for a receipt).
        var outcome: SubmissionResult.Outcome?
        var transactionId: String?
        var orderId: String?
        var transactions: [Item]
        var entitlements: AccountEntitlements
        var signedEntitlements: String?
    }

    struct RestoreRequest: Decodable {
        var signedTransactions: [String]?
        var receipt: String?
    }

    struct RestoreReply: Encodable {
        var restored: Int
        /// Transactions that belong to another account, refused.
        var refused: [String]
        var entitlements: AccountEntitlements
        var signedEntitlements: String?
    }

    struct SpendRequest: Decodable { var amount: Int64; var idempotencyKey: String? }
    struct SpendReply: Encodable { var currency: String; var balance: Int64 }

    func add(to router: Router<BasicRequestContext>) {
        let v1 = router.group("v1")
        let small = 64 * 1024
        v1.post("orders") { request, _ in
            let account = try await authenticate(request)
            let body = try await request.decodeJSON(OrderRequest.self, limit: small)
            let order = try await ledgerCall { try await services.ledger.createOrder(accountId: account, productId: body.productId, now: services.now()) }
            return try JSONReply.encode(OrderReply(orderId: order.orderId, productId: order.productId,
                                                   appAccountToken: order.appAccountToken.uuidString.lowercased(), expiresAt: order.expiresAt), status: .created)
        }

        v1.post("purchases") { request, _ in
            let started = ContinuousClock.now
            do {
                let (response, outcome) = try await purchase(request)
                services.metrics.purchase(outcome, took: ContinuousClock.now - started)
                return response
            } catch {
                services.metrics.purchase("refused", took: ContinuousClock.now - started)
                throw error
            }
        }

        v1.get("entitlements") { request, _ in
            let account = try await authenticate(request)
            let owned = try await ledgerCall { try await services.ledger.entitlements(accountId: account, now: services.now()) }
            return try JSONReply.encode(SignedEntitlementsReply(entitlements: owned, signedEntitlements: try services.signature(for: owned, request)))
        }

        v1.post("consumables/:currency/spend") { request, context in
            let account = try await authenticate(request)
            let currency = try context.parameters.require("currency")
            let body = try await request.decodeJSON(SpendRequest.self, limit: small)
            guard let key = body.idempotencyKey ?? request.headers[.init("Idempotency-Key")!] else {
                throw APIError.badRequest("an idempotencyKey (or Idempotency-Key header) is required")
            }
            let balance = try await ledgerCall {
                try await services.ledger.spend(accountId: account, currency: currency, amount: body.amount, idempotencyKey: key, now: services.now())
            }
            return try JSONReply.encode(SpendReply(currency: currency, balance: balance))
        }

        v1.post("restore") { request, _ in
            let account = try await authenticate(request)
            let body = try await request.decodeJSON(RestoreRequest.self, limit: services.maxBodyBytes)
            var transactions: [JWSTransactionDecodedPayload] = []
            do {
                for jws in (body.signedTransactions ?? []).prefix(1000) {
                    transactions += try await ProofIntake.verify(.signedTransaction(jws), with: services.verifier)
                }
                if let receipt = body.receipt {
                    transactions += try await ProofIntake.verify(.receipt(receipt), with: services.verifier)
                }
            } catch let error as AppStoreClientError {
                // Restore holds nothing: the app asks again.
                throw APIError(error)
            }
            var refused: [String] = []
            var restored = 0
            for transaction in transactions {
                do {
                    _ = try await services.ledger.submit(.init(accountId: account, transaction: transaction, source: "restore"), now: services.now())
                    restored += 1
                } catch let error as LedgerError where error.code == .transactionBoundElsewhere || error.code == .unknownProduct {
                    refused.append(transaction.transactionId ?? "")
                } catch let error as LedgerError {
                    throw APIError(error)
                }
            }
            // Non-renewing subscriptions are not in the store's restore: the ledger's own records bring them back.
            let owned = try await ledgerCall { try await services.ledger.entitlements(accountId: account, now: services.now()) }
            return try JSONReply.encode(RestoreReply(restored: restored, refused: refused, entitlements: owned,
                                                     signedEntitlements: try services.signature(for: owned, request)))
        }
    }

    /// `POST /v1/purchases`: verifies (or holds) the proof and submits what it proves; also names the outcome for metrics.
    func purchase(_ request: Request) async throws -> (Response, String) {
        let account = try await authenticate(request)
        let body = try await request.decodeJSON(PurchaseRequest.self, limit: services.maxBodyBytes)
        let proof: ProofIntake.Proof
        switch (body.signedTransaction, body.receipt, body.transactionId) {
        case (let jws?, nil, nil): proof = .signedTransaction(jws)
        case (nil, let receipt?, nil): proof = .receipt(receipt)
        case (nil, nil, let id?): proof = .transactionId(id)
        default: throw APIError.badRequest("send exactly one of signedTransaction, receipt and transactionId")
        }
        switch try await ProofIntake(services: services).take(proof, accountId: account, orderId: body.orderId) {
        case .held(let held):
            return (try JSONReply.encode(HeldReply(status: "pending", proofId: held.proofId, retryAt: held.nextAttemptAt), status: .accepted), "held")
        case .verified(let transactions):
            if let report = body.deviceIntegrity {
                for transaction in transactions {
                    try await ledgerCall {
                        try await services.ledger.recordDeviceReport(transactionId: transaction.transactionId ?? "", accountId: account,
                                                                     signals: report.signals, now: services.now())
                    }
                }
                if services.refuseSuspiciousDevices && !report.signals.isEmpty {
                    throw APIError(.forbidden, code: "device_integrity", "this server's policy refuses purchases from devices reporting \(report.signals.joined(separator: ", "))")
                }
            }
            var reply = try await submit(transactions, account: account, orderId: body.orderId, source: proof.source)
            reply.signedEntitlements = try services.signature(for: reply.entitlements, request)
            return (try JSONReply.encode(reply), reply.outcome?.rawValue ?? "empty")
        }
    }

    /// Submits verified transactions; a signed transaction or a looked-up id carries the order id, a receipt's
    /// purchases bind through their tokens and series.
    func submit(_ transactions: [JWSTransactionDecodedPayload], account: String, orderId: String?, source: String) async throws -> PurchaseReply {
        var items: [PurchaseReply.Item] = []
        var entitlements: AccountEntitlements?
        let orderIds = try await ledgerCall {
            try await ProofIntake.orderIds(for: transactions, orderId: orderId, fromReceipt: source == "receipt", ledger: services.ledger)
        }
        for (transaction, orderId) in zip(transactions, orderIds) {
            let result = try await ledgerCall {
                try await services.ledger.submit(.init(accountId: account, orderId: orderId, transaction: transaction, source: source), now: services.now())
            }
            items.append(.init(transactionId: result.transactionId, outcome: result.outcome, orderId: result.orderId))
            entitlements = result.entitlements
        }
        var owned: AccountEntitlements
        if let entitlements { owned = entitlements } else { owned = try await ledgerCall { try await services.ledger.entitlements(accountId: account, now: services.now()) } }
        return PurchaseReply(outcome: items.first?.outcome, transactionId: items.first?.transactionId, orderId: items.first?.orderId,
                             transactions: items, entitlements: owned)
    }

    func authenticate(_ request: Request) async throws -> String {
        guard let account = await services.authenticator.account(fromAuthorization: request.headers[.authorization]) else {
            throw APIError.unauthorized
        }
        return account
    }
}

/// Runs a ledger call, turning its refusals into API errors.
func ledgerCall<T>(_ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch let error as LedgerError { throw APIError(error) }
}

/// Runs a verification, turning a refused proof into an API error.
func proof<T>(_ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch let error as AppStoreError { throw APIError(error) }
}
