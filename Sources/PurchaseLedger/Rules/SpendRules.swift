import Foundation

/// Spending a consumable balance (``Ledger/spend(accountId:currency:amount:idempotencyKey:now:)``). Pure: the request
/// and the facts read before it — the movement already stored under its key, the balance — in; a decision out.
public enum SpendRules {
    /// The most one spend takes: far above any balance a purchase grants, far below where sums of movements overflow.
    public static let largestSpend: Int64 = 1_000_000_000_000

    /// What a spend asks: `amount` of `currency` from `accountId`'s balance, once per `idempotencyKey`.
    public struct Request: Sendable, Hashable {
        public var accountId: String
        public var currency: String
        public var amount: Int64
        public var idempotencyKey: String

        public init(accountId: String, currency: String, amount: Int64, idempotencyKey: String) {
            self.accountId = accountId
            self.currency = currency
            self.amount = amount
            self.idempotencyKey = idempotencyKey
        }
    }

    /// What a spend does.
    public enum Decision: Sendable {
        /// Spend now: the debit, as effects.
        case spend([LedgerEffect])
        /// The same spend was made before under this key: nothing more is taken, the balance is answered as it is.
        case repeated
        case refused(LedgerError)
    }

    /// The refusal of a request of the wrong shape, or nil: a positive amount within ``largestSpend``, a key of 1 to
    /// 200 bytes, a currency name of 1 to 64.
    public static func check(_ request: Request) -> LedgerError? {
        if request.amount <= 0 { return LedgerError(.invalidInput, "amount must be positive") }
        if request.amount > largestSpend { return LedgerError(.invalidInput, "amount is over the limit of \(largestSpend) a spend") }
        if request.idempotencyKey.isEmpty || request.idempotencyKey.utf8.count > 200 {
            return LedgerError(.invalidInput, "idempotency keys are 1 to 200 bytes")
        }
        if request.currency.isEmpty || request.currency.utf8.count > 64 { return LedgerError(.invalidInput, "currency names are 1 to 64 bytes") }
        return nil
    }

    /// The key the spend's movement is stored under. The account's length first, so that no account and key can spell
    /// another's ("a" + "b:c" against "a:b" + "c").
    public static func key(_ request: Request) -> String {
        "spend:\(request.accountId.utf8.count):\(request.accountId):\(request.idempotencyKey)"
    }

    /// Decides from the movement stored under the request's key (`earlier`) and the balance (`balance`) read before:
    /// a repeat of the same spend takes nothing more; the key used for another amount or currency is refused, as is a
    /// balance short of the amount; otherwise a debit the balance must cover under a key not used yet — a racing
    /// spend of the same coins or key makes it a lost race, and the spend is decided again from fresh facts.
    public static func decide(_ request: Request, earlier: BalanceEntry?, balance: Int64, now: Date) -> Decision {
        if let earlier {
            guard earlier.currency == request.currency, earlier.delta == -request.amount else {
                return .refused(LedgerError(.idempotencyKeyReused, "idempotency key \(request.idempotencyKey) was used for another spend"))
            }
            return .repeated
        }
        guard balance >= request.amount else { return .refused(LedgerError(.insufficientBalance, "not enough \(request.currency)")) }
        return .spend([.moveBalance(BalanceMove(key: key(request), accountId: request.accountId, currency: request.currency, delta: -request.amount,
                                                transactionId: nil, at: now, requiresCover: true))])
    }
}
