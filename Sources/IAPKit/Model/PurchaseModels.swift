import AppStoreFormats
import Foundation
// The contract's types (Entitlements, RefusalClass, ErrorCode…) are the SDK's own: an app imports PurchaseClient alone.
@_exported import PurchaseAPI

/// How a purchase ended, as the app shows it.
public enum PurchaseOutcome: Sendable, Hashable {
    /// Paid and granted by the server.
    case granted(Entitlements)
    /// Paid and safe in the journal, but not yet granted (the server was unreachable, or is waiting for Apple): it is
    /// delivered later, by the next upload attempt or the next launch. Show "processing", not "failed".
    case paidPendingDelivery(transactionId: String)
    /// Paid, but the server refused it for a reason its operator can fix (its configuration or policy): the
    /// transaction stays journaled and unfinished and is uploaded again with backoff. Show "paid — we will deliver it".
    case paidDeliveryDelayed(transactionId: String, reason: String)
    /// Paid, but the journal could not be written (disk full, locked keychain). The transaction stays unfinished in
    /// the store's queue, which this client retries from while it runs and at every launch. Show "processing".
    case paidNotJournaled(transactionId: String, reason: String)
    /// Paid with an order of another account (its `appAccountToken`): the server granted it to that account, which
    /// is not the one signed in. Nothing was granted here; the transaction is finished because it reached its owner.
    case deliveredToOwner(transactionId: String)
    /// Ask to Buy: a parent has to approve; the transaction arrives later through ``PurchaseClient/start()``.
    case pendingApproval
    /// The customer closed the payment sheet (or the store cancelled the payment): nothing was charged, and the order
    /// is reported abandoned. Show nothing.
    case cancelled
    /// Nothing was charged: the order was not made, the store refused the payment, or nobody is signed in. Decide on
    /// the failure's ``PurchaseFailure/code``; show its ``PurchaseFailure/message``.
    case failed(PurchaseFailure)
}

/// Why a call did not do what it was asked: a code to decide on, and a sentence to show or log. What the server or the
/// network said in its own words (a JSON body, a transport error) is never the message: it goes to the debug log
/// (``PurchaseLog``).
public struct PurchaseFailure: CodedError {
    public enum Code: String, Sendable, Hashable {
        /// No account is signed in (no sign-in token): sign one in with ``PurchaseClient/logIn(_:token:)``.
        case notSignedIn = "not_signed_in"
        /// The server did not accept the sign-in token (expired, revoked, signed with another key): refresh it, or sign
        /// in again.
        case tokenRejected = "token_rejected"
        /// The purchase server could not be reached (no network, DNS, TLS, a timeout, the server down). Nothing was
        /// charged when this ends a purchase.
        case networkUnreachable = "network_unreachable"
        /// The purchase server answered that it cannot serve now (5xx, overloaded): try again later.
        case serverUnavailable = "server_unavailable"
        /// The App Store could not be reached, or has no account signed in on this device. Never reported as
        /// ``paymentsNotAllowed``.
        case storeUnavailable = "store_unavailable"
        /// Payments are disabled on this device (parental controls, MDM).
        case paymentsNotAllowed = "payments_not_allowed"
        /// The product is not sold: the server's catalog or the store does not know it, or the server no longer sells it
        /// (retired: those who bought it keep it).
        case unknownProduct = "unknown_product"
        /// The product is not sold in the customer's storefront.
        case notAvailableInStorefront = "not_available_in_storefront"
        /// The store refused or failed the payment.
        case storeFailed = "store_failed"
        /// The server could not create the order (nothing was charged).
        case orderFailed = "order_failed"
        /// The offer asked for cannot be redeemed: the server would not sign it, or the store refused it (the customer
        /// is not eligible, the signature or the offer is wrong). Nothing was charged.
        case offerRefused = "offer_refused"
        /// The server refused the request (an answer, not an outage: the offline copy does not stand in for it); for a
        /// paid transaction, for good (e.g. it belongs to another account).
        case rejectedByServer = "rejected_by_server"
        /// A promoted purchase is held until the app calls ``PurchaseClient/readyForPromotedPurchases()``.
        case notReady = "not_ready"
        /// The server or the store answered with more bytes than the SDK reads.
        case responseTooLarge = "response_too_large"
        /// An entitlements answer whose signature, account or nonce did not verify against the configured key: it
        /// is not believed (a proxy on the device may have forged it).
        case untrustedAnswer = "untrusted_answer"
        /// The server answered for another account than the one signed in (the sign-in token and the account given to
        /// ``PurchaseClient/logIn(_:token:)`` disagree, or the sign-in changed during the call): the answer is not shown.
        case accountMismatch = "account_mismatch"
        /// The store does not offer this here (an OS version or platform without it).
        case unsupported = "unsupported"
        /// The server's device-integrity policy refuses purchases from this device (its checks reported signs of a
        /// jailbreak): no order was made and nothing was charged.
        case deviceRefused = "device_refused"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Whether the call never reached an answer (network, server, sign-in token): the offline copy may stand in.
    public var isUnreachable: Bool { code == .networkUnreachable || code == .serverUnavailable }
}

/// Progress of the purchase flow, for a spinner or a log. Every event of a purchase names its product; a purchase ends
/// in ``granted(productId:transactionId:)``, ``deliveredToOwner(productId:transactionId:)``,
/// ``deliveryDelayed(productId:transactionId:reason:)``, ``pendingApproval(productId:requestId:)``, ``cancelled(productId:)``,
/// ``failed(productId:_:)`` or, while the server cannot be reached, ``uploadFailed(productId:transactionId:reason:)``
/// (it is delivered later).
public enum PurchaseEvent: Sendable, Hashable {
    case creatingOrder(productId: String)
    case awaitingPayment(productId: String, orderId: String)
    case journaled(productId: String, transactionId: String)
    case uploading(productId: String, transactionId: String, attempt: Int)
    case granted(productId: String, transactionId: String)
    case finished(productId: String, transactionId: String)
    /// The store refused to finish a delivered transaction: it stays in the store's queue (nothing is lost) and the
    /// client finishes it again with backoff.
    case finishFailed(productId: String, transactionId: String, reason: String)
    case uploadFailed(productId: String, transactionId: String, reason: String)
    case rejected(productId: String, transactionId: String, reason: String)
    /// Ask to Buy: waiting for a parent. `requestId` names the request where the store says which it is (the
    /// simulator does; StoreKit does not, so it is nil there).
    case pendingApproval(productId: String, requestId: String? = nil)
    /// Refused for a reason the server's operator can fix: kept, retried with backoff. "Paid — we will deliver it."
    case deliveryDelayed(productId: String, transactionId: String, reason: String)
    /// The journal could not be written or read; the store's unfinished queue carries the purchase meanwhile.
    /// `productId` and `transactionId` are nil when the whole journal could not be read.
    case journalFailed(productId: String?, transactionId: String?, reason: String)
    /// The server granted the transaction to the account whose order it was paid for, not the one signed in.
    case deliveredToOwner(productId: String, transactionId: String)
    /// Another account's paid transaction waits on this device until that account signs in.
    case waitingForAccount(productId: String, transactionId: String, accountId: String)
    /// The customer closed the payment sheet (or a parent declined): nothing was charged.
    case cancelled(productId: String)
    /// The purchase ended without a payment (or with one the server refused for good: ``rejected(productId:transactionId:reason:)`` came before).
    case failed(productId: String, PurchaseFailure)
    /// The signed-in account changed (nil: signed out); what the previous account saw is cleared.
    case accountChanged(accountId: String?)

    /// The product the event is about; nil for an account change and a journal that could not be read.
    public var productId: String? {
        switch self {
        case .creatingOrder(let id), .awaitingPayment(let id, _), .journaled(let id, _), .uploading(let id, _, _), .granted(let id, _),
             .finished(let id, _), .finishFailed(let id, _, _), .uploadFailed(let id, _, _), .rejected(let id, _, _), .pendingApproval(let id, _),
             .deliveryDelayed(let id, _, _), .deliveredToOwner(let id, _), .waitingForAccount(let id, _, _), .cancelled(let id), .failed(let id, _):
            id
        case .journalFailed(let id, _, _): id
        case .accountChanged: nil
        }
    }

    /// The transaction the event is about, once there is one.
    public var transactionId: String? {
        switch self {
        case .journaled(_, let id), .uploading(_, let id, _), .granted(_, let id), .finished(_, let id), .finishFailed(_, let id, _),
             .uploadFailed(_, let id, _), .rejected(_, let id, _), .deliveryDelayed(_, let id, _), .deliveredToOwner(_, let id),
             .waitingForAccount(_, let id, _):
            id
        case .journalFailed(_, let id, _): id
        default: nil
        }
    }
}

/// What the signed-in account owns, as the app's UI needs to tell it: nobody signed in, not known yet (show a
/// placeholder, not "nothing owned"), or known (from the server, or its offline copy: `cachedAt` set).
public enum EntitlementsState: Sendable, Hashable {
    case signedOut
    case notLoaded(accountId: String)
    case loaded(Entitlements)

    /// The entitlements when loaded.
    public var entitlements: Entitlements? {
        if case .loaded(let entitlements) = self { entitlements } else { nil }
    }
}

/// The SDK's debug log: off by default; `.debug` writes each event and each failure's underlying detail (the server's
/// body, the transport error) to the unified log on Apple platforms and to standard error elsewhere; `.custom` hands
/// each line to the app.
public struct PurchaseLog: Sendable {
    let write: (@Sendable (String) -> Void)?

    public static let off = PurchaseLog(write: nil)
    public static let debug = PurchaseLog { line in PurchaseLog.system(line) }
    public static func custom(_ write: @escaping @Sendable (String) -> Void) -> PurchaseLog { PurchaseLog(write: write) }

    func callAsFunction(_ line: @autoclosure () -> String) {
        guard let write else { return }
        write(line())
    }
}
