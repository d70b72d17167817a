import AppStoreFormats
import Foundation
import PurchaseAPI

/// One change a rule decided on. Stores apply effects in order inside the operation's transaction; each is written
/// so that applying it twice, or after a racing replica applied it, changes nothing more (unique keys and guarded
/// updates), which is what keeps exactly-once in the database rather than in this process.
public enum LedgerEffect: Sendable, Hashable {
    /// Stores a transaction Apple signed, bound to `record.accountId` (or unbound when nil).
    case insertPurchase(PurchaseRecord, source: PurchaseSource, at: Date)
    /// Binds a stored, unbound transaction to an account (and order).
    case claimPurchase(transactionId: String, accountId: String, orderId: String?)
    /// Takes later news of a stored transaction (by `signedDate`).
    case refreshPurchase(PurchaseRecord)
    /// Records which order a transaction bound before its order was known fulfils.
    case linkOrder(transactionId: String, orderId: String)
    /// Marks an open order granted by `transactionId`.
    case fulfilOrder(orderId: String, transactionId: String, at: Date)
    /// Closes an open order as settled by an operator, with no transaction. An order no longer open (granted or settled
    /// since it was read) makes the operation decide again from fresh facts.
    case settleOrder(orderId: String, note: String, at: Date)
    /// One uniquely keyed balance movement.
    case moveBalance(BalanceMove)
    case recordConflict(transactionId: String, claimedBy: String, owner: String, at: Date)
    /// The series' latest status and renewal info (by `signedDate`).
    case updateSeriesStatus(SubscriptionRecord)
    /// The series' latest period (by purchase date): its product and expiry.
    case updateSeriesPeriod(originalTransactionId: String, productId: String, purchaseDate: Date, expiresDate: Date?)
    case recordDeviceReport(transactionId: String, accountId: String, signals: [String], at: Date)
    case audit(actor: String, action: AuditAction, subject: String, detail: String, at: Date)
    /// Binds the series' unbound periods whose token is none or this one to the account.
    /// Each period so bound reaches the account like any grant: its webhook event is written with it.
    case claimSeries(originalTransactionId: String, accountId: String, appAccountToken: UUID?, at: Date)
    /// An event for the app's backend, into the outbox (once per id): committed with the change it reports.
    case emitEvent(WebhookEvent)
    /// Not a change: a precondition, checked holding the series' lock. Otherwise the operation is decided again from
    /// fresh facts.
    case requireFacts(FactsGuard)
}

/// A movement of a consumable balance, unique by `key` (`grant:<transactionId>`, `adjust:<transactionId>:<n>`,
/// `spend:<account>:<idempotencyKey>`).
public struct BalanceMove: Sendable, Hashable, Codable {
    public var key: String
    public var accountId: String
    public var currency: String
    public var delta: Int64
    public var transactionId: String?
    public var at: Date
    /// A spend's debit: the balance must cover it and its key must be new, or the operation is decided again from
    /// fresh facts (another spend took the coins, or made this key, since they were read). Otherwise a movement made
    /// before under its key is left as it is.
    public var requiresCover: Bool

    public init(key: String, accountId: String, currency: String, delta: Int64, transactionId: String?, at: Date, requiresCover: Bool = false) {
        self.key = key
        self.accountId = accountId
        self.currency = currency
        self.delta = delta
        self.transactionId = transactionId
        self.at = at
        self.requiresCover = requiresCover
    }
}

/// A balance movement as stored: the same fields as the movement that made it.
public typealias BalanceEntry = BalanceMove
