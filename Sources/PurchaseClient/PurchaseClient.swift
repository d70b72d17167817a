import Foundation

/// The app side of the purchase flow, in the style of StoreKit 2.
///
/// `purchase(_:)` runs the whole way: an order from the app's server, the payment with the order's
/// `appAccountToken`, the paid transaction written to the journal before anything else, the upload, and `finish`
/// only once the server has granted it to its owner (or refused it as `final`). Whatever interrupts that — a crash,
/// a lost network, the server or Apple down, a server misconfigured, a journal that cannot be written, another
/// account signing in — the journal and the store's unfinished queue carry the purchase to the next attempt or the
/// next launch: call ``start()`` at launch, and ``logIn(_:)`` / ``logOut()`` when the app's user changes.
public actor PurchaseClient {
    /// The App Store as this app reaches it (StoreKit 2, or the simulator).
    public let store: any StoreAdapter
    /// The app's purchase server.
    public let server: PurchaseServerClient
    /// Where paid transactions wait until the server grants them.
    public let journal: any PurchaseJournal
    /// Waits between upload attempts: the n-th failure waits `retryDelays[min(n, count) - 1]`.
    public let retryDelays: [Duration]
    /// Sent with every upload when it applies (iOS devices): the server records it and its policy decides.
    public let deviceIntegrity: DeviceIntegrity?
    /// Where the last granted entitlements are kept for offline use (nil: in memory only).
    public let offlineCache: (any EntitlementsCache)?

    /// The account signed in (the app's user id, as the server's tokens name it); nil when none.
    public private(set) var accountId: String?

    /// How one upload ended.
    enum UploadResult: Sendable {
        case granted(Entitlements)
        case deliveredToOwner
        case rejected(String)
        /// Refused for a reason the operator can fix: kept, retried with backoff.
        case delayed(String)
        /// Not delivered yet (network, server, Apple): retried with backoff.
        case pending(String)
        /// Another account's: waits until it signs in.
        case waiting(String)
    }

    private var productCache: [String: StoreProduct] = [:]
    private var listener: Task<Void, Never>?
    private var retrier: Task<Void, Never>?
    private var promotedListener: Task<Void, Never>?
    /// Uploads in flight, by transaction id: a second caller waits for the first instead of racing it.
    private var inFlight: [String: Task<UploadResult, Never>] = [:]
    /// Purchases in flight, by product: a second tap joins the first instead of opening a second order.
    private var purchasesInFlight: [String: (id: UUID, task: Task<PurchaseOutcome, Never>)] = [:]
    /// Transactions this client saw settled (granted, delivered to their owner, refused as final). A late copy — from
    /// the updates stream, or a retry working from an older read of the journal — is answered from here and never
    /// uploaded or written back.
    private var settled: [String: UploadResult] = [:]
    /// Transactions granted by this client, in order: ``resume()`` counts the ones granted while it ran, whichever
    /// task (the listener, the retrier, itself) did the upload.
    private var grantLog: [String] = []
    /// Backoff kept in memory as well as in the journal, so it holds when the journal cannot be written.
    private var backoff: [String: (attempts: Int, next: Date)] = [:]
    /// Paid transactions the journal refused to take: kept here, uploaded by the retrier, written again when the
    /// journal recovers. The store's unfinished queue holds them across launches.
    private var unjournaled: [String: JournalEntry] = [:]
    /// Settled transactions whose `finish` the store refused: finished again by the retrier, with backoff, rather than
    /// left in the store's queue until the next launch (where a consumable's payment sheet would show it still pending).
    private var unfinishedSettled: [String: (transaction: StoreTransaction, attempts: Int, next: Date)] = [:]
    /// Finishes in flight: a second caller (the retrier beside the store handing the transaction over again) does not
    /// finish it again, and so never hears the store say that nothing is left to finish.
    private var finishing: Set<String> = []
    private var waitingReported: Set<String> = []
    private var promoted: [String] = []
    private var readyForPromoted = false
    private var latest: Entitlements?

    private let eventBroadcast = Broadcast<PurchaseEvent>(buffer: 256)
    private let entitlementBroadcast = Broadcast<Entitlements>(buffer: 8)

    /// Progress of purchases, uploads and deliveries. Each access is its own subscription (any number of
    /// consumers each get every event), starting with the latest event.
    public nonisolated var events: AsyncStream<PurchaseEvent> { eventBroadcast.subscribe() }
    /// The signed-in account's entitlements each time they change. Each access is its own subscription, starting
    /// with the current value when there is one.
    public nonisolated var entitlementUpdates: AsyncStream<Entitlements> { entitlementBroadcast.subscribe() }
    /// The signed-in account's entitlements as last answered (or served offline), if any.
    public var currentEntitlements: Entitlements? { latest }

    /// A client; call ``start()`` at launch before anything else. `accountId` is the account signed in at launch
    /// (or nil); the server client's token must be that account's.
    public init(store: any StoreAdapter, server: PurchaseServerClient, journal: any PurchaseJournal, accountId: String? = nil,
                retryDelays: [Duration] = [.seconds(2), .seconds(10), .seconds(30), .seconds(120), .seconds(600)],
                deviceIntegrity: DeviceIntegrity? = nil, offlineCache: (any EntitlementsCache)? = nil) {
        self.deviceIntegrity = deviceIntegrity
        self.store = store
        self.server = server
        self.journal = journal
        self.accountId = accountId
        self.offlineCache = offlineCache
        self.retryDelays = retryDelays.isEmpty ? [.seconds(30)] : retryDelays
    }

    // MARK: Launch

    /// Call at launch, before anything else: listens for transactions arriving outside a purchase (Ask to Buy
    /// approvals, interrupted purchases completed, renewals) — first, as Apple's guidance says, so that nothing
    /// arriving while the resume runs waits — then resumes unfinished work. Returns how many transactions were
    /// granted while it resumed.
    @discardableResult
    public func start() async -> Int {
        if listener == nil {
            let updates = store.updates()
            listener = Task { [weak self] in
                for await transaction in updates {
                    guard let self else { return }
                    // Each on its own task: one slow upload (a 20 s timeout) must not hold back an approval behind it.
                    Task { _ = await self.deliver(transaction, orderId: nil, accountId: nil) }
                }
            }
        }
        if promotedListener == nil {
            let intents = store.promotedPurchases()
            promotedListener = Task { [weak self] in
                for await productId in intents {
                    guard let self else { return }
                    _ = await self.handlePromotedPurchase(productId)
                }
            }
        }
        if retrier == nil {
            retrier = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard let self else { return }
                    await self.retryDue()
                }
            }
        }
        return await resume()
    }

    /// Stops listening and retrying (the journal keeps everything for the next start).
    public func stop() {
        listener?.cancel()
        retrier?.cancel()
        promotedListener?.cancel()
        listener = nil
        retrier = nil
        promotedListener = nil
    }

    /// Uploads every journaled transaction the signed-in account may upload and adopts every unfinished store
    /// transaction the journal lacks (a crash before the journal write, or an app deleted and reinstalled). Returns
    /// how many transactions were granted meanwhile (by this call, the listener or the retrier).
    public func resume() async -> Int {
        let mark = grantLog.count
        let entries: [JournalEntry]
        var readable = true
        do { entries = try journal.entries() } catch {
            // An unreadable journal is not an empty one: nothing is removed, and the store's queue is the list.
            readable = false
            entries = []
            eventBroadcast.send(.journalFailed(transactionId: nil, reason: "the journal cannot be read: \(error)"))
        }
        for entry in entries where entry.kind == .paid { _ = await upload(entry) }
        let journaled = Set(entries.filter { $0.kind == .paid }.compactMap(\.transactionId))
        for transaction in (try? await store.unfinished()) ?? [] where !journaled.contains(transaction.transactionId) {
            _ = await deliver(transaction, orderId: nil, accountId: nil)
        }
        if readable {
            // Intents whose payment never came (cancelled by a crash, declined by a parent) and promoted purchases
            // nobody took up are kept a week.
            for entry in entries where entry.kind != .paid && entry.createdAt < Date().addingTimeInterval(-7 * 86_400) {
                try? journal.remove(key: entry.key)
            }
        }
        return Set(grantLog[mark...]).count
    }

    // MARK: Accounts

    /// Signs `accountId` in (as RevenueCat's `logIn`): what the previous account saw is cleared, and its paid
    /// transactions stay journaled and unfinished — never uploaded under this account — until it signs in again.
    /// This account's waiting transactions are uploaded in the background.
    public func logIn(_ accountId: String) {
        guard accountId != self.accountId else { return }
        switchAccount(to: accountId)
        let previous = loginRetry
        loginRetry = Task {
            await previous?.value
            // The account's own payments are tried now, whatever backoff they had: while it was away they waited for
            // it (or were refused as another account's token), not for a server.
            await self.retryDue(owner: accountId)
        }
    }

    /// The upload a sign-in started in the background; kept so that a caller driving the client step by step (the
    /// history explorer) can wait for it.
    private var loginRetry: Task<Void, Never>?

    /// Waits for the work ``logIn(_:)`` started in the background.
    package func waitForBackgroundWork() async {
        await loginRetry?.value
    }

    /// Signs the account out: its entitlements are cleared from memory and from the streams; its paid transactions
    /// wait for it.
    public func logOut() {
        guard accountId != nil else { return }
        switchAccount(to: nil)
    }

    private func switchAccount(to account: String?) {
        accountId = account
        latest = nil
        waitingReported = []
        // Subscribers showing the previous account's entitlements are told they are gone; a late subscriber gets
        // nothing of the previous account.
        entitlementBroadcast.send(Entitlements(accountId: account ?? ""))
        eventBroadcast.send(.accountChanged(accountId: account))
    }

    // MARK: Products

    /// Products by id, cached after the first answer; ids the store does not sell are reported.
    public func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        let missing = productIds.filter { productCache[$0] == nil }
        var invalid: [String] = []
        if !missing.isEmpty {
            let answer = try await store.products(missing)
            for product in answer.products { productCache[product.productId] = product }
            invalid = answer.invalidProductIds
        }
        return (productIds.compactMap { productCache[$0] }, invalid)
    }

    /// Whether this device may pay (parental controls and device management can forbid it).
    public func canMakePayments() async -> Bool { await store.canMakePayments() }

    // MARK: Purchase

    /// Buys `productId`: order, payment, journal, upload, finish. A second call for a product whose purchase is
    /// still running joins it (one order, one payment sheet) and gets the same outcome.
    public func purchase(_ productId: String, quantity: Int = 1) async -> PurchaseOutcome {
        await purchase(productId, quantity: quantity, promotionalOffer: nil)
    }

    /// Buys `productId` redeeming what the app's server signs for it: promotional offer `promotionalOffer` (a
    /// retention or win-back offer set up in App Store Connect, signed only for a customer its rules allow), and, with
    /// `serverIntroductoryEligibility`, the server's judgement of the introductory offer (across the customer's Apple
    /// IDs) instead of StoreKit's. A refused signature fails the purchase before anything is ordered or charged.
    public func purchase(_ productId: String, quantity: Int = 1, promotionalOffer: String?, serverIntroductoryEligibility: Bool = false) async -> PurchaseOutcome {
        // A second tap joins the purchase under way only if it asks for the same: an offer must not ride on a full-price payment.
        // Nor may another account's tap, or a tap for another quantity, ride on a payment under way.
        let key = [accountId ?? "", productId, String(quantity), promotionalOffer ?? "", serverIntroductoryEligibility ? "intro" : ""].joined(separator: "\u{0}")
        return await joining(key) {
            await self.performPurchase(productId, quantity: quantity, promotionalOffer: promotionalOffer,
                                       serverIntroductoryEligibility: serverIntroductoryEligibility)
        }
    }

    /// Buys an Advanced Commerce API generic product: `signRequest` asks the app's own server to sign what is sold
    /// (SKUs, prices, period) for the order's `appAccountToken`, which the request must name (the App Store refuses a
    /// request whose token differs from the purchase's), and StoreKit charges what the request says. A request that
    /// cannot be signed fails the purchase before anything is charged, and leaves nothing in the journal. A second tap
    /// while one is under way for the same product joins it: one order, one payment.
    public func purchase(_ productId: String, advancedCommerce signRequest: @escaping @Sendable (_ appAccountToken: UUID) async throws -> String) async -> PurchaseOutcome {
        await joining(["advancedCommerce", accountId ?? "", productId].joined(separator: "\u{0}")) {
            await self.performPurchase(productId, quantity: 1, advancedCommerce: signRequest)
        }
    }

    /// Runs `purchase` unless one with the same key is under way, whose outcome is then the answer.
    /// The purchase leaves the table as it ends, not when its caller resumes: a tap in between is a new purchase.
    private func joining(_ key: String, _ purchase: @escaping @Sendable () async -> PurchaseOutcome) async -> PurchaseOutcome {
        if let running = purchasesInFlight[key] { return await running.task.value }
        let id = UUID()
        // Isolated to this actor, the task cannot start before the table holds it.
        let task = Task {
            let outcome = await purchase()
            self.purchaseEnded(key, id)
            return outcome
        }
        purchasesInFlight[key] = (id, task)
        return await task.value
    }

    private func purchaseEnded(_ key: String, _ id: UUID) {
        if purchasesInFlight[key]?.id == id { purchasesInFlight[key] = nil }
    }

    private func performPurchase(_ productId: String, quantity: Int, promotionalOffer: String? = nil,
                                 serverIntroductoryEligibility: Bool = false,
                                 advancedCommerce signRequest: (@Sendable (UUID) async throws -> String)? = nil) async -> PurchaseOutcome {
        guard await store.canMakePayments() else { return .failed(PurchaseFailure(.paymentsNotAllowed, "payments are not allowed on this device")) }
        // The account the order is for: a sign-in change during the payment must not move the payment.
        let owner = accountId
        var offers = SignedOffers()
        if promotionalOffer != nil || serverIntroductoryEligibility {
            do {
                offers = try await server.signOffers(productId: productId, promotionalOffer: promotionalOffer,
                                                     introductoryOfferEligibility: serverIntroductoryEligibility,
                                                     appTransaction: try? await store.appTransaction())
            } catch let failure as PurchaseFailure {
                return .failed(failure)
            } catch {
                return .failed(PurchaseFailure(.offerRefused, "\(error)"))
            }
            // Signed for the account signed in when asked: another one now would pay with the first one's offer.
            guard accountId == owner else { return .failed(PurchaseFailure(.offerRefused, "the account changed while the offer was being signed")) }
        }
        eventBroadcast.send(.creatingOrder(productId: productId))
        let order: PurchaseServerClient.Order
        // For the owner, checked by the server against the token it gets: the sign-in may change while the token is
        // fetched, and an order of the other account, paid and journaled as the owner's, would never be accepted.
        do { order = try await server.createOrder(productId: productId, expectedAccountId: owner) } catch let failure as PurchaseFailure {
            return .failed(failure)
        } catch {
            return .failed(PurchaseFailure(.orderFailed, "\(error)"))
        }
        let intent = JournalEntry(kind: .intent, orderId: order.orderId, productId: productId, appAccountToken: order.appAccountToken, accountId: owner)
        do { try journal.write(intent) } catch {
            return .failed(PurchaseFailure(.orderFailed, "the journal cannot be written, so no payment is started: \(error)"))
        }
        if let signRequest {
            do { offers.advancedCommerceJWS = try await signRequest(order.appAccountToken) } catch {
                try? journal.remove(key: intent.key)
                return .failed(PurchaseFailure(.offerRefused, "the app's server did not sign the Advanced Commerce request: \(error)"))
            }
            guard accountId == owner else {
                try? journal.remove(key: intent.key)
                return .failed(PurchaseFailure(.offerRefused, "the account changed while the request was being signed"))
            }
        }
        eventBroadcast.send(.awaitingPayment(orderId: order.orderId))
        let result: StorePurchaseResult
        do { result = try await store.purchase(productId, appAccountToken: order.appAccountToken, quantity: quantity, offers: offers) } catch {
            // No answer from the store: whether it charged is unknown. The intent stays, so a transaction arriving
            // later still finds its order.
            return .failed(PurchaseFailure(.storeFailed, "\(error)"))
        }
        switch result {
        case .purchased(let transaction):
            checkpointObserver?(.afterPayment)
            return await deliver(transaction, orderId: order.orderId, accountId: owner)
        case .pending:
            eventBroadcast.send(.pendingApproval(productId: productId))
            return .pendingApproval
        case .cancelled:
            try? journal.remove(key: intent.key)
            return .cancelled
        case .failed(let reason):
            try? journal.remove(key: intent.key)
            return .failed(PurchaseFailure(.storeFailed, reason))
        }
    }

    /// A purchase started on the App Store's product page. Held — in the journal, so a relaunch keeps it — until
    /// ``readyForPromotedPurchases()`` (e.g. after sign-in), then bought as any purchase.
    public func handlePromotedPurchase(_ productId: String) async -> PurchaseOutcome? {
        guard readyForPromoted else {
            if !promoted.contains(productId) { promoted.append(productId) }
            do { try journal.write(JournalEntry(kind: .promoted, orderId: nil, productId: productId, appAccountToken: nil, accountId: accountId)) } catch {
                eventBroadcast.send(.journalFailed(transactionId: nil, reason: "a promoted purchase of \(productId) is held in memory only: \(error)"))
            }
            return nil
        }
        return await purchase(productId)
    }

    /// The app can take promoted purchases now: the held ones (this launch's and earlier ones from the journal) run,
    /// in order.
    @discardableResult
    public func readyForPromotedPurchases() async -> [PurchaseOutcome] {
        readyForPromoted = true
        var held = promoted
        promoted = []
        for entry in (try? journal.entries()) ?? [] where entry.kind == .promoted && !held.contains(entry.productId) { held.append(entry.productId) }
        var outcomes: [PurchaseOutcome] = []
        for productId in held {
            outcomes.append(await purchase(productId))
            try? journal.remove(key: JournalEntry(kind: .promoted, orderId: nil, productId: productId, appAccountToken: nil).key)
        }
        return outcomes
    }

    // MARK: Restore and entitlements

    /// The store's restore for non-consumables and auto-renewables, sent to the server, which adds what the store
    /// cannot restore (non-renewing subscriptions). Unfinished work is resumed first.
    public func restore() async throws -> Entitlements {
        let asked = accountId
        _ = await resume()
        let restored = try await store.restore()
        checkpointObserver?(.duringRestore)
        let entitlements = try await server.restore(signedTransactions: restored.map(\.signedTransaction))
        try publish(entitlements, askedAs: asked)
        return entitlements
    }

    /// Sends the app receipt to the server: for purchases made with StoreKit 1 or before the app adopted this flow.
    /// Without a receipt on the device it sends the signed app transaction instead (no sign-in prompt). Returns what
    /// the account owns afterwards, or nil when the store has neither or the server is holding the receipt for Apple.
    ///
    /// A receipt names no app account (it carries no `appAccountToken`): a server without the App Store Server API binds
    /// what it does not hold yet to whoever sends it. So while this device holds another account's paid transaction not
    /// yet delivered, the receipt — which lists it — is not sent under this account: that account's payment would be
    /// granted here, then refused to it as another account's, and finished. The call throws `.accountMismatch` then.
    public func syncReceipt() async throws -> Entitlements? {
        let asked = accountId
        let submission: PurchaseServerClient.Submission
        if let receipt = try await store.receipt() {
            // The store's unfinished transactions go first, signed (they carry their tokens): what they settle no longer
            // waits, and the receipt is then judged against what is still undelivered.
            _ = await resume()
            if let waiting = try await otherAccountsPayment(than: asked) {
                throw PurchaseFailure(.accountMismatch, "the receipt lists transaction \(waiting.transactionId), paid by account \(waiting.accountId) and not delivered yet: it is synced once that account has it")
            }
            submission = try await server.submit(receipt: receipt, expectedAccountId: asked)
        } else if let appTransaction = try await store.appTransaction() {
            // No receipt on the device: the signed app transaction instead, never a store refresh (it prompts for a
            // sign-in; Apple asks for that only behind the user's button).
            submission = try await server.submit(appTransaction: appTransaction)
        } else {
            return nil
        }
        switch submission {
        case .granted(let entitlements), .deliveredToOwner(let entitlements):
            try publish(entitlements, askedAs: asked)
            return entitlements
        case .held:
            return nil
        case .rejected(let code, let message, _):
            throw PurchaseFailure(.rejectedByServer, "\(code): \(message)")
        }
    }

    /// A paid transaction of another account than `account` that this device holds undelivered, if any: one still in
    /// the store's unfinished queue (nothing finishes one before it is settled) that this process has not settled, whose
    /// journal entry — or, after a crash before that was written, the intent its token matches — names another account,
    /// or that nothing here names the payer of while its token names an order.
    /// A journal that cannot be read may name one: each such transaction counts then. A store that cannot list its queue
    /// is answered with its error (the receipt is not sent on a guess).
    private func otherAccountsPayment(than account: String?) async throws -> (transactionId: String, accountId: String)? {
        let unfinished = try await store.unfinished()
        let entries = try? journal.entries()
        for transaction in unfinished where settled[transaction.transactionId] == nil {
            let id = transaction.transactionId
            guard let entries else { return (id, "unknown (the journal cannot be read)") }
            let paid = entries.first { $0.key == "paid-" + id } ?? unjournaled[id]
            let intent = Self.intent(for: transaction, in: entries)
            if let owner = paid?.accountId ?? intent?.accountId, owner != account { return (id, owner) }
            // Nothing on this device names its payer (a reinstall, another device's order), but its token names an order:
            // whose is for the server to say, once its signed upload goes through.
            if paid?.accountId == nil, intent?.accountId == nil, transaction.appAccountToken != nil {
                return (id, "the account whose order its token names (not delivered yet)")
            }
        }
        return nil
    }

    /// The journal's intent written before the payment `transaction` carries the token of, if any.
    private static func intent(for transaction: StoreTransaction, in entries: [JournalEntry]) -> JournalEntry? {
        entries.first { $0.kind == .intent && $0.appAccountToken != nil && $0.appAccountToken == transaction.appAccountToken }
    }

    /// What the server says the signed-in account owns now; while the server is unreachable, the offline copy
    /// (``offlineEntitlements()``, marked with `cachedAt`). An answer whose signature does not verify is never
    /// replaced by the offline copy: it is refused.
    public func entitlements() async throws -> Entitlements {
        let asked = accountId
        do {
            let entitlements = try await server.entitlements()
            try publish(entitlements, askedAs: asked)
            return entitlements
        } catch let unreachable as PurchaseServerClient.Unreachable {
            guard let offline = await offlineEntitlements(), accountId == asked else { throw unreachable }
            latest = offline
            entitlementBroadcast.send(offline)
            return offline
        }
    }

    /// The last entitlements the server granted the signed-in account, kept on the device, without what has expired
    /// since and without consumable balances; what the store itself says the customer owns now (StoreKit's
    /// `Transaction.currentEntitlements`) extends them to renewals made since. Nil when nothing was ever answered.
    public func offlineEntitlements() async -> Entitlements? {
        guard let account = accountId ?? latest?.accountId else { return nil }
        var base = latest.flatMap { $0.accountId == account ? $0 : nil }
        if base == nil || base?.cachedAt != nil, let stored = try? offlineCache?.load(accountId: account) { base = stored }
        guard let base else { return nil }
        let now = Date()
        var result = base.offline(at: now, cachedAt: base.cachedAt ?? now)
        // Only renewals of a series this account holds, by series and token, never by product: the store's entitlements
        // are the whole Apple ID's, and on a shared device another account of the app may have bought the same
        // subscription on it (the same series, Apple keeps one per group, but through its own order's token).
        var series: [String: Entitlements.Item] = [:]
        for item in base.entitlements { if let original = item.originalTransactionId { series[original] = item } }
        for transaction in (try? await store.currentEntitlements()) ?? []
        where transaction.revocationDate == nil && (transaction.expiresDate ?? .distantFuture) > now {
            // And only of the product the server granted: a downgrade (same series, same token) renews into a product
            // whose entitlement the device cannot name, and must not carry the old tier's.
            guard let original = transaction.originalTransactionId, let item = series[original], transaction.appAccountToken == item.appAccountToken,
                  transaction.productId == item.productId, !result.has(item.name) else { continue }
            result.entitlements.append(.init(name: item.name, productId: transaction.productId, transactionId: transaction.transactionId,
                                             originalTransactionId: original, appAccountToken: item.appAccountToken,
                                             expiresAt: transaction.expiresDate, state: "active"))
        }
        return result
    }

    // MARK: Delivery

    /// Journals a paid transaction (first), then uploads it. `accountId` is the account that ordered it when known
    /// (a purchase), else the journal's intent for its token says it, else it is unknown.
    package func deliver(_ transaction: StoreTransaction, orderId: String?, accountId owner: String?) async -> PurchaseOutcome {
        let id = transaction.transactionId
        if let result = settled[id] {
            // The store handed over again a transaction this process settled but could not finish: finish it now.
            if unfinishedSettled[id] != nil { await finish(transaction) }
            return outcome(result, id, askedAs: accountId)
        }
        var entries: [JournalEntry] = []
        var unreadable: (any Error)?
        do { entries = try journal.entries() } catch {
            unreadable = error
            eventBroadcast.send(.journalFailed(transactionId: id, reason: "the journal cannot be read: \(error)"))
        }
        if let existing = entries.first(where: { $0.key == "paid-" + id }) ?? unjournaled[id] {
            // A copy arriving again (the updates stream, a relaunch's adoption) waits for its backoff like any retry.
            guard isDue(existing, at: Date()) else { return .paidPendingDelivery(transactionId: id) }
            return outcome(await upload(existing), id)
        }
        // The order id comes from this call or the journal's intent for the payment's token — never from the token alone.
        let intent = Self.intent(for: transaction, in: entries)
        let entry = JournalEntry(kind: .paid, orderId: orderId ?? intent?.orderId, productId: transaction.productId,
                                 appAccountToken: transaction.appAccountToken, transactionId: id,
                                 signedTransaction: transaction.signedTransaction, accountId: owner ?? intent?.accountId)
        do {
            // A journal that cannot be read may hold this payment's entry, with the account that paid: an entry
            // written without seeing it would overwrite that account with whatever this call knows.
            if let unreadable { throw unreadable }
            try journal.write(entry)
        } catch {
            // The payment is still safe in the store's unfinished queue (nothing finishes it before a grant). Keep it
            // in memory, upload it now, and let the retrier carry it while the journal refuses.
            unjournaled[id] = entry
            eventBroadcast.send(.journalFailed(transactionId: id, reason: "\(error)"))
            let result = await upload(entry)
            switch result {
            case .granted, .deliveredToOwner, .rejected: return outcome(result, id)
            case .delayed(let reason), .pending(let reason), .waiting(let reason):
                return .paidNotJournaled(transactionId: id, reason: "the journal cannot be written (\(error)); \(reason)")
            }
        }
        eventBroadcast.send(.journaled(transactionId: id))
        checkpointObserver?(.afterJournal)
        if let intent { try? journal.remove(key: intent.key) }
        return outcome(await upload(entry), id)
    }

    /// `askedAs`: for a transaction this process settled earlier, the account asking now. StoreKit answers a purchase of
    /// what the Apple ID already owns with the transaction that bought it: granted to another account of the app, it
    /// is that account's (delivered to its owner), not a grant to show here.
    private func outcome(_ result: UploadResult, _ transactionId: String, askedAs asking: String? = nil) -> PurchaseOutcome {
        switch result {
        case .granted(let entitlements) where asking != nil && entitlements.accountId != asking: .deliveredToOwner(transactionId: transactionId)
        case .granted(let entitlements): .granted(entitlements)
        case .deliveredToOwner: .deliveredToOwner(transactionId: transactionId)
        case .rejected(let reason): .failed(PurchaseFailure(.rejectedByServer, reason))
        case .delayed(let reason): .paidDeliveryDelayed(transactionId: transactionId, reason: reason)
        case .pending, .waiting: .paidPendingDelivery(transactionId: transactionId)
        }
    }

    /// Points in the flow where an app can die, for crash tests: an observer set with
    /// ``setCheckpointObserver(_:)`` is called at each (a test kills the process there).
    public enum Checkpoint: String, Sendable, CaseIterable {
        /// The store charged; nothing is journaled yet.
        case afterPayment
        /// The paid transaction is journaled; nothing is uploaded yet.
        case afterJournal
        /// The server answered the upload; the app has not read the answer.
        case duringUpload
        /// The server granted it and the journal entry is gone; the transaction is not finished.
        case afterGrant
        /// The store restored; the server has not been told.
        case duringRestore
    }

    private var checkpointObserver: (@Sendable (Checkpoint) -> Void)?

    /// Calls `observer` at each ``Checkpoint``. For crash tests only.
    public func setCheckpointObserver(_ observer: (@Sendable (Checkpoint) -> Void)?) { checkpointObserver = observer }

    /// Uploads one paid transaction, once at a time. A transaction already settled is not uploaded again (its
    /// journal entry, if a failed remove left it, is removed); another account's waits for that account.
    func upload(_ entry: JournalEntry) async -> UploadResult {
        guard let transactionId = entry.transactionId else { return .pending("the entry has no transaction id") }
        if let result = settled[transactionId] {
            try? journal.remove(key: entry.key)
            return result
        }
        if let owner = entry.accountId, owner != accountId {
            if waitingReported.insert(transactionId).inserted {
                eventBroadcast.send(.waitingForAccount(transactionId: transactionId, accountId: owner))
            }
            return .waiting("paid by account \(owner), which is not signed in")
        }
        if let running = inFlight[transactionId] { return await running.value }
        let task = Task { await self.performUpload(entry) }
        inFlight[transactionId] = task
        let result = await task.value
        inFlight[transactionId] = nil
        return result
    }

    /// One upload and what follows from the answer: granted or delivered to its owner → the entry leaves the journal
    /// and the transaction is finished; refused as `final` → the same, reported; refused as `operator` → kept,
    /// reported ("paid — we will deliver it"), retried with backoff; anything else → retried with backoff.
    private func performUpload(_ given: JournalEntry, current: Bool = false) async -> UploadResult {
        // The journal's copy is the current one (attempts), unless the caller holds a newer one: the order id dropped
        // after an order refusal is not in the journal when writing it failed (a full disk), and reading the journal
        // again would send the order id again, forever.
        let entry = current ? given : ((try? journal.entries()) ?? []).first { $0.key == given.key } ?? given
        guard let transactionId = entry.transactionId, let signed = entry.signedTransaction else { return .pending("the entry has no proof") }
        // Checked again here (a sign-in may have run since ``upload(_:)`` looked), and the server is told whose it is:
        // the token is fetched later still, and a token of another account is then refused, not granted.
        let asked = accountId
        if let owner = entry.accountId, owner != asked { return .waiting("paid by account \(owner), which is not signed in") }
        eventBroadcast.send(.uploading(transactionId: transactionId, attempt: max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1))
        let answer: PurchaseServerClient.Submission
        do {
            // A transaction no entry names the payer of (bought elsewhere, an offer code, Ask to Buy approved later)
            // is the signed-in account's: named too, so a sign-in change before the token is fetched is refused.
            answer = try await server.submit(signedTransaction: signed, orderId: entry.orderId, deviceIntegrity: deviceIntegrity,
                                             expectedAccountId: entry.accountId ?? asked)
        } catch {
            reschedule(entry, reason: "\(error)")
            eventBroadcast.send(.uploadFailed(transactionId: transactionId, reason: "\(error)"))
            return .pending("\(error)")
        }
        checkpointObserver?(.duringUpload)
        switch answer {
        case .granted(let entitlements):
            settle(entry, .granted(entitlements))
            grantLog.append(transactionId)
            checkpointObserver?(.afterGrant)
            eventBroadcast.send(.granted(transactionId: transactionId))
            try? publish(entitlements, askedAs: asked)
            await finish(entry)
            return .granted(entitlements)
        case .deliveredToOwner(let entitlements):
            settle(entry, .deliveredToOwner)
            eventBroadcast.send(.deliveredToOwner(transactionId: transactionId))
            try? publish(entitlements, askedAs: asked)
            await finish(entry)
            return .deliveredToOwner
        case .held:
            reschedule(entry, reason: "the server is waiting for Apple")
            return .pending("the server is waiting for Apple")
        case .rejected("account_mismatch", _, _):
            // The app's token is another account's than the one that paid: it waits for that account, quietly, with
            // backoff (an app whose token source never matches its sign-in must not upload every second).
            reschedule(entry, reason: "account_mismatch")
            return .waiting("paid by account \(entry.accountId ?? "?"), the token is another account's")
        case .rejected(let code, _, _) where Self.orderCodes.contains(code) && entry.orderId != nil:
            // The order is the server's bookkeeping, the transaction is the proof: without the order id the server
            // binds by the transaction's token and account.
            var withoutOrder = entry
            withoutOrder.orderId = nil
            if unjournaled[transactionId] != nil { unjournaled[transactionId] = withoutOrder } else { try? journal.write(withoutOrder) }
            return await performUpload(withoutOrder, current: true)
        case .rejected(let code, let message, .final):
            let reason = "\(code): \(message)"
            settle(entry, .rejected(reason))
            eventBroadcast.send(.rejected(transactionId: transactionId, reason: reason))
            await finish(entry)
            return .rejected(reason)
        case .rejected(let code, let message, .retry):
            reschedule(entry, reason: "\(code): \(message)")
            eventBroadcast.send(.uploadFailed(transactionId: transactionId, reason: "\(code): \(message)"))
            return .pending("\(code): \(message)")
        case .rejected(let code, let message, _):
            // Fixable by the server's operator (configuration, policy): the payment is kept and retried; the app can say
            // "paid — we will deliver it".
            let reason = "\(code): \(message)"
            reschedule(entry, reason: reason)
            eventBroadcast.send(.deliveryDelayed(transactionId: transactionId, reason: reason))
            return .delayed(reason)
        }
    }

    /// Refusals about the order, not the payment, that the proof alone can overcome. `order_account_mismatch` too: the
    /// upload names its account (`account_mismatch` answers a token of another), so this one says the order is another
    /// account's than the entry's — made while the sign-in changed, by a version without the order's account check —
    /// and it always will be. Without the order id the server binds by the payment's `appAccountToken`, to the account
    /// whose order the payment carries (`deliveredToOwner`), and the device can finish.
    static let orderCodes: Set<String> = ["order_not_found", "order_product_mismatch", "order_account_mismatch"]

    private func settle(_ entry: JournalEntry, _ result: UploadResult) {
        guard let transactionId = entry.transactionId else { return }
        settled[transactionId] = result
        backoff[transactionId] = nil
        unjournaled[transactionId] = nil
        do { try journal.remove(key: entry.key) } catch {
            // The entry stays; `settled` keeps this process from uploading it again, and the retrier removes it later.
            eventBroadcast.send(.journalFailed(transactionId: transactionId, reason: "cannot remove the delivered entry: \(error)"))
        }
    }

    private func finish(_ entry: JournalEntry) async {
        guard let signed = entry.signedTransaction, let transaction = try? StoreTransaction(signedTransaction: signed) else { return }
        await finish(transaction)
    }

    /// Finishes a settled transaction. A failed finish leaves it in the store's queue (a relaunch would adopt it and
    /// hear that it is already granted); this process tries again with backoff (``retryDue(owner:)``), and at once when
    /// the store hands it over again.
    private func finish(_ transaction: StoreTransaction) async {
        let id = transaction.transactionId
        guard finishing.insert(id).inserted else { return }
        defer { finishing.remove(id) }
        do {
            try await store.finish(transaction)
            unfinishedSettled[id] = nil
            eventBroadcast.send(.finished(transactionId: id))
        } catch {
            let attempts = (unfinishedSettled[id]?.attempts ?? 0) + 1
            unfinishedSettled[id] = (transaction, attempts, Date().addingTimeInterval(seconds(retryDelays[min(attempts, retryDelays.count) - 1])))
            eventBroadcast.send(.finishFailed(transactionId: id, reason: "\(error)"))
        }
    }

    private func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func reschedule(_ entry: JournalEntry, reason: String) {
        guard let transactionId = entry.transactionId, settled[transactionId] == nil else { return }
        let attempts = max(entry.attempts, backoff[transactionId]?.attempts ?? 0) + 1
        let next = Date().addingTimeInterval(seconds(retryDelays[min(attempts, retryDelays.count) - 1]))
        backoff[transactionId] = (attempts, next)
        var updated = entry
        updated.attempts = attempts
        updated.lastError = reason
        updated.nextAttemptAt = next
        if unjournaled[transactionId] != nil {
            unjournaled[transactionId] = updated
            // The journal may have recovered: then the entry survives a relaunch again. A copy of its own, written
            // when the payment's account and order were known, is kept over this one (which may know neither).
            guard let entries = try? journal.entries() else { return }
            if entries.contains(where: { $0.key == updated.key }) || (try? journal.write(updated)) != nil { unjournaled[transactionId] = nil }
            return
        }
        // Only an entry still in the journal is written back: a retry working from an older read must not bring
        // back an entry another task delivered and removed meanwhile.
        guard ((try? journal.entries()) ?? []).contains(where: { $0.key == entry.key }) else { return }
        try? journal.write(updated)
    }

    /// Whether an entry's next attempt is due: the later of the journal's and the memory's backoff.
    private func isDue(_ entry: JournalEntry, at now: Date) -> Bool {
        guard let transactionId = entry.transactionId else { return false }
        let next = [entry.nextAttemptAt, backoff[transactionId]?.next].compactMap { $0 }.max()
        return (next ?? now) <= now
    }

    /// Uploads the paid transactions whose next attempt is due: the journal's, those the journal refused, and — when
    /// the journal cannot be read — the store's unfinished queue.
    package func retryDue(owner: String? = nil) async {
        let now = Date()
        // Read again before each: a finish awaited here lets another task finish (and forget) the next one meanwhile.
        for id in Array(unfinishedSettled.keys) {
            guard let pending = unfinishedSettled[id], pending.next <= now else { continue }
            await finish(pending.transaction)
        }
        func due(_ entry: JournalEntry) -> Bool { (owner != nil && entry.accountId == owner) || isDue(entry, at: now) }
        let entries: [JournalEntry]
        do { entries = try journal.entries() } catch {
            for transaction in (try? await store.unfinished()) ?? [] where settled[transaction.transactionId] == nil {
                if let next = backoff[transaction.transactionId]?.next, next > now { continue }
                _ = await deliver(transaction, orderId: nil, accountId: nil)
            }
            return
        }
        var seen: Set<String> = []
        for entry in entries where entry.kind == .paid {
            guard let transactionId = entry.transactionId else { continue }
            seen.insert(transactionId)
            if settled[transactionId] != nil {
                try? journal.remove(key: entry.key)
            } else if due(entry) {
                _ = await upload(entry)
            }
        }
        for entry in unjournaled.values where !seen.contains(entry.transactionId ?? "") && due(entry) {
            _ = await upload(entry)
        }
    }

    /// Shows `entitlements` when they are the signed-in account's, and keeps them for offline use. `asked` is who was
    /// signed in when the call began: an answer that arrives after a sign-out or a switch is nobody's to show.
    private func publish(_ entitlements: Entitlements, askedAs asked: String?) throws {
        guard accountId == asked else {
            throw PurchaseFailure(.accountMismatch, "the sign-in changed while the server answered for \(entitlements.accountId)")
        }
        if let accountId, entitlements.accountId != accountId {
            throw PurchaseFailure(.accountMismatch, "the server answered for account \(entitlements.accountId), not the signed-in \(accountId)")
        }
        latest = entitlements
        var offline = entitlements
        offline.balances = [:]
        offline.cachedAt = Date()
        try? offlineCache?.save(offline)
        entitlementBroadcast.send(entitlements)
    }
}
