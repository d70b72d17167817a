import AppStoreFormats
import AppStoreTrust
import Foundation
import PurchaseLedger

/// Turns what an app or Apple sends — a signed transaction, an app receipt, a signed notification — into verified
/// values the ledger can take, checking signature, chain, bundle id and environment on the way.
public struct ProofVerifier: Sendable {
    public let signedData: SignedDataVerifier
    public let receipts: ReceiptVerifier
    let catalog: LedgerCatalog

    public init(roots: TrustRoots, configuration: ServerConfiguration) {
        signedData = SignedDataVerifier(.init(roots: roots, bundleId: configuration.bundleId, appAppleId: configuration.appAppleId,
                                              environments: configuration.acceptedEnvironments))
        receipts = ReceiptVerifier(.init(roots: roots, bundleId: configuration.bundleId, environments: configuration.acceptedEnvironments))
        catalog = configuration.catalog
    }

    /// A verified StoreKit 2 transaction.
    public func transaction(_ jws: String) async throws -> JWSTransactionDecodedPayload {
        try await signedData.verifyTransaction(jws).payload
    }

    /// The purchases in a verified app receipt, shaped as transactions. Receipts carry no app account token and no
    /// signing date: the receipt's creation date stands in for the latter.
    public func receiptTransactions(_ der: [UInt8]) async throws -> [JWSTransactionDecodedPayload] {
        let verified = try await receipts.verify(der)
        let receipt = verified.receipt
        return receipt.inAppPurchases.map { purchase in
            var payload = JWSTransactionDecodedPayload()
            payload.transactionId = purchase.transactionId
            payload.originalTransactionId = purchase.originalTransactionId ?? purchase.transactionId
            payload.productId = purchase.productId
            payload.bundleId = receipt.bundleId
            payload.purchaseDate = purchase.purchaseDate
            payload.originalPurchaseDate = purchase.originalPurchaseDate
            payload.expiresDate = purchase.expiresDate
            payload.quantity = purchase.quantity
            payload.type = purchase.productType ?? catalog.rule(for: purchase.productId)?.type
            payload.revocationDate = purchase.cancellationDate
            payload.environment = verified.environment
            payload.signedDate = receipt.receiptCreationDate
            payload.webOrderLineItemId = purchase.webOrderLineItemId.map(String.init)
            return payload
        }
    }

    /// A verified notification, its nested signed transaction and renewal info verified too.
    public func notification(_ signedPayload: String) async throws -> NotificationEvent {
        let notification = try await signedData.verifyNotification(signedPayload).payload
        guard let uuid = notification.notificationUUID, let type = notification.notificationType else {
            throw AppStoreError(.malformed, "the notification lacks its UUID or type")
        }
        let transaction = try await notification.data?.signedTransactionInfo.asyncMap { try await signedData.verifyTransaction($0).payload }
        let renewal = try await notification.data?.signedRenewalInfo.asyncMap { try await signedData.verifyRenewalInfo($0).payload }
        return NotificationEvent(notificationUUID: uuid, type: type, subtype: notification.subtype, signedDate: notification.signedDate ?? Date(),
                                 signedPayload: signedPayload, transaction: transaction, renewal: renewal, status: notification.data?.status)
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
