import AppStoreFormats
import Foundation

/// One paid transaction the app has not yet seen granted, or one order the app set out to pay.
public struct JournalEntry: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable {
        /// Written before the payment sheet: which order an `appAccountToken` belongs to, so that a payment coming
        /// back after a relaunch (when StoreKit may no longer say which order it was for) still finds its order.
        case intent
        /// Written the moment a paid transaction is seen, before anything else happens to it.
        case paid
        /// A purchase the customer started on the App Store's product page, held until the app is ready for it: kept
        /// here so that a relaunch does not forget it.
        case promoted
    }

    public var kind: Kind
    public var orderId: String?
    public var productId: String
    public var appAccountToken: UUID?
    public var transactionId: String?
    /// The signed transaction (JWS): the proof uploaded to the server.
    public var signedTransaction: String?
    /// An auto-renewable subscription's signed renewal info as the store gave it with the transaction: uploaded with it.
    public var signedRenewalInfo: String?
    public var createdAt: Date
    public var attempts: Int
    /// When the next upload is due after a failure.
    public var nextAttemptAt: Date?
    public var lastError: String?
    /// The account that ordered it (signed in when the order was made): only that account uploads it, so switching
    /// accounts on a device never hands one account's payment to another. Nil when unknown (a transaction adopted
    /// from the store's queue after a reinstall): it uploads under whoever is signed in and the server routes it by
    /// its `appAccountToken`.
    public var accountId: String?
    /// A promoted purchase's win-back offer (the offer the App Store showed with it): bought with it after a relaunch too.
    public var winBackOfferId: String?

    /// The entry's file-system-safe key: the transaction id for paid entries, the order id for intents.
    public var key: String {
        switch kind {
        case .paid: "paid-" + (transactionId ?? "unknown")
        case .intent: "intent-" + (orderId ?? appAccountToken?.lowercasedString ?? "unknown")
        case .promoted: "promoted-" + productId
        }
    }

    public init(kind: Kind, orderId: String?, productId: String, appAccountToken: UUID?, transactionId: String? = nil,
                signedTransaction: String? = nil, createdAt: Date = Date(), attempts: Int = 0, accountId: String? = nil) {
        self.accountId = accountId
        self.kind = kind
        self.orderId = orderId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.transactionId = transactionId
        self.signedTransaction = signedTransaction
        self.createdAt = createdAt
        self.attempts = attempts
    }

    /// The entry holding a promoted purchase until the app is ready for it.
    public init(promoted intent: PromotedPurchase, accountId: String? = nil) {
        self.init(kind: .promoted, orderId: nil, productId: intent.productId, appAccountToken: nil, accountId: accountId)
        winBackOfferId = intent.winBackOfferId
    }
}

/// Durable storage for journal entries. A `write` returns only when the entry would survive the process (and, on
/// Linux, a power cut) — it is the promise the whole flow rests on.
public protocol PurchaseJournal: Sendable {
    func write(_ entry: JournalEntry) throws
    func remove(key: String) throws
    func entries() throws -> [JournalEntry]
    /// The entry under `key`, nil when there is none; throws when the journal cannot say. Each upload and retry looks
    /// its own entry up: a journal that can read one entry alone spares reading them all.
    func entry(key: String) throws -> JournalEntry?
}

extension PurchaseJournal {
    public func entry(key: String) throws -> JournalEntry? { try entries().first { $0.key == key } }
}

/// Why the journal could not keep its promise.
public struct JournalError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
