import AppStoreClient
import AppStoreFormats
import Foundation
import Hummingbird
import PurchaseAPI
import PurchaseLedger

/// What apps call, each with the account its bearer token proves: orders, purchases, entitlements, spending, restore.
struct AppRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    static func accountMismatch(_ what: String) -> APIError {
        APIError(.conflict, code: .accountMismatch, "this \(what) is for another account than the bearer token's")
    }

    /// Small bodies: orders and spends.
    static var smallBody: Int { 64 * 1024 }

    func add(to router: some RouterMethods<Context>) {
        let v1 = router.group("v1")
        v1.post("orders", use: createOrder)
        v1.post("orders/:orderId/abandon", use: abandonOrder)
        v1.post("purchases", use: submitPurchase)
        v1.get("entitlements", use: entitlements)
        v1.post("consumables/:currency/spend", use: spend)
        v1.post("restore", use: restore)
    }

    /// `POST /v1/orders`: an order for a product; the app pays with its `appAccountToken`.
    @Sendable func createOrder(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let body = try await request.decodeJSON(OrderRequest.self, limit: Self.smallBody)
        if let expected = body.expectedAccountId, expected != account { throw Self.accountMismatch("order") }
        if let refusal = services.deviceRefusal(body.deviceIntegrity) { throw refusal }
        let order = try await services.ledger.createOrder(accountId: account, productId: body.productId, now: services.now())
        return try JSONReply.encode(OrderReply(orderId: order.orderId, productId: order.productId, appAccountToken: order.appAccountToken,
                                               expiresAt: order.expiresAt), status: .created)
    }

    /// `POST /v1/orders/{orderId}/abandon`: the app's word that the order's payment ended with nothing charged.
    @Sendable func abandonOrder(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let orderId = try context.parameters.decoded("orderId")
        let body = try await request.decodeJSON(OrderAbandonRequest.self, limit: Self.smallBody)
        let (order, recorded) = try await services.ledger.abandonOrder(orderId: orderId, accountId: account, reason: body.reason.rawValue,
                                                                     now: services.now())
        return try JSONReply.encode(OrderAbandonReply(orderId: order.orderId, state: order.state.rawValue, recorded: recorded))
    }

    /// `POST /v1/purchases`, with its outcome counted and timed.
    @Sendable func submitPurchase(_ request: Request, _ context: Context) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let (response, outcome) = try await purchase(request, context)
            services.metrics.purchase(outcome, took: ContinuousClock.now - started)
            return response
        } catch {
            services.metrics.purchase(.refused, took: ContinuousClock.now - started)
            throw error
        }
    }

    /// `GET /v1/entitlements`: what the account owns now.
    @Sendable func entitlements(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let owned = Entitlements(try await services.ledger.entitlements(accountId: account, now: services.now()))
        return try JSONReply.encode(EntitlementsReply(entitlements: owned, signedEntitlements: try services.signature(for: owned, request)))
    }

    /// `POST /v1/consumables/{currency}/spend`: once per idempotency key, never overdrawn.
    @Sendable func spend(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        let currency = try context.parameters.decoded("currency")
        let body = try await request.decodeJSON(SpendRequest.self, limit: Self.smallBody)
        guard let given = body.idempotencyKey ?? request.headers[.init("Idempotency-Key")!] else {
            throw APIError.badRequest("an idempotencyKey (or Idempotency-Key header) is required")
        }
        let key = try InputCheck.storable(given, "the idempotency key")
        let balance = try await services.ledger.spend(accountId: account, currency: currency, amount: body.amount, idempotencyKey: key, now: services.now())
        return try JSONReply.encode(SpendReply(currency: currency, balance: balance))
    }

    /// `POST /v1/restore`: binds what the store restored; answers everything the account owns.
    @Sendable func restore(_ request: Request, _ context: Context) async throws -> Response {
        let account = try context.authenticatedAccount()
        try services.checkEntitlementsNonce(request)
        let body = try await request.decodeJSON(RestoreRequest.self, limit: services.maxBodyBytes)
        // Restore holds nothing when Apple cannot be asked (a purchase's proof is held): the app asks again.
        var transactions: [JWSTransactionDecodedPayload] = []
        for jws in (body.signedTransactions ?? []).prefix(1000) {
            transactions += try await ProofIntake.verify(.signedTransaction(jws), with: services)
        }
        if let receipt = body.receipt {
            transactions += try await ProofIntake.verify(.receipt(receipt), with: services, ticket: services.appleTicket(for: account))
        }
        // One ledger transaction for the whole restore. What is not this account's (another's, or paid through
        // another account's order) is listed as refused: nothing of it is granted here.
        let sold = transactions.filter { services.ledger.catalog.rule(for: $0.productId ?? "") != nil }
        var refused = transactions.filter { services.ledger.catalog.rule(for: $0.productId ?? "") == nil }.map { $0.transactionId ?? "" }
        var restored = 0
        let results = try await services.ledger.submitAll(sold.map { PurchaseSubmission(accountId: account, transaction: $0, source: .restore) },
                                                          now: services.now())
        for (transaction, result) in zip(sold, results) {
            switch result {
            case .success(let submitted) where submitted.outcome != .deliveredToOwner: restored += 1
            case .success: refused.append(transaction.transactionId ?? "")
            case .failure(let error) where error.code == .transactionBoundElsewhere: refused.append(transaction.transactionId ?? "")
            case .failure(let error): throw APIError(error)
            }
        }
        // The device's renewal info, after what it restored is bound; one left out refuses nothing.
        for renewal in (body.signedRenewalInfos ?? []).prefix(Self.maxRenewalInfos) {
            _ = await applyDeviceRenewalInfo(renewal, account: account, context)
        }
        // Non-renewing subscriptions are not in the store's restore: the ledger's own records bring them back.
        let owned = Entitlements(try await services.ledger.entitlements(accountId: account, now: services.now()))
        return try JSONReply.encode(RestoreReply(restored: restored, refused: refused, entitlements: owned,
                                                 signedEntitlements: try services.signature(for: owned, request)))
    }

    /// `POST /v1/purchases`: verifies (or holds) the proof and submits what it proves; also names the outcome for metrics.
    func purchase(_ request: Request, _ context: Context) async throws -> (Response, PurchaseRequestOutcome) {
        let account = try context.authenticatedAccount()
        try services.checkEntitlementsNonce(request)
        let body = try await request.decodeJSON(PurchaseRequest.self, limit: services.maxBodyBytes)
        if let expected = body.expectedAccountId, expected != account { throw Self.accountMismatch("upload") }
        if let appTransaction = body.appTransaction {
            guard body.signedTransaction == nil, body.receipt == nil, body.transactionId == nil else {
                throw APIError.badRequest("send exactly one of signedTransaction, receipt, transactionId and appTransaction")
            }
            let payload = try await services.verifier.signedData.verifyAppTransaction(appTransaction).payload
            try await services.ledger.recordAppTransaction(payload, accountId: account, now: services.now())
            var reply = try await submit([], account: account, orderId: nil, source: .appTransaction)
            reply.signedEntitlements = try services.signature(for: reply.entitlements, request)
            return (try JSONReply.encode(reply), .appTransaction)
        }
        let proof: ProofIntake.Proof
        switch (body.signedTransaction, body.receipt, body.transactionId) {
        case (let jws?, nil, nil): proof = .signedTransaction(jws)
        case (nil, let receipt?, nil): proof = .receipt(receipt)
        case (nil, nil, let id?): proof = .transactionId(id)
        default: throw APIError.badRequest("send exactly one of signedTransaction, receipt and transactionId")
        }
        switch try await ProofIntake(services: services).take(proof, accountId: account, orderId: body.orderId) {
        case .held(let held):
            return (try JSONReply.encode(HeldProofReply(proofId: held.proofId, retryAt: held.nextAttemptAt), status: .accepted), .held)
        case .grantedEarlier(let held):
            var reply = try await grantedEarlier(held, account: account)
            reply.signedEntitlements = try services.signature(for: reply.entitlements, request)
            return (try JSONReply.encode(reply), reply.outcome.map(PurchaseRequestOutcome.submitted) ?? .empty)
        case .verified(let transactions):
            if let refusal = services.deviceRefusal(body.deviceIntegrity), let report = body.deviceIntegrity {
                // Under the ledger's key, as an accepted purchase's report is (an Xcode one's apart).
                let keys = transactions.map { TransactionKey.key($0.transactionId ?? "", in: $0.environment ?? .production) }
                // What this account holds already (granted before, or through Apple's notification) is answered as such: a
                // refusal would only keep the device from finishing it, for ever, with nothing left to refuse.
                let held = try await services.ledger.transactions(ids: keys)
                if keys.isEmpty || !keys.allSatisfy({ held[$0]?.accountId == account }) {
                    // Refused by policy: the report is kept (for the operator), nothing is bound or granted.
                    for key in keys {
                        try await services.ledger.recordDeviceReport(transactionId: key, accountId: account, signals: report.signals, now: services.now())
                    }
                    throw refusal
                }
            }
            var reply = try await submit(transactions, account: account, orderId: body.orderId, source: proof.source, signals: body.deviceIntegrity?.signals)
            if let renewal = body.signedRenewalInfo {
                // After the grant, which it never blocks: one left out is logged and named in the reply.
                if let ignored = await applyDeviceRenewalInfo(renewal, account: account, context) {
                    reply.renewalInfoIgnored = ignored
                } else {
                    reply.entitlements = Entitlements(try await services.ledger.entitlements(accountId: account, now: services.now()))
                }
            }
            reply.signedEntitlements = try services.signature(for: reply.entitlements, request)
            return (try JSONReply.encode(reply), reply.outcome.map(PurchaseRequestOutcome.submitted) ?? .empty)
        }
    }

    /// Submits verified transactions as one ledger transaction (with the device report, when there is one); a signed
    /// transaction or a looked-up id carries the order id, a receipt's purchases bind through their tokens and series.
    /// When every transaction is refused, the refusal that decides is the answer (one that can still change before a
    /// final one: a client that finishes on a final refusal must not finish a line waiting for a fix); otherwise the
    /// granted ones are, with the refused ones listed.
    func submit(_ transactions: [JWSTransactionDecodedPayload], account: String, orderId: String?, source: PurchaseSource,
                signals: [String]? = nil) async throws -> PurchaseReply {
        let orderIds = try await ProofIntake.orderIds(for: transactions, orderId: orderId, fromReceipt: source == .receipt, ledger: services.ledger)
        var results = try await services.ledger.submitAll(zip(transactions, orderIds).map {
            PurchaseSubmission(accountId: account, orderId: $1, transaction: $0, source: source, deviceSignals: signals)
        }, now: services.now())
        // A payment for another product than the order named (coins ordered, a season pass paid): the payment is real
        // and its appAccountToken says whose it is, so it goes again without the order and binds by that token, as the
        // SDK's retry and the reconciler do. A 422 alone told the app nothing was granted while the pass was (by its
        // token, or by Apple's notification first). The answer says so: granted, and `orderRefusal` why not as that order.
        // A line without a token stays refused: the order named was the only sign of whose it is.
        var orderRefusals: [Int: LedgerError] = [:]
        for line in results.indices {
            guard orderIds[line] != nil, transactions[line].appAccountToken != nil, case .failure(let refusal) = results[line],
                  refusal.code == .orderProductMismatch else { continue }
            orderRefusals[line] = refusal
        }
        if !orderRefusals.isEmpty {
            let lines = orderRefusals.keys.sorted()
            let again = try await services.ledger.submitAll(lines.map {
                PurchaseSubmission(accountId: account, orderId: nil, transaction: transactions[$0], source: source, deviceSignals: signals)
            }, now: services.now())
            for (line, result) in zip(lines, again) {
                results[line] = result
                if case .failure = result { orderRefusals[line] = nil }
            }
        }
        if Reconciler.nothingGranted(results), let refusal = Reconciler.decidingRefusal(results) { throw APIError(refusal) }
        let granted = results.compactMap { try? $0.get() }
        // What this request delivered, once: a receipt synced again (alreadyGranted) calls Apple for nothing.
        services.finishWithApple(granted.filter { $0.outcome != .alreadyGranted }.map(\.transactionId))
        // A receipt carries no tokens at all: only signed transactions say whether Apple holds one.
        if source != .receipt {
            let delivered = Set(granted.filter { $0.outcome != .deliveredToOwner }.map(\.transactionId))
            services.setAppAccountTokensWithApple(transactions.filter { delivered.contains($0.transactionId ?? "") }, account: account)
        }
        let items = results.indices.compactMap { line -> PurchaseReply.Item? in
            guard case .success(let result) = results[line] else { return nil }
            return PurchaseReply.Item(transactionId: result.transactionId, outcome: result.outcome, orderId: result.orderId,
                                      orderRefusal: orderRefusals[line].map { .init(orderId: orderIds[line] ?? "", refusal: $0) })
        }
        let refused = zip(transactions, results).compactMap { transaction, result -> PurchaseReply.Refused? in
            guard case .failure(let error) = result else { return nil }
            let answer = APIError(error)
            return .init(transactionId: transaction.transactionId ?? "", code: answer.code, message: answer.message, class: answer.refusalClass)
        }
        let owned: Entitlements
        if let last = granted.last { owned = Entitlements(last.entitlements) } else {
            owned = Entitlements(try await services.ledger.entitlements(accountId: account, now: services.now()))
        }
        return PurchaseReply(outcome: items.first?.outcome, transactionId: items.first?.transactionId, orderId: items.first?.orderId,
                             orderRefusal: items.first?.orderRefusal, transactions: items, refused: refused, entitlements: owned)
    }

    /// The longest signed renewal info taken (Apple's are about 2 KiB with their chain of three certificates).
    static var maxRenewalInfoBytes: Int { 16 * 1024 }
    /// The most renewal infos one restore applies (one per series the device holds).
    static var maxRenewalInfos: Int { 100 }

    /// A device's signed renewal info (StoreKit's `Product.SubscriptionInfo.Status.renewalInfo`), verified as a
    /// notification's is, applied to its series when the account holds it and it is newer. Answers nil when applied,
    /// else why it was left out (``PurchaseReply/renewalInfoIgnored``): logged, and never an error, since it comes after
    /// a grant that stands whatever becomes of it.
    func applyDeviceRenewalInfo(_ jws: String, account: String, _ context: Context) async -> PurchaseReply.RenewalInfoIgnored? {
        guard jws.utf8.count <= Self.maxRenewalInfoBytes else {
            context.logger.notice("a device's signed renewal info of \(jws.utf8.count) bytes left out: too large")
            return .unverified
        }
        let renewal: JWSRenewalInfoDecodedPayload
        do {
            renewal = try await services.verifier.signedData.verifyRenewalInfo(jws).payload
        } catch {
            context.logger.notice("a device's signed renewal info left out: \(error)")
            return .unverified
        }
        do {
            switch try await services.ledger.applyDeviceRenewalInfo(renewal, accountId: account) {
            case .applied: return nil
            case .older: return .older
            case .notOwned: return .notOwned
            }
        } catch let error as LedgerError where error.code == .invalidInput {
            context.logger.notice("a device's signed renewal info left out: \(error)")
            return .unverified
        } catch {
            context.logger.warning("a device's signed renewal info could not be applied now: \(error)")
            return .unavailable
        }
    }

    /// The answer to a proof held before and granted since, sent again while Apple cannot be asked: what the ledger
    /// holds of it. A transaction id names its purchase (`alreadyGranted`, or `deliveredToOwner` when it went to another
    /// account); a receipt's lines are not known without Apple, so none is listed (a client finishes none on it) and the
    /// account's entitlements answer.
    func grantedEarlier(_ held: PendingProof, account: String) async throws -> PurchaseReply {
        let now = services.now()
        let owned = Entitlements(try await services.ledger.entitlements(accountId: account, now: now))
        var items: [PurchaseReply.Item] = []
        if held.kind == .transactionId, let record = try await services.ledger.transactions(ids: [held.proof])[held.proof],
           let owner = record.accountId {
            items = [owner == account ? .init(transactionId: record.transactionId, outcome: .alreadyGranted, orderId: record.orderId, orderRefusal: nil)
                                      : .init(transactionId: record.transactionId, outcome: .deliveredToOwner, orderId: nil, orderRefusal: nil)]
        }
        return PurchaseReply(outcome: items.first?.outcome, transactionId: items.first?.transactionId, orderId: items.first?.orderId,
                             orderRefusal: nil, transactions: items, refused: [], entitlements: owned)
    }
}

extension PurchaseServices {
    /// The `refuse` device-integrity policy's answer to a device's report, or nil when it is let through. Asked when the
    /// order is made (nothing is charged yet), and again at the upload for payments that came without one of this
    /// server's orders (Ask to Buy, a promoted purchase, another device).
    func deviceRefusal(_ report: DeviceIntegrityReport?) -> APIError? {
        guard refuseSuspiciousDevices, let report, !report.signals.isEmpty else { return nil }
        return APIError(.forbidden, code: .deviceIntegrity,
                        "this server's policy refuses purchases from devices reporting \(report.signals.prefix(8).map { String($0.prefix(40)) }.joined(separator: ", "))")
    }
}
