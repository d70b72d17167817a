import AppStoreClient
import AppStoreFormats
import AppStoreTrust
import Foundation
import PurchaseAPI
import PurchaseLedger

/// Turns what an app or Apple sends — a signed transaction, an app receipt, a transaction id, a signed notification —
/// into verified values the ledger can take, checking signature, chain, bundle id and environment on the way.
/// Local proof comes first; Apple is asked only when it is not enough (a receipt that does not verify here, a bare
/// transaction id).
public struct ProofVerifier: Sendable {
    public let signedData: SignedDataVerifier
    public let receipts: ReceiptVerifier
    public let apple: AppleAccess
    let catalog: LedgerCatalog
    let bundleId: String
    let environments: Set<AppStoreEnvironment>

    public init(roots: TrustRoots, configuration: ServerConfiguration, apple: AppleAccess = AppleAccess()) {
        self.apple = apple
        bundleId = configuration.bundleId
        environments = configuration.acceptedEnvironments
        signedData = SignedDataVerifier(.init(roots: roots, bundleId: configuration.bundleId, appAppleId: configuration.appAppleId,
                                              environments: configuration.acceptedEnvironments))
        receipts = ReceiptVerifier(.init(roots: roots, bundleId: configuration.bundleId, environments: configuration.acceptedEnvironments))
        catalog = configuration.catalog
    }

    /// A verified StoreKit 2 transaction.
    public func transaction(_ jws: String) async throws -> JWSTransactionDecodedPayload {
        try await signedData.verifyTransaction(jws).payload
    }

    /// A transaction Apple's Server API reports for `transactionId`, its signature verified here; asked of the
    /// environment's own URL when the purchase's `environment` is known. With none known, an id Apple's configured URL
    /// does not know is asked of Apple's other environment when this server accepts it, as Apple advises (production
    /// first, then sandbox): a TestFlight purchase sent to a production server is not "not found" (a URL that serves
    /// every environment, the simulator's, has no other).
    /// With a `ticket` (an app's request), each call is charged to its account, and an id Apple answered "not found"
    /// (4040010) recently is answered so again without asking; without one (the reconciler, at its own pace) Apple is
    /// asked, and its answer remembered for the requests.
    public func transaction(id transactionId: String, environment: AppStoreEnvironment? = nil,
                            ticket: AppleLookupTicket? = nil) async throws -> JWSTransactionDecodedPayload {
        guard let serverAPI = apple.serverAPI else {
            throw APIError(.unprocessableContent, code: .serverAPINotConfigured, "looking up a transaction id needs appStore.serverAPIBaseURL")
        }
        let first = serverAPI.serving(environment)
        var clients = [first]
        if environment == nil, let other = [AppStoreEnvironment.production, .sandbox].filter(environments.contains).map(serverAPI.serving)
            .first(where: { $0.baseURL != first.baseURL }) {
            clients.append(other)
        }
        var notFound: AppStoreClientError?
        for client in clients {
            let key = "\(client.baseURL) \(transactionId)"
            if ticket != nil, apple.limits.knownNotFound(key) {
                notFound = AppStoreClientError(.rejected, "Apple did not know transaction id \(transactionId.prefix(40)) at \(client.baseURL) when last asked",
                                               apiErrorCode: .transactionIdNotFound)
                continue
            }
            try ticket?.charge()
            let signed: String
            do {
                signed = try await client.transactionInfo(transactionId)
            } catch let error as AppStoreClientError where Self.isNotFound(error) {
                apple.limits.rememberNotFound(key)
                notFound = error
                continue
            }
            apple.limits.forgetNotFound(key)
            return try await transaction(signed)
        }
        throw notFound ?? AppStoreClientError(.rejected, "transaction id \(transactionId.prefix(40)) not found", apiErrorCode: .transactionIdNotFound)
    }

    /// Whether Apple answered that it does not know the transaction id (Server API error 4040010).
    static func isNotFound(_ error: AppStoreClientError) -> Bool {
        error.code == .rejected && error.apiErrorCode == .transactionIdNotFound
    }

    /// The purchases in a base64 app receipt: verified here, or — when that fails and verifyReceipt is configured —
    /// by Apple (production first, 21007 → sandbox), charged to the `ticket`'s account. A receipt that does not even
    /// parse here is sent once and not retried: random bytes answered 21002 ("malformed, or a temporary issue") were
    /// otherwise sent again on each retry.
    public func receiptTransactions(base64 receipt: String, ticket: AppleLookupTicket? = nil) async throws -> [JWSTransactionDecodedPayload] {
        guard let der = Base64.decode(receipt.utf8) else { throw APIError.badRequest("receipt is not base64") }
        do {
            return try await receiptTransactions(der)
        } catch let error as AppStoreError where error.code != .tooLarge {
            guard let verifyReceipt = apple.verifyReceipt else { throw error }
            try ticket?.charge()
            let response = try await verifyReceipt.verify(receiptData: receipt, once: error.code == .malformed)
            guard response.receipt?.bundleId == bundleId else {
                throw AppStoreError(.wrongBundle, "Apple verified a receipt of \(response.receipt?.bundleId ?? "no bundle"), not \(bundleId)")
            }
            guard let environment = response.environment, environments.contains(environment) else {
                throw AppStoreError(.wrongEnvironment, "the receipt is from \(response.environment?.rawValue ?? "an unnamed environment")")
            }
            // A signing date stands in for each purchase, on Apple's timeline: `latest_receipt_info` is Apple's state when it
            // answered (`request_date`); the receipt's own `in_app` is what the receipt held when it was made, so a receipt
            // held for hours is no newer than a refund notified meanwhile, and cannot undo it.
            if let latest = response.latestReceiptInfo {
                let answeredAt = response.receipt?.requestDate ?? Date()
                return latest.map { JWSTransactionDecodedPayload($0, bundleId: bundleId, environment: environment,
                                                                 type: catalog.rule(for: $0.productId ?? "")?.type, answeredAt: answeredAt) }
            }
            let madeAt = response.receipt?.receiptCreationDate ?? .distantPast
            return (response.receipt?.inApp ?? []).map { JWSTransactionDecodedPayload($0, bundleId: bundleId, environment: environment,
                                                                                     type: catalog.rule(for: $0.productId ?? "")?.type, answeredAt: madeAt) }
        }
    }

    /// A receipt's purchases, each one that Apple revoked, or that carries no `appAccountToken` and the ledger does not
    /// hold yet (`stored`: what the ledger holds of them), replaced by the transaction Apple's Server API signs for it. An app receipt carries no token and
    /// neither form of receipt says how much was refunded: without the lookup, a purchase paid through one account's
    /// order would go to whichever account of the app synced the receipt first on a device of the same Apple ID, and a
    /// prorated refund would read as a full one. A revocation the ledger already holds as Apple signed it is not asked
    /// again, so replaying an old receipt costs no calls. Any failure of a lookup — Apple down, a 4xx (a Server API
    /// URL of the other environment, a key Apple refuses), an answer that does not verify — holds the receipt
    /// (`unavailable`) for the reconciler and the operator rather than grant a purchase to an account that may not own
    /// it. Xcode's and local testing's purchases are not Apple's to look up; without a Server API nothing is looked up.
    /// With a `ticket`, the request is charged for the first look-up only (its purchases are Apple's, not the client's
    /// choice, and a first sync may have dozens).
    public func completingReceipt(_ purchases: [JWSTransactionDecodedPayload], stored: [String: PurchaseRecord],
                                  ticket: AppleLookupTicket? = nil) async throws -> [JWSTransactionDecodedPayload] {
        guard apple.serverAPI != nil else { return purchases }
        var completed: [JWSTransactionDecodedPayload] = []
        completed.reserveCapacity(purchases.count)
        for purchase in purchases {
            guard let id = purchase.transactionId, purchase.environment != .xcode, purchase.environment != .localTesting else {
                completed.append(purchase)
                continue
            }
            let wanted: Bool
            if purchase.revocationDate != nil {
                if let known = stored[id], let knownDate = known.revocationDate, let type = known.revocationType,
                   let date = purchase.revocationDate, abs(knownDate.timeIntervalSince(date)) < 1 {
                    // The same refund, as Apple signed it and the ledger holds it (a local receipt's dates are whole
                    // seconds): a receipt knows no type or share and must not blank them.
                    var kept = purchase
                    (kept.revocationType, kept.revocationPercentage) = (type, known.revocationPercentage)
                    completed.append(kept)
                    continue
                }
                wanted = true
            } else if purchase.appAccountToken == nil {
                wanted = stored[id] == nil
            } else {
                wanted = false
            }
            guard wanted else {
                completed.append(purchase)
                continue
            }
            try ticket?.chargeOnce()
            do {
                completed.append(try await transaction(id: id, environment: purchase.environment))
            } catch {
                throw AppStoreClientError(.unavailable, "the Server API could not complete receipt purchase \(id): \(error)")
            }
        }
        return completed
    }

    /// The purchases in a receipt verified here, shaped as transactions. Receipts carry no app account token and no
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
        let verified = try await signedData.verifyNotification(signedPayload)
        try Self.fromTheAppStore(verified)
        let notification = verified.payload
        guard let uuid = notification.notificationUUID, let type = notification.notificationType else {
            throw AppStoreError(.malformed, "the notification lacks its UUID or type")
        }
        // The nested signed data, checked as what it is: bytes the notification's own signature covers.
        let enclosed = try await signedData.verifyEnclosed(in: verified)
        try enclosed.transaction.map(Self.fromTheAppStore)
        try enclosed.renewal.map(Self.fromTheAppStore)
        try enclosed.appTransaction.map(Self.fromTheAppStore)
        let transaction = enclosed.transaction?.payload
        let renewal = enclosed.renewal?.payload
        // RESCIND_CONSENT names its customer by the app transaction it carries (appData), signed like the rest.
        let appTransaction = enclosed.appTransaction?.payload
        var event = NotificationEvent(notificationUUID: uuid, type: type, subtype: notification.subtype, signedDate: notification.signedDate ?? Date(),
                                      signedPayload: signedPayload, transaction: transaction, renewal: renewal, status: notification.data?.status)
        event.appTransactionId = appTransaction?.appTransactionId
        return event
    }
}

extension ProofVerifier {
    /// The App Store sends notifications from its servers only: never from Xcode's StoreKit testing, whose payloads
    /// anyone can sign (a self-signed certificate made on a Mac). A server that accepts Xcode purchases from its
    /// developers' devices must still not let such a "notification" revoke or rewrite what real customers bought.
    static func fromTheAppStore<Payload>(_ verified: Verified<Payload>) throws {
        let test: Set<AppStoreEnvironment> = [.xcode, .localTesting]
        guard verified.anchor.kind != .xcodeSelfSigned, verified.anchor.kind != .xcodeStoreKit, !test.contains(verified.environment ?? .sandbox) else {
            throw AppStoreError(.wrongEnvironment, "a notification from \(verified.environment?.rawValue ?? "Xcode"): the App Store sends none from Xcode or local testing")
        }
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
