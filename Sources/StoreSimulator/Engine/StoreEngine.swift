import AppStoreFormats
import Foundation

/// The simulated App Store's purchase rules: accounts, purchases and their outcomes, Ask to Buy, the per-device
/// unfinished-transaction queue, app receipts and restore. State lives in memory and, when a data directory is
/// given, in `state.json` there, written atomically after every change so a restart loses nothing.
public actor StoreEngine {
    public let catalog: SimulatorCatalog
    public let minter: Minter
    public let clock: VirtualClock
    public let environment: AppStoreEnvironment
    public let rate: RenewalRate
    /// Whether a billing failure first opens a grace period (App Store Connect's Billing Grace Period).
    public let gracePeriodEnabled: Bool
    var state: StoreState
    private let stateFile: URL?

    /// What a purchase attempt ended in, as StoreKit reports it to the app.
    public enum PurchaseResult: Sendable, Equatable {
        /// Paid: the signed transaction and, when asked for, the updated app receipt (DER).
        case purchased(signedTransaction: String, transactionId: String, receipt: [UInt8]?)
        case userCancelled
        /// Ask to Buy: waiting for a parent; `requestId` approves or declines it.
        case pending(requestId: String)
        /// The customer must act first (e.g. accept terms); completing `requestId` delivers the transaction later.
        case interrupted(requestId: String)
        case failed(reason: String)
    }

    /// How a purchase should end, chosen per call by tests and clients.
    public enum Outcome: String, Sendable, Codable, CaseIterable {
        case success, userCancelled, failed, deferred, interrupted
    }

    public init(catalog: SimulatorCatalog, minter: Minter, environment: AppStoreEnvironment = .sandbox,
                rate: RenewalRate = .sandbox, gracePeriodEnabled: Bool = true, dataDirectory: URL? = nil, frozenClock: Date? = nil) throws {
        self.catalog = catalog
        self.gracePeriodEnabled = gracePeriodEnabled
        self.minter = minter
        self.environment = environment
        self.rate = rate
        stateFile = dataDirectory?.appendingPathComponent("state.json")
        if let stateFile, let data = FileManager.default.contents(atPath: stateFile.path) {
            do { state = try JSONDecoder().decode(StoreState.self, from: data) } catch {
                throw SimulatorError.storage("\(stateFile.path) is unreadable: \(error)")
            }
            TransactionRevisions.raise(past: state.transactions.values.compactMap(\.revision).max() ?? 0)
            // A state file from before revisions: its transactions changed last in the order they were minted.
            for id in state.transactionOrder where state.transactions[id]?.revision == nil {
                state.transactions[id]?.revision = TransactionRevisions.next()
            }
        } else {
            state = StoreState()
        }
        clock = VirtualClock(offset: state.clockAdvance, frozenAt: frozenClock)
    }

    // MARK: Accounts

    /// Creates (or replaces the settings of) a customer account.
    public func createAccount(_ id: String, storefront: String? = nil, canMakePayments: Bool = true, askToBuy: Bool = false, billingFails: Bool = false) throws {
        var account = state.accounts[id] ?? StoreState.Account(id: id, storefront: storefront ?? catalog.storefront, canMakePayments: canMakePayments, askToBuy: askToBuy)
        account.storefront = storefront ?? account.storefront
        account.canMakePayments = canMakePayments
        account.askToBuy = askToBuy
        let recovered = account.billingFails && !billingFails
        account.billingFails = billingFails
        state.accounts[id] = account
        // The customer has the app: its download is an app transaction, whose id every transaction carries.
        _ = givingAppTransaction(to: id)
        if recovered { try recoverBilling(account: id) }
        try persist()
    }

    /// Runs whatever fell due as real time passed (renewals, expiries) and saves; the server calls it periodically.
    public func tick() throws {
        let before = state.notifications.count
        try processSubscriptions()
        if state.notifications.count != before { try persist() }
    }

    /// Moves simulated time forward.
    public func advanceClock(by seconds: TimeInterval) throws {
        clock.advance(by: seconds)
        state.clockAdvance = clock.totalAdvance
        try processSubscriptions()
        try persist()
    }

    // MARK: Purchases

    /// Buys `productId` for `account` on `device`, redeeming `offer` when given. What the account already owns is
    /// answered with the transaction that owns it, charging nothing, as the App Store does (see `owningTransaction`).
    public func purchase(account accountId: String, device: String, productId: String, appAccountToken: UUID? = nil,
                         quantity: Int = 1, offer: OfferRequest? = nil, allowIntroductoryOffer: Bool? = nil, outcome: Outcome = .success,
                         withReceipt: Bool = true, billingPlanType: BillingPlanType? = nil,
                         advancedCommerce signed: AdvancedCommercePurchase? = nil) throws -> PurchaseResult {
        try processSubscriptions()
        guard let account = state.accounts[accountId] else { return .failed(reason: "unknown account \(accountId)") }
        guard account.canMakePayments else { return .failed(reason: "purchaseNotAllowed: payments are not allowed for this account") }
        guard let product = catalog.product(productId) else { return .failed(reason: "productUnavailable: invalid product id \(productId)") }
        var appAccountToken = appAccountToken
        let advancedCommerce = signed?.request
        if product.advancedCommerce || signed != nil {
            if let refusal = refusalOfAdvancedCommercePurchase(advancedCommerce, product: product, account: account, appAccountToken: appAccountToken,
                                                               quantity: quantity, offer: offer, billingPlanType: billingPlanType) {
                return .failed(reason: refusal)
            }
            // Taken once the request is good for this purchase: a refused one can be presented again.
            guard try takeOfferNonce(signed?.nonce ?? "", account: accountId, transactionId: nil) else {
                return .failed(reason: "invalidOfferSignature: the request's nonce was used before")
            }
            appAccountToken = appAccountToken ?? advancedCommerce?.requestInfo?.appAccountToken.flatMap { UUID(uuidString: $0) }
            // A reactivation happens now or not at all: kept waiting for a parent it would later be bought as something else.
            if let advancedCommerce, advancedCommerce.operation == AdvancedCommerceInAppRequest.reactivateSubscription {
                switch outcome {
                case .userCancelled: return .userCancelled
                case .failed: return .failed(reason: "the payment failed")
                case .success where !account.askToBuy: return try reactivate(advancedCommerce, account: accountId, withReceipt: withReceipt)
                default: return .failed(reason: "OperationNotAllowed: a reactivation is not deferred (Ask to Buy, an interrupted purchase)")
                }
            }
        }
        guard (1...10).contains(quantity) else { return .failed(reason: "invalidQuantity: quantity must be 1 to 10") }
        if let offer, case .failure(let refusal) = resolve(offer, productId: productId, account: accountId) { return .failed(reason: refusal.reason) }
        if let plan = billingPlanType, plan != .billedUpfront {
            guard plan == .monthly, catalog.product(productId)?.monthlyCommitment != nil else { return .failed(reason: "\(productId) has no \(plan) billing plan") }
            guard offer == nil else { return .failed(reason: "the simulator takes no offer with a monthly plan") }
        }
        let request = StoreState.PendingPurchase(account: accountId, device: device, productId: productId, appAccountToken: appAccountToken,
                                                 quantity: quantity, offer: offer, allowIntroductoryOffer: allowIntroductoryOffer,
                                                 billingPlanType: billingPlanType == .monthly ? .monthly : nil, advancedCommerce: advancedCommerce)
        // What the Apple ID owns is answered before any payment or parent is asked: no charge, no notification, the
        // transaction that owns it (see owningTransaction for Apple's behaviour followed).
        if outcome != .userCancelled, outcome != .failed, advancedCommerce == nil,
           let owned = owningTransaction(account: accountId, productId: productId, offer: offer) {
            state.accounts[accountId]?.devices.insert(device)
            try persist()
            return .purchased(signedTransaction: try signedTransaction(owned), transactionId: owned, receipt: withReceipt ? try receipt(for: accountId) : nil)
        }
        switch outcome {
        case .userCancelled: return .userCancelled
        case .failed: return .failed(reason: "the payment failed")
        case .deferred: return try askForApproval(request)
        case .interrupted:
            guard case .pending(let requestId) = try askForApproval(request, interrupted: true) else {
                return .failed(reason: "could not record the interrupted purchase")
            }
            return .interrupted(requestId: requestId)
        case .success where account.askToBuy:
            return try askForApproval(request)
        case .success:
            if let change = try changeSubscriptionIfSameGroup(account: accountId, productId: productId, appAccountToken: appAccountToken, offer: offer,
                                                              withReceipt: withReceipt) { return change }
            let id = try complete(request)
            return .purchased(signedTransaction: try signedTransaction(id), transactionId: id, receipt: withReceipt ? try receipt(for: accountId) : nil)
        }
    }

    private func askForApproval(_ request: StoreState.PendingPurchase, interrupted: Bool = false) throws -> PurchaseResult {
        // Minted in order, so requests sort by age and a replayed history names the same ones.
        let requestId = "request-" + state.mintId()
        var request = request
        request.requestedAt = clock.now
        request.interrupted = interrupted ? true : nil
        state.pendingPurchases[requestId] = request
        try persist()
        return .pending(requestId: requestId)
    }

    /// A parent approves an Ask to Buy request, or the customer completes an interrupted purchase: the transaction
    /// joins the device's unfinished queue.
    /// - Returns: the new transaction id, or nil when no such request is waiting.
    public func approve(_ requestId: String) throws -> String? {
        guard let pending = state.pendingPurchases.removeValue(forKey: requestId) else { return nil }
        // Owned by the time it is approved (bought meanwhile on another device): nothing is charged; the transaction
        // that owns it reaches the waiting device as an approved one would.
        if let owned = owningTransaction(account: pending.account, productId: pending.productId, offer: pending.offer) {
            state.accounts[pending.account]?.devices.insert(pending.device)
            state.transactions[owned]?.unfinishedOn.insert(pending.device)
            try persist()
            return owned
        }
        // Approved later, it is bought as it would be now: in a group the customer already subscribes to, as an upgrade
        // or a downgrade of that subscription (the same product again buys nothing).
        state.accounts[pending.account]?.devices.insert(pending.device)
        if let change = try changeSubscriptionIfSameGroup(account: pending.account, productId: pending.productId,
                                                          appAccountToken: pending.appAccountToken, offer: pending.offer, withReceipt: false) {
            try persist()
            if case .purchased(_, let id, _) = change { return id }
            return nil
        }
        return try complete(pending)
    }

    /// A parent declines an Ask to Buy request: nothing is bought. Returns whether a request was waiting.
    public func decline(_ requestId: String) throws -> Bool {
        let removed = state.pendingPurchases.removeValue(forKey: requestId) != nil
        try persist()
        return removed
    }

    private func complete(_ request: StoreState.PendingPurchase) throws -> String {
        let (accountId, device, productId) = (request.account, request.device, request.productId)
        guard let product = catalog.product(productId), var account = state.accounts[accountId] else {
            throw SimulatorError.catalog("product \(productId) or account \(accountId) vanished")
        }
        let now = clock.now
        account.devices.insert(device)
        let id = state.mintId()
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = id
        payload.originalTransactionId = id
        payload.bundleId = catalog.bundleId
        payload.productId = productId
        payload.purchaseDate = now
        payload.originalPurchaseDate = now
        payload.quantity = request.quantity
        payload.type = product.type
        payload.appAccountToken = request.appAccountToken
        payload.inAppOwnershipType = .purchased
        payload.environment = environment
        payload.transactionReason = .purchase
        payload.storefront = account.storefront
        payload.storefrontId = Self.storefrontIds[account.storefront] ?? "143441"
        let price = product.storefrontPrices[account.storefront] ?? .init(currency: catalog.currency, price: product.price)
        payload.currency = price.currency
        payload.price = price.price * Int64(request.quantity)
        if let terms = request.advancedCommerce {
            state.accounts[accountId] = account
            return try completeAdvancedCommerce(payload, terms, request: request, product: product)
        }
        if product.type == .autoRenewableSubscription, let period = product.period, let group = product.subscriptionGroupIdentifier {
            payload.subscriptionGroupIdentifier = group
            payload.webOrderLineItemId = state.mintId()
            // An offer the customer redeems (re-checked: an approval can come long after the request) wins over the intro offer.
            var offer: StoreState.ScheduledOffer?
            if let requested = request.offer, case .success(let terms) = resolve(requested, productId: productId, account: accountId) {
                offer = terms
            } else if let intro = product.introductoryOffer, request.billingPlanType != .monthly,
                      request.allowIntroductoryOffer ?? !account.introOfferGroupsUsed.contains(group) {
                account.introOfferGroupsUsed.insert(group)
                offer = schedule(intro, type: .introductoryOffer, product: product)
            }
            var length = rate.duration(of: period)
            var nextOffer: StoreState.ScheduledOffer?
            var commitment: StoreState.Subscription.Commitment?
            if let plan = product.monthlyCommitment {
                // A one-year plan with billing plans says which; monthly periods are a month each, 12 to a commitment.
                if request.billingPlanType == .monthly {
                    offer = nil
                    length = rate.duration(of: SubscriptionPeriod(value: 1, unit: .month))
                    commitment = .init(billingPeriodNumber: 1, expires: now.addingTimeInterval(length * 12), renews: true)
                    stamp(&payload, commitment: commitment!, plan: plan)
                } else {
                    payload.billingPlanType = .billedUpfront
                }
            }
            if let offer { (length, nextOffer) = apply(offer, to: &payload) }
            payload.expiresDate = now.addingTimeInterval(length)
            // Resubscribing continues the customer's series in the group.
            let previous = state.subscriptions.values.first { $0.account == accountId && $0.group == group && $0.sharedFrom == nil }
            if let previous { payload.originalTransactionId = previous.originalTransactionId; payload.originalPurchaseDate = state.transactions[previous.originalTransactionId]?.payload.purchaseDate }
            state.accounts[accountId] = account
            state.transactions[id] = .init(payload: payload, account: accountId, unfinishedOn: [device])
            state.transactionOrder.append(id)
            let original = payload.originalTransactionId ?? id
            state.subscriptions[original] = .init(
                originalTransactionId: original, account: accountId, group: group, latestTransactionId: id, productId: productId,
                autoRenewProductId: productId, autoRenewStatus: true, expiresDate: payload.expiresDate!, phase: .active, nextOffer: nextOffer,
                commitment: commitment)
            // Apple's table of offer notifications: an offer redeemed to subscribe for the first time or after the
            // subscription expired (a promotional offer, an offer code, a win-back offer) is SUBSCRIBED; OFFER_REDEEMED is
            // for a customer with an active subscription (changeSubscriptionIfSameGroup).
            try notify(.subscribed, previous == nil ? .initialBuy : .resubscribe, subscription: original, at: now)
        } else {
            // An offer code redeemed for a one-time purchase: its price for each unit, `ONE_TIME`, and no offer period
            // (Apple reports one only for subscriptions). Apple sends ONE_TIME_CHARGE for it as for any such purchase.
            if let requested = request.offer, case .success(let terms) = resolve(requested, productId: productId, account: accountId) {
                payload.offerType = terms.type
                payload.offerIdentifier = terms.identifier
                payload.offerDiscountType = terms.discountType
                payload.price = terms.price * Int64(request.quantity)
            }
            state.accounts[accountId] = account
            state.transactions[id] = .init(payload: payload, account: accountId, unfinishedOn: [device])
            state.transactionOrder.append(id)
            try notify(.oneTimeCharge, nil, transactionId: id)
        }
        try shareWithFamily(of: accountId)
        try persist()
        return id
    }

    // MARK: Transactions

    /// A transaction as a freshly signed JWS (`signedDate` now).
    public func signedTransaction(_ transactionId: String) throws -> String {
        guard var payload = state.transactions[transactionId]?.payload else {
            throw SimulatorError.catalog("unknown transaction \(transactionId)")
        }
        payload.signedDate = clock.now
        return try minter.sign(stampingAppTransaction(payload))
    }

    /// `payload` with its customer's `appTransactionId`, as Apple puts it in every transaction it signs.
    func stampingAppTransaction(_ payload: JWSTransactionDecodedPayload) -> JWSTransactionDecodedPayload {
        var payload = payload
        if payload.appTransactionId == nil, let account = payload.transactionId.flatMap({ state.transactions[$0]?.account }) {
            payload.appTransactionId = state.accounts[account]?.appTransactionId
        }
        return payload
    }

    /// The device's unfinished transactions, oldest first, signed now (StoreKit's `Transaction.unfinished`).
    public func unfinished(account: String, device: String) throws -> [String] {
        try processSubscriptions()
        return try state.transactionOrder.filter { id in
            guard let stored = state.transactions[id] else { return false }
            return stored.account == account && stored.unfinishedOn.contains(device)
        }.map(signedTransaction)
    }

    /// The app finishes a transaction on a device. Returns whether it was unfinished there.
    public func finish(_ transactionId: String, device: String) throws -> Bool {
        guard state.transactions[transactionId]?.unfinishedOn.remove(device) != nil else { return false }
        try persist()
        return true
    }

    /// Restore: the account's non-consumables and auto-renewable subscriptions, signed now (as `AppStore.sync()`).
    public func restore(account: String) throws -> [String] {
        try processSubscriptions()
        return try state.transactionOrder.filter { id in
            guard let stored = state.transactions[id], stored.account == account else { return false }
            return stored.payload.type == .nonConsumable || stored.payload.type == .autoRenewableSubscription
        }.map(signedTransaction)
    }

    /// What StoreKit's `Transaction.currentEntitlements` lists for the account: the latest transaction of each
    /// non-consumable and non-renewing subscription not refunded, and of each auto-renewable series still active
    /// (not expired — or in its billing grace period, which entitles to service — not refunded or upgraded away).
    /// Consumables never.
    public func currentEntitlements(account: String) throws -> [String] {
        try processSubscriptions()
        let now = clock.now
        var latest: [String: String] = [:]
        for id in state.transactionOrder {
            guard let stored = state.transactions[id], stored.account == account, let productId = stored.payload.productId else { continue }
            switch stored.payload.type {
            case .nonConsumable, .nonRenewingSubscription:
                if stored.payload.revocationDate == nil { latest["product " + productId] = id }
            case .autoRenewableSubscription:
                latest["series " + (stored.payload.originalTransactionId ?? id)] = id
            default:
                continue
            }
        }
        let chosen = Set(latest.values)
        return try state.transactionOrder.filter { id in
            guard chosen.contains(id), let payload = state.transactions[id]?.payload else { return false }
            guard payload.type == .autoRenewableSubscription else { return true }
            let grace = payload.originalTransactionId.flatMap { state.subscriptions[$0]?.gracePeriodExpiresDate }
            return payload.revocationDate == nil && payload.isUpgraded != true && max(payload.expiresDate ?? .distantFuture, grace ?? .distantPast) > now
        }.map(signedTransaction)
    }

    // MARK: Receipts

    /// The account's current app receipt (DER): every purchase except consumables already finished, as Apple drops
    /// them the next time the receipt is updated.
    public func receipt(for accountId: String) throws -> [UInt8] {
        try processSubscriptions()
        let now = clock.now
        var receipt = AppReceipt(
            receiptType: environment == .production ? .production : .productionSandbox,
            appItemId: environment == .production ? catalog.appAppleId : 0,
            bundleId: catalog.bundleId, applicationVersion: "1", opaqueValue: Array(UUID().uuidString.utf8.prefix(16)),
            sha1Hash: Array(repeating: 0, count: 20), receiptCreationDate: now,
            originalPurchaseDate: Date(timeIntervalSince1970: 1_375_340_400), originalApplicationVersion: "1.0")
        for id in state.transactionOrder {
            guard let stored = state.transactions[id], stored.account == accountId else { continue }
            let t = stored.payload
            if t.type == .consumable && stored.unfinishedOn.isEmpty { continue }
            receipt.inAppPurchases.append(InAppPurchaseReceipt(
                quantity: t.quantity, productId: t.productId ?? "", transactionId: id, purchaseDate: t.purchaseDate,
                originalTransactionId: t.originalTransactionId, originalPurchaseDate: t.originalPurchaseDate,
                productTypeCode: t.type.map(InAppPurchaseReceipt.productTypeCode), expiresDate: t.expiresDate,
                webOrderLineItemId: t.webOrderLineItemId.flatMap { Int64($0) }, cancellationDate: t.revocationDate,
                isTrialPeriod: t.offerDiscountType == .freeTrial, isInIntroOfferPeriod: t.offerType == .introductoryOffer && t.offerDiscountType != .freeTrial))
        }
        return try minter.receipt(receipt)
    }

    // MARK: Storage

    func persist() throws {
        guard let stateFile else { return }
        do {
            try FileManager.default.createDirectory(at: stateFile.deletingLastPathComponent(), withIntermediateDirectories: true)
            try JSONEncoder().encode(state).write(to: stateFile, options: .atomic)
        } catch {
            throw SimulatorError.storage("cannot write \(stateFile.path): \(error)")
        }
    }

    /// Storefront ids of a few storefronts (alpha-3 → App Store id).
    static let storefrontIds = ["USA": "143441", "JPN": "143462", "GBR": "143444", "DEU": "143443", "FRA": "143442", "CAN": "143455"]
}
