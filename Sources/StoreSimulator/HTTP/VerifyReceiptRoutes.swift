import _CryptoExtras
import AppStoreFormats
import Crypto
import Foundation
import Hummingbird

/// Apple's legacy `/verifyReceipt`: production at `/verifyReceipt`, sandbox at `/sandbox/verifyReceipt`.
///
/// The HTTP status is always 200; the answer is in the body's `status`, as Apple's is. Receipts are authenticated
/// with the simulator's own receipt key — it recognises what it minted, and nothing else.
struct VerifyReceiptRoutes {
    let engine: StoreEngine
    /// The app's shared secret; when set, receipts holding auto-renewable subscriptions need it (21004 otherwise).
    let sharedSecret: String?

    func add(to router: Router<BasicRequestContext>) {
        for (path, endpoint) in [("verifyReceipt", AppStoreEnvironment.production), ("sandbox/verifyReceipt", .sandbox)] {
            router.post(RouterPath(stringLiteral: path)) { request, _ in
                try Reply.json(try await answer(request, endpoint: endpoint))
            }
            router.get(RouterPath(stringLiteral: path)) { _, _ in try Reply.json(VerifyReceiptResponse(status: .notPost)) }
        }
    }

    func answer(_ request: Request, endpoint: AppStoreEnvironment) async throws -> VerifyReceiptResponse {
        guard let body = try? await request.bytes(limit: 8 << 20),
              let parsed = try? AppStoreJSON.decoder().decode(VerifyReceiptRequest.self, from: Data(body)),
              let der = Base64.decode(parsed.receiptData.utf8.filter { $0 != 0x0A && $0 != 0x0D }),
              let container = try? PKCS7SignedData(berEncoded: der),
              let receipt = try? AppReceipt(payload: container.content) else {
            return VerifyReceiptResponse(status: .malformedReceiptData)
        }
        guard authentic(container) else { return VerifyReceiptResponse(status: .notAuthenticated) }
        let environment = receipt.receiptType?.environment ?? .sandbox
        if environment == .sandbox, endpoint == .production { return VerifyReceiptResponse(status: .sandboxReceiptSentToProduction) }
        if environment == .production, endpoint == .sandbox { return VerifyReceiptResponse(status: .productionReceiptSentToSandbox) }
        let hasSubscriptions = receipt.inAppPurchases.contains { $0.productType == .autoRenewableSubscription }
        if let sharedSecret, hasSubscriptions, parsed.password != sharedSecret { return VerifyReceiptResponse(status: .sharedSecretMismatch) }

        var response = VerifyReceiptResponse(status: .valid, environment: environment, receipt: LegacyReceipt(receipt, requestDate: engine.clock.now))
        // A receipt whose purchases this store has never seen belongs to no account it knows.
        if let first = receipt.inAppPurchases.first {
            let history = await engine.history(containing: first.transactionId)
            guard !history.isEmpty else { return VerifyReceiptResponse(status: .accountNotFound) }
            if hasSubscriptions {
                var latest = history.filter { $0.type != .consumable }.map(LegacyInAppPurchase.init)
                if parsed.excludeOldTransactions == true {
                    var newest: [String: LegacyInAppPurchase] = [:]
                    for item in latest { newest[item.originalTransactionId ?? ""] = item }
                    latest = Array(newest.values)
                }
                response.latestReceiptInfo = latest
                response.pendingRenewalInfo = try await engine.subscriptionStatuses(containing: first.transactionId).map { status in
                    var info = LegacyPendingRenewalInfo()
                    info.originalTransactionId = status.latest.originalTransactionId
                    info.productId = status.latest.productId
                    info.autoRenewProductId = status.renewal.autoRenewProductId
                    info.autoRenewStatus = status.renewal.autoRenewStatus == .on
                    info.expirationIntent = status.renewal.expirationIntent.map { String($0.rawValue) }
                    return info
                }
                response.latestReceipt = parsed.receiptData
            }
        }
        return response
    }

    /// Signed by this simulator's receipt leaf, over exactly this payload.
    private func authentic(_ container: PKCS7SignedData) -> Bool {
        let chain = engine.minter.authority.receipts
        guard container.certificates.first == chain.leafDER, let signer = container.signerInfos.first, signer.signedAttributes == nil else { return false }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signer.signature)
        return chain.leafKey.publicKey.isValidSignature(signature, for: SHA256.hash(data: container.content), padding: .insecurePKCS1v1_5)
    }
}
