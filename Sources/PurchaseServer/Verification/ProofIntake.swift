import AppStoreClient
import AppStoreFormats
import Crypto
import Foundation
import PurchaseAPI
import PurchaseLedger

/// What the server does with a proof: verify it now, or — when Apple has to be asked and cannot answer — keep it
/// durably for the reconciliation job, so the purchase is granted later and never lost.
struct ProofIntake: Sendable {
    let services: PurchaseServices

    enum Verdict: Sendable {
        case verified([JWSTransactionDecodedPayload])
        case held(PendingProof)
        /// Held before, and granted by reconciliation since; Apple cannot be asked now to verify it again.
        case grantedEarlier(PendingProof)
    }

    /// A proof as the app sent it.
    enum Proof: Sendable {
        case signedTransaction(String)
        case receipt(String)
        case transactionId(String)

        var source: PurchaseSource {
            switch self {
            case .signedTransaction: .signedTransaction
            case .receipt: .receipt
            case .transactionId: .serverAPI
            }
        }
    }

    func take(_ proof: Proof, accountId: String, orderId: String?) async throws -> Verdict {
        do {
            return .verified(try await Self.verify(proof, with: services, ticket: services.appleTicket(for: accountId)))
        } catch let error as AppStoreClientError where error.code == .unavailable {
            let (kind, text): (PendingProof.Kind, String)
            switch proof {
            case .receipt(let receipt): (kind, text) = (.receipt, receipt)
            case .transactionId(let id): (kind, text) = (.transactionId, id)
            case .signedTransaction: throw error // never reaches Apple
            }
            let id = Self.proofId(kind: kind, accountId: accountId, proof: text)
            let now = services.now()
            // Held junk is kept until Apple can be asked, so an account holds only so much: past it, the device keeps its
            // transaction and comes back (nothing is lost; a real purchase is rarely among more than a few at once).
            let limit = services.verifier.apple.limits.heldProofsPerAccount
            let held: PendingProof
            do {
                held = try await services.ledger.holdProof(proofId: id, accountId: accountId, orderId: orderId, kind: kind, proof: text,
                                                           error: error.message, retryAt: now.addingTimeInterval(30), now: now, perAccountLimit: limit)
            } catch is HeldProofLimitReached {
                throw AppleLookupRefused(retryAfter: 60, "the App Store cannot be asked now, and this account already has \(limit) proofs waiting for it")
            }
            // The same proof held before and decided since is not held again (one row per proof): answered 202, it would
            // wait for a pass that never comes. It is answered as it was decided.
            switch held.state {
            case .pending: return .held(held)
            case .granted: return .grantedEarlier(held)
            case .rejected: throw Self.storedRefusal(held)
            }
        }
    }

    /// The refusal a held proof was rejected with (``Reconciler/refusal(_:)`` stores it as "status code: message"). One
    /// stored otherwise (by an older version) is answered 422 `proof_rejected`, class `operator`: the device keeps the
    /// transaction and sends it again once Apple can be asked.
    static func storedRefusal(_ held: PendingProof) -> APIError {
        let text = held.lastError ?? ""
        if let space = text.firstIndex(of: " "), let status = Int(text[..<space]), (400...599).contains(status),
           let colon = text[space...].range(of: ": ") {
            let code = String(text[text.index(after: space)..<colon.lowerBound])
            if !code.isEmpty, code.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
                return APIError(.init(code: status), code: ErrorCode(rawValue: code), String(text[colon.upperBound...]))
            }
        }
        return APIError(.unprocessableContent, code: .proofRejected, "this proof was rejected when it was held: \(text)")
    }

    /// Verifies a proof, asking Apple when it must; turns refusals into API errors except Apple being unavailable.
    /// With a `ticket` (an app's request), calls to Apple are charged to its account (``AppleLookupLimits``).
    static func verify(_ proof: Proof, with services: PurchaseServices, ticket: AppleLookupTicket? = nil) async throws -> [JWSTransactionDecodedPayload] {
        let verifier = services.verifier
        do {
            let transactions: [JWSTransactionDecodedPayload]
            switch proof {
            case .signedTransaction(let jws): transactions = [try await verifier.transaction(jws)]
            case .receipt(let receipt):
                let purchases = try await verifier.receiptTransactions(base64: receipt, ticket: ticket)
                let stored = try await services.ledger.transactions(ids: purchases.compactMap(\.transactionId))
                transactions = try await verifier.completingReceipt(purchases, stored: stored, ticket: ticket)
            case .transactionId(let id): transactions = [try await verifier.transaction(id: id, ticket: ticket)]
            }
            for transaction in transactions { services.observeAppleClock(transaction.signedDate, environment: transaction.environment) }
            return transactions
        } catch let error as AppStoreError {
            throw APIError(error)
        } catch let error as AppStoreClientError where ProofVerifier.isNotFound(error) {
            throw APIError(.unprocessableContent, code: Self.notFoundCode, error.message)
        } catch let error as AppStoreClientError where error.code != .unavailable {
            throw APIError(error)
        }
    }

    /// Apple does not know the transaction id in any environment this server accepts. Class `operator`: the device
    /// keeps it (a purchase Apple has not caught up with yet); a held one is rejected once it stays unknown
    /// (``Reconciler``).
    static let notFoundCode = ErrorCode.transactionIdNotFound

    /// The order id each verified transaction is submitted with: the one transaction of a signed transaction or a
    /// looked-up id carries it; of a receipt's purchases, only the newest of the order's product does — the one the
    /// app was paying for (the others are history, bound through their series and account).
    static func orderIds(for transactions: [JWSTransactionDecodedPayload], orderId: String?, fromReceipt: Bool, ledger: Ledger) async throws -> [String?] {
        guard let orderId else { return transactions.map { _ in nil } }
        guard fromReceipt else { return transactions.map { _ in orderId } }
        guard let order = try await ledger.order(orderId) else { return transactions.map { _ in nil } }
        let newest = transactions.indices.filter { transactions[$0].productId == order.productId }
            .max { (transactions[$0].purchaseDate ?? .distantPast) < (transactions[$1].purchaseDate ?? .distantPast) }
        return transactions.indices.map { $0 == newest ? orderId : nil }
    }

    /// The same proof from the same account is held once.
    static func proofId(kind: PendingProof.Kind, accountId: String, proof: String) -> String {
        SHA256.hash(data: Array("\(kind.rawValue)\u{0}\(accountId)\u{0}\(proof)".utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

extension APIError {
    /// The API's answer when Apple refused or answered nonsense.
    init(_ error: AppStoreClientError) {
        switch error.code {
        case .rejected: self.init(.unprocessableContent, code: ErrorCode(rawValue: error.code.rawValue), error.message)
        case .unavailable: self.init(.serviceUnavailable, code: ErrorCode(rawValue: error.code.rawValue), error.message)
        default: self.init(.badGateway, code: ErrorCode(rawValue: error.code.rawValue), error.message)
        }
    }
}
