import AppStoreFormats
import Foundation

/// What the rules read before deciding on a transaction, in the transaction that applies the decision.
public struct TransactionFacts: Sendable, Hashable {
    /// The order the uploader named, if it named one and it exists.
    public var namedOrder: Order?
    /// The order the transaction's `appAccountToken` names, if any.
    public var tokenOrder: Order?
    /// The transaction as already stored, if it is.
    public var stored: PurchaseRecord?
    /// The account the transaction's subscription series is bound to (its earliest bound period's).
    public var seriesOwner: String?
    /// The transaction's balance movements so far (consumables only).
    public var entries: [BalanceEntry]
    /// Whether ``entries`` were read: only a stored consumable's are (a product the catalog does not sell as one moves
    /// no balance), and only a decision on them carries them as a precondition. A precondition on movements nobody read
    /// could never hold: the refund of coins of a pack since dropped from the catalog was a lost race on every retry.
    public var entriesRead = false
    /// A subscription migrated to the Advanced Commerce API goes on under a new original transaction id: the account
    /// that held the series it continues (`previousOriginalTransactionId`). An account never loses a series, but one
    /// that nobody held may be taken meanwhile: a precondition with the series' own owner.
    public var previousSeriesOwner: String?
    /// The environment of the series' first stored period, if any: a series lives in one environment, so a period
    /// from another (an Xcode payload anyone can sign, naming a real customer's `originalTransactionId`) is refused.
    public var seriesEnvironment: AppStoreEnvironment?

    public init(namedOrder: Order? = nil, tokenOrder: Order? = nil, stored: PurchaseRecord? = nil, seriesOwner: String? = nil,
                entries: [BalanceEntry] = []) {
        self.namedOrder = namedOrder
        self.tokenOrder = tokenOrder
        self.stored = stored
        self.seriesOwner = seriesOwner
        self.entries = entries
    }

    /// Who the transaction belongs to: whoever it is bound to already; else the account whose order its
    /// `appAccountToken` names, whoever uploads it (a resubscription or upgrade paid through another account's order
    /// is that account's, though the series began elsewhere); else whoever holds its series (or the series it was
    /// migrated from); else nobody yet.
    public var owner: String? { stored?.accountId ?? tokenOrder?.accountId ?? seriesOwner ?? previousSeriesOwner }

    /// The precondition a decision on these facts carries: the series' owner and the transaction's movements are
    /// still what was read. Stores check it while holding the series' lock, so a racing replica's decision on the
    /// same series is made again from fresh facts instead of binding one series to two accounts or settling a
    /// balance twice.
    func guardFor(_ record: PurchaseRecord) -> LedgerEffect {
        let decidesOwner = stored?.accountId == nil
        let previous = decidesOwner ? record.previousOriginalTransactionId : nil
        return .requireFacts(FactsGuard(originalTransactionId: record.originalTransactionId, transactionId: record.transactionId,
                                        seriesOwner: decidesOwner ? .some(seriesOwner) : .none,
                                        seriesEnvironment: decidesOwner ? .some(seriesEnvironment) : .none,
                                        entryCount: stored != nil && entriesRead ? entries.count : nil, storedSignedDate: stored?.signedDate,
                                        previousOriginalTransactionId: previous, previousSeriesOwner: previous == nil ? .none : .some(previousSeriesOwner)))
    }
}

/// What a decision assumed about the series and the transaction's balance movements.
public struct FactsGuard: Sendable, Hashable {
    public var originalTransactionId: String
    public var transactionId: String
    /// When set, the account the series' earliest bound period belongs to (nil inside: none) must still be this.
    public var seriesOwner: String??
    /// When set, the environment of the series' first stored period (nil inside: none stored) must still be this.
    public var seriesEnvironment: AppStoreEnvironment??
    /// When set, the transaction must still have this many balance movements.
    public var entryCount: Int?
    /// When set, the stored transaction must still be the news Apple signed at this date (no newer news since).
    public var storedSignedDate: Date?
    /// The series a migrated subscription continues, when its holder decided the owner: its latest holder (nil inside:
    /// none) must still be ``previousSeriesOwner``, checked under that series' lock too.
    public var previousOriginalTransactionId: String?
    public var previousSeriesOwner: String??

    public init(originalTransactionId: String, transactionId: String, seriesOwner: String??, seriesEnvironment: AppStoreEnvironment?? = .none,
                entryCount: Int?, storedSignedDate: Date?, previousOriginalTransactionId: String? = nil, previousSeriesOwner: String?? = .none) {
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.seriesOwner = seriesOwner
        self.seriesEnvironment = seriesEnvironment
        self.entryCount = entryCount
        self.storedSignedDate = storedSignedDate
        self.previousOriginalTransactionId = previousOriginalTransactionId
        self.previousSeriesOwner = previousSeriesOwner
    }
}

/// A decision on one transaction: the effects, and what the submitter is told.
public struct SubmissionDecision: Sendable, Hashable {
    public enum Outcome: Sendable, Hashable {
        case granted
        case alreadyGranted
        /// Granted (now or before) to the account whose order the `appAccountToken` names, not to the uploader.
        case deliveredToOwner(String)
        /// Another account's, and no order of the uploader's says otherwise: refused, the attempt recorded.
        case refused(owner: String)
        /// Not for binding at all: the named order is missing, another account's or for another product; the
        /// transaction is held from another environment; or an id alone names a purchase nobody holds. No effects.
        case rejected(LedgerError)
    }

    public var outcome: Outcome
    public var effects: [LedgerEffect]
    /// The order the transaction fulfils once the effects are applied.
    public var orderId: String?
}

/// The binding rules: which order and account a verified transaction belongs to, and what binding it grants.
/// Pure: facts in, effects out; the stores read the facts and apply the effects.
public enum SubmissionRules {
    /// Decides on a transaction `uploader` presents, naming `orderId` or not.
    public static func submit(_ record: PurchaseRecord, uploader: String, orderId: String?, source: PurchaseSource, facts: TransactionFacts,
                              catalog: LedgerCatalog, now: Date) -> SubmissionDecision {
        if let orderId {
            guard let named = facts.namedOrder else { return rejected(LedgerError(.orderNotFound, "no order \(orderId)")) }
            guard named.accountId == uploader else { return rejected(LedgerError(.orderAccountMismatch, "order \(orderId) belongs to another account")) }
            guard named.productId == record.productId else {
                return rejected(LedgerError(.orderProductMismatch, "order \(orderId) is for \(named.productId), the transaction for \(record.productId)"))
            }
        }
        if let refusal = environmentRefusal(record, facts) { return rejected(refusal) }
        // "First to present" is a rule for proofs of possession: anyone can send a transaction id (they leak in
        // support threads and screenshots), so by an id alone an account gets only what an order of its own or an
        // earlier proof already ties to it.
        if source == .serverAPI, facts.owner == nil {
            return rejected(LedgerError(.possessionRequired, "transaction \(record.transactionId) is nobody's yet, and an id alone does not show who paid for it: "
                                          + "send the signed transaction or the app receipt from the device"))
        }
        let owner = facts.owner ?? uploader
        if owner != uploader {
            // Paid for through an order of the owner's: it reaches its owner whoever uploads it.
            guard facts.tokenOrder?.accountId == owner else {
                // Another account's (its series is theirs, or it was bound to them). The refusal lets the device finish
                // the transaction, so what Apple signed is kept for its owner first: a period of the owner's series
                // that only this upload brought is theirs from now on, not lost with the finish.
                var effects: [LedgerEffect] = [facts.guardFor(record)]
                if facts.stored?.accountId == nil {
                    effects += bind(record, to: owner, source: source, facts: facts, catalog: catalog, now: now).effects + seriesPeriod(record)
                }
                effects.append(.recordConflict(transactionId: record.transactionId, claimedBy: uploader, owner: owner, at: now))
                effects += WebhookRules.events(for: record, facts: facts, effects: effects, catalog: catalog, now: now)
                return SubmissionDecision(outcome: .refused(owner: owner), effects: effects, orderId: nil)
            }
        }
        var decision = bind(record, to: owner, source: source, facts: facts, catalog: catalog, now: now)
        decision.effects.insert(facts.guardFor(record), at: 0)
        decision.effects += seriesPeriod(record)
        decision.effects += WebhookRules.events(for: record, facts: facts, effects: decision.effects, catalog: catalog, now: now)
        if owner != uploader { decision.outcome = .deliveredToOwner(owner) }
        return decision
    }

    static func rejected(_ refusal: LedgerError) -> SubmissionDecision {
        SubmissionDecision(outcome: .rejected(refusal), effects: [], orderId: nil)
    }

    /// A transaction id names one purchase in one environment: a payload from another environment that carries it (an
    /// Xcode payload anyone can sign, reusing a real id) is not news of that purchase, and must not rewrite it. The
    /// refusal, or nil when the environments agree.
    public static func environmentRefusal(_ record: PurchaseRecord, _ facts: TransactionFacts) -> LedgerError? {
        if let stored = facts.stored, stored.environment != record.environment {
            return LedgerError(.invalidInput, "transaction \(record.transactionId) is held from \(stored.environment.rawValue); this one says \(record.environment.rawValue)")
        }
        if let series = facts.seriesEnvironment, series != record.environment {
            return LedgerError(.invalidInput, "series \(record.originalTransactionId) is held from \(series.rawValue); this period says \(record.environment.rawValue)")
        }
        return nil
    }

    /// A subscription period moves its series on when it is the latest (whoever holds it, however it came).
    static func seriesPeriod(_ record: PurchaseRecord) -> [LedgerEffect] {
        guard record.productType == .autoRenewableSubscription else { return [] }
        return [.updateSeriesPeriod(originalTransactionId: record.originalTransactionId, productId: record.productId,
                                    purchaseDate: record.purchaseDate, expiresDate: record.expiresDate)]
    }

    /// Decides on a transaction a notification carries: bound to its owner when one is known, stored unbound
    /// otherwise (until an account presents it).
    public static func notified(_ record: PurchaseRecord, facts: TransactionFacts, catalog: LedgerCatalog, now: Date) -> [LedgerEffect] {
        var effects: [LedgerEffect] = [facts.guardFor(record)]
        if let owner = facts.owner {
            effects += bind(record, to: owner, source: .notification, facts: facts, catalog: catalog, now: now).effects
        } else if let stored = facts.stored {
            effects.append(.refreshPurchase(record))
            effects += ConsumableRules.settle(stored.merged(with: record), entries: facts.entries, catalog: catalog, now: now)
        } else {
            var unbound = record
            unbound.accountId = nil
            unbound.orderId = nil
            effects.append(.insertPurchase(unbound, source: .notification, at: now))
        }
        effects += WebhookRules.events(for: record, facts: facts, effects: effects, catalog: catalog, now: now)
        return effects + seriesPeriod(record)
    }

    /// Binds `record` to `owner` and grants it — once: a transaction stored bound already grants nothing more.
    static func bind(_ record: PurchaseRecord, to owner: String, source: PurchaseSource, facts: TransactionFacts, catalog: LedgerCatalog,
                     now: Date) -> SubmissionDecision {
        // Apple signed the token; it names the order the payment was for. A named order is the app's word for it.
        let order = [facts.tokenOrder, facts.namedOrder].compactMap { $0 }.first { $0.accountId == owner && $0.productId == record.productId }
        var bound = record
        bound.accountId = owner
        guard let stored = facts.stored else {
            bound.orderId = order?.orderId
            var effects: [LedgerEffect] = [.insertPurchase(bound, source: source, at: now)]
            if let order { effects.append(.fulfilOrder(orderId: order.orderId, transactionId: record.transactionId, at: now)) }
            effects += ConsumableRules.settle(bound, entries: [], catalog: catalog, now: now)
            effects += claimSeries(record, owner, now: now)
            return SubmissionDecision(outcome: .granted, effects: effects, orderId: order?.orderId)
        }
        var effects: [LedgerEffect] = [.refreshPurchase(record)]
        var current = stored.merged(with: record)
        let outcome: SubmissionDecision.Outcome
        if stored.accountId == nil {
            current.accountId = owner
            current.orderId = order?.orderId
            effects.append(.claimPurchase(transactionId: record.transactionId, accountId: owner, orderId: order?.orderId))
            if let order { effects.append(.fulfilOrder(orderId: order.orderId, transactionId: record.transactionId, at: now)) }
            effects += claimSeries(record, owner, now: now)
            outcome = .granted
        } else {
            if stored.orderId == nil, let order {
                // Bound before its order was known (say, from a receipt): the order is fulfilled by it all the same.
                current.orderId = order.orderId
                effects.append(.linkOrder(transactionId: record.transactionId, orderId: order.orderId))
                effects.append(.fulfilOrder(orderId: order.orderId, transactionId: record.transactionId, at: now))
            }
            outcome = .alreadyGranted
        }
        effects += ConsumableRules.settle(current, entries: facts.entries, catalog: catalog, now: now)
        return SubmissionDecision(outcome: outcome, effects: effects, orderId: current.orderId)
    }
}

extension SubmissionRules {
    /// The series a migration to the Advanced Commerce API ended, when `record` is the migrated series' first period.
    public static func migratedFrom(_ record: PurchaseRecord) -> String? {
        guard record.productType == .autoRenewableSubscription, record.transactionId == record.originalTransactionId else { return nil }
        return record.previousOriginalTransactionId
    }

    /// Periods of the series that notifications stored before anyone held it (a renewal told of first) go with the
    /// period now bound — unless their token names an order, which decides for them.
    static func claimSeries(_ record: PurchaseRecord, _ owner: String, now: Date) -> [LedgerEffect] {
        guard record.productType == .autoRenewableSubscription else { return [] }
        return [.claimSeries(originalTransactionId: record.originalTransactionId, accountId: owner, appAccountToken: record.appAccountToken, at: now)]
    }
}

/// How a consumable transaction's credit follows its state.
public enum ConsumableRules {
    /// What a consumable transaction of `amount` a unit is worth to its account now: all of it while it stands;
    /// after a prorated refund (`REFUND_PRORATED`) the part Apple did not refund — the percentage applies to the whole
    /// quantity, and the amount clawed back is rounded to the nearest unit (1 of 3 packs refunded is 33.333 %, so
    /// exactly one pack comes back); after any other refund or revocation, nothing.
    public static func standingCredit(of record: PurchaseRecord, amount: Int64) -> Int64 {
        let credit = amount * Int64(record.quantity)
        guard record.revocationDate != nil else { return credit }
        guard record.revocationType == .refundProrated, let percentage = record.revocationPercentage, (0...100_000).contains(percentage) else {
            return 0
        }
        // credit × percentage / 100,000 in two parts, so that no catalog amount can overflow.
        let (whole, part) = credit.quotientAndRemainder(dividingBy: 100_000)
        let clawed = whole * Int64(percentage) + (part * Int64(percentage) + 50_000) / 100_000
        return credit - clawed
    }

    /// The balance movements that bring a consumable transaction's credit in line with its state: credited once
    /// while it stands, clawed back (all of it, or in proportion to a prorated refund) while refunded, credited again
    /// when a refund is reversed — each movement uniquely keyed, so the net is right whatever order the news came in
    /// and however often. A transaction refunded in full before it was ever credited is never credited.
    public static func settle(_ record: PurchaseRecord, entries: [BalanceEntry], catalog: LedgerCatalog, now: Date) -> [LedgerEffect] {
        guard let account = record.accountId, let rule = catalog.rule(for: record.productId), rule.type == .consumable,
              let currency = rule.currency, let amount = rule.amount else { return [] }
        let credit = standingCredit(of: record, amount: amount)
        let granted = entries.contains { $0.key == "grant:\(record.transactionId)" }
        guard granted else {
            if credit == 0 { return [] }
            return [.moveBalance(BalanceMove(key: "grant:\(record.transactionId)", accountId: account, currency: currency, delta: credit,
                                             transactionId: record.transactionId, at: now))]
        }
        let net = entries.reduce(Int64(0)) { $0 + $1.delta }
        let delta = credit - net
        guard delta != 0 else { return [] }
        return [.moveBalance(BalanceMove(key: "adjust:\(record.transactionId):\(entries.count)", accountId: account, currency: currency,
                                         delta: delta, transactionId: record.transactionId, at: now))]
    }
}
