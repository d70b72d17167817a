import Foundation

/// The app side of the purchase flow, in the style of StoreKit 2.
///
/// `purchase(_:)` runs the whole way: an order from the app's server, the payment with the order's
/// `appAccountToken`, the paid transaction written to the journal before anything else, the upload, and `finish`
/// only once the server has granted it. Whatever interrupts that — a crash, a lost network, the server or Apple
/// down — the journal and the store's unfinished queue carry the purchase to the next attempt or the next launch:
/// call ``start()`` at launch.
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

    private var productCache: [String: StoreProduct] = [:]
    private var listener: Task<Void, Never>?
    private var retrier: Task<Void, Never>?
    private var promotedListener: Task<Void, Never>?
    /// Uploads in flight, by transaction id: a second caller waits for the first instead of racing it.
    private var inFlight: [String: Task<Bool, Never>] = [:]
    /// Transactions this client saw granted (or refused for good): a late copy from the updates stream is ignored.
    private var done: Set<String> = []
    private var promoted: [String] = []
    private var readyForPromoted = false
    private var latest: Entitlements?

    private let eventStream: (stream: AsyncStream<PurchaseEvent>, continuation: AsyncStream<PurchaseEvent>.Continuation)
    private let entitlementStream: (stream: AsyncStream<Entitlements>, continuation: AsyncStream<Entitlements>.Continuation)

    /// Progress of purchases, uploads and deliveries.
    public nonisolated var events: AsyncStream<PurchaseEvent> { eventStream.stream }
    /// The account's entitlements each time the server answers them.
    public nonisolated var entitlementUpdates: AsyncStream<Entitlements> { entitlementStream.stream }

    /// A client; call ``start()`` at launch before anything else.
    public init(store: any StoreAdapter, server: PurchaseServerClient, journal: any PurchaseJournal,
                retryDelays: [Duration] = [.seconds(2), .seconds(10), .seconds(30), .seconds(120), .seconds(600)],
                deviceIntegrity: DeviceIntegrity? = nil) {
        self.deviceIntegrity = deviceIntegrity
        self.store = store
        self.server = server
        self.journal = journal
        self.retryDelays = retryDelays.isEmpty ? [.seconds(30)] : retryDelays
        eventStream = AsyncStream.makeStream(of: PurchaseEvent.self, bufferingPolicy: .bufferingNewest(256))
        entitlementStream = AsyncStream.makeStream(of: Entitlements.self, bufferingPolicy: .bufferingNewest(8))
    }

    // MARK: Launch

    /// Call at launch, before anything else: listens for transactions arriving outside a purchase (Ask to Buy
    /// approvals, interrupted purchases completed, renewals) and resumes unfinished work. Returns what was resumed.
    @discardableResult
    public func start() async -> Int {
        let resumed = await resume()
        if listener == nil {
            let updates = store.updates()
            listener = Task { [weak self] in
                for await transaction in updates {
                    guard let self else { return }
                    _ = await self.deliver(transaction, orderId: nil)
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
        return resumed
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

    /// Uploads every journaled transaction and adopts every unfinished store transaction the journal lacks (a
    /// crash before the journal write, or an app deleted and reinstalled). Returns how many were delivered.
    public func resume() async -> Int {
        var delivered = 0
        let entries = (try? journal.entries()) ?? []
        for entry in entries where entry.kind == .paid {
            if await upload(entry) { delivered += 1 }
        }
        for transaction in (try? await store.unfinished()) ?? [] where !entries.contains(where: { $0.transactionId == transaction.transactionId && $0.kind == .paid }) {
            if case .granted = await deliver(transaction, orderId: nil) { delivered += 1 }
        }
        // Intents whose payment never came (cancelled by a crash, declined by a parent) are kept a week.
        for entry in entries where entry.kind == .intent && entry.createdAt < Date().addingTimeInterval(-7 * 86_400) {
            try? journal.remove(key: entry.key)
        }
        return delivered
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

    /// Buys `productId`: order, payment, journal, upload, finish.
    public func purchase(_ productId: String, quantity: Int = 1) async -> PurchaseOutcome {
        guard await store.canMakePayments() else { return .failed(PurchaseFailure(.paymentsNotAllowed, "payments are not allowed on this device")) }
        eventStream.continuation.yield(.creatingOrder(productId: productId))
        let order: PurchaseServerClient.Order
        do { order = try await server.createOrder(productId: productId) } catch let failure as PurchaseFailure {
            return .failed(failure)
        } catch {
            return .failed(PurchaseFailure(.orderFailed, "\(error)"))
        }
        let intent = JournalEntry(kind: .intent, orderId: order.orderId, productId: productId, appAccountToken: order.appAccountToken)
        do { try journal.write(intent) } catch {
            return .failed(PurchaseFailure(.orderFailed, "the journal cannot be written, so no payment is started: \(error)"))
        }
        eventStream.continuation.yield(.awaitingPayment(orderId: order.orderId))
        let result: StorePurchaseResult
        do { result = try await store.purchase(productId, appAccountToken: order.appAccountToken, quantity: quantity) } catch {
            // No answer from the store: whether it charged is unknown. The intent stays, so a transaction arriving
            // later still finds its order.
            return .failed(PurchaseFailure(.storeFailed, "\(error)"))
        }
        switch result {
        case .purchased(let transaction):
            checkpointObserver?(.afterPayment)
            return await deliver(transaction, orderId: order.orderId)
        case .pending:
            eventStream.continuation.yield(.pendingApproval(productId: productId))
            return .pendingApproval
        case .cancelled:
            try? journal.remove(key: intent.key)
            return .cancelled
        case .failed(let reason):
            try? journal.remove(key: intent.key)
            return .failed(PurchaseFailure(.storeFailed, reason))
        }
    }

    /// A purchase started on the App Store's product page. Held until ``readyForPromotedPurchases()`` (e.g. after
    /// sign-in), then bought as any purchase.
    public func handlePromotedPurchase(_ productId: String) async -> PurchaseOutcome? {
        guard readyForPromoted else {
            promoted.append(productId)
            return nil
        }
        return await purchase(productId)
    }

    /// The app can take promoted purchases now: the held ones run, in order.
    @discardableResult
    public func readyForPromotedPurchases() async -> [PurchaseOutcome] {
        readyForPromoted = true
        let held = promoted
        promoted = []
        var outcomes: [PurchaseOutcome] = []
        for productId in held { outcomes.append(await purchase(productId)) }
        return outcomes
    }

    // MARK: Restore and entitlements

    /// The store's restore for non-consumables and auto-renewables, sent to the server, which adds what the store
    /// cannot restore (non-renewing subscriptions). Unfinished work is resumed first.
    public func restore() async throws -> Entitlements {
        _ = await resume()
        let restored = try await store.restore()
        checkpointObserver?(.duringRestore)
        let entitlements = try await server.restore(signedTransactions: restored.map(\.signedTransaction))
        publish(entitlements)
        return entitlements
    }

    /// Sends the app receipt — refreshed from the store when missing — to the server: for purchases made with
    /// StoreKit 1 or before the app adopted this flow. Returns what the account owns afterwards, or nil when the
    /// store has no receipt or the server is holding it for Apple.
    public func syncReceipt() async throws -> Entitlements? {
        guard let receipt = try await store.receipt() else { return nil }
        switch try await server.submit(receipt: receipt) {
        case .granted(let entitlements):
            publish(entitlements)
            return entitlements
        case .held:
            return nil
        case .rejected(let code, let message):
            throw PurchaseFailure(.rejectedByServer, "\(code): \(message)")
        }
    }

    /// What the server says the account owns now.
    public func entitlements() async throws -> Entitlements {
        let entitlements = try await server.entitlements()
        publish(entitlements)
        return entitlements
    }

    // MARK: Delivery

    /// Journals a paid transaction (first), then uploads it.
    func deliver(_ transaction: StoreTransaction, orderId: String?) async -> PurchaseOutcome {
        if done.contains(transaction.transactionId) {
            if let rejected = rejections[transaction.transactionId] { return .failed(PurchaseFailure(.rejectedByServer, rejected)) }
            return latest.map(PurchaseOutcome.granted) ?? .paidPendingDelivery(transactionId: transaction.transactionId)
        }
        let entries = (try? journal.entries()) ?? []
        let paidKey = "paid-" + transaction.transactionId
        if let existing = entries.first(where: { $0.key == paidKey }) {
            return await upload(existing) ? (latest.map(PurchaseOutcome.granted) ?? .paidPendingDelivery(transactionId: transaction.transactionId))
                : .paidPendingDelivery(transactionId: transaction.transactionId)
        }
        // The order id comes from this call or the journal's intent for the payment's token — never from the token alone.
        let intent = entries.first { $0.kind == .intent && $0.appAccountToken != nil && $0.appAccountToken == transaction.appAccountToken }
        let entry = JournalEntry(kind: .paid, orderId: orderId ?? intent?.orderId, productId: transaction.productId,
                                 appAccountToken: transaction.appAccountToken, transactionId: transaction.transactionId,
                                 signedTransaction: transaction.signedTransaction)
        do { try journal.write(entry) } catch {
            // Not journaled: the transaction stays unfinished in the store and is adopted at the next launch.
            return .paidPendingDelivery(transactionId: transaction.transactionId)
        }
        eventStream.continuation.yield(.journaled(transactionId: transaction.transactionId))
        checkpointObserver?(.afterJournal)
        if let intent { try? journal.remove(key: intent.key) }
        if await upload(entry), let latest { return .granted(latest) }
        if let rejected = rejections[transaction.transactionId] {
            return .failed(PurchaseFailure(.rejectedByServer, rejected))
        }
        return .paidPendingDelivery(transactionId: transaction.transactionId)
    }

    private var rejections: [String: String] = [:]

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

    /// Uploads one journaled transaction. Granted → the entry leaves the journal and the transaction is finished.
    /// Refused for good → the same, reported. Anything else → the next attempt is scheduled. Returns whether granted.
    func upload(_ entry: JournalEntry) async -> Bool {
        guard let transactionId = entry.transactionId else { return false }
        if let running = inFlight[transactionId] { return await running.value }
        let task = Task { await self.performUpload(entry) }
        inFlight[transactionId] = task
        let granted = await task.value
        inFlight[transactionId] = nil
        return granted
    }

    private func performUpload(_ entry: JournalEntry) async -> Bool {
        guard let transactionId = entry.transactionId, let signed = entry.signedTransaction else { return false }
        eventStream.continuation.yield(.uploading(transactionId: transactionId, attempt: entry.attempts + 1))
        let transaction = try? StoreTransaction(signedTransaction: signed)
        do {
            let answer = try await server.submit(signedTransaction: signed, orderId: entry.orderId, deviceIntegrity: deviceIntegrity)
            checkpointObserver?(.duringUpload)
            switch answer {
            case .granted(let entitlements):
                try? journal.remove(key: entry.key)
                done.insert(transactionId)
                checkpointObserver?(.afterGrant)
                eventStream.continuation.yield(.granted(transactionId: transactionId))
                publish(entitlements)
                if let transaction, (try? await store.finish(transaction)) != nil {
                    eventStream.continuation.yield(.finished(transactionId: transactionId))
                }
                return true
            case .held:
                reschedule(entry, reason: "the server is waiting for Apple")
                return false
            case .rejected(let code, _) where Self.orderCodes.contains(code) && entry.orderId != nil:
                // The order is the server's bookkeeping, the transaction is the proof: without the order id the
                // server binds by the transaction's token and account.
                var withoutOrder = entry
                withoutOrder.orderId = nil
                try? journal.write(withoutOrder)
                return await performUpload(withoutOrder)
            case .rejected(let code, let message) where !Self.permanentCodes.contains(code):
                // Refused for a reason the server's operator can fix (its catalog, its trusted roots): keep it.
                reschedule(entry, reason: "\(code): \(message)")
                return false
            case .rejected(let code, let message):
                try? journal.remove(key: entry.key)
                done.insert(transactionId)
                rejections[transactionId] = "\(code): \(message)"
                eventStream.continuation.yield(.rejected(transactionId: transactionId, reason: "\(code): \(message)"))
                if let transaction { try? await store.finish(transaction) }
                return false
            }
        } catch {
            reschedule(entry, reason: "\(error)")
            eventStream.continuation.yield(.uploadFailed(transactionId: transactionId, reason: "\(error)"))
            return false
        }
    }

    /// Refusals about the order, not the payment.
    static let orderCodes: Set<String> = ["order_not_found", "order_account_mismatch", "order_product_mismatch"]
    /// Refusals no retry can change: the transaction is another account's, or the proof itself is bad. Anything else
    /// (an unknown product, an untrusted root, a storage error) may be fixed on the server, so the entry stays.
    static let permanentCodes: Set<String> = ["transaction_bound_elsewhere", "bad_signature", "malformed", "too_large", "wrong_bundle",
                                              "wrong_app_apple_id", "test_environment_not_allowed", "device_integrity"]

    private func reschedule(_ entry: JournalEntry, reason: String) {
        var next = entry
        next.attempts += 1
        next.lastError = reason
        let delay = retryDelays[min(next.attempts, retryDelays.count) - 1]
        next.nextAttemptAt = Date().addingTimeInterval(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
        try? journal.write(next)
    }

    /// Uploads the journaled transactions whose next attempt is due.
    func retryDue() async {
        let now = Date()
        for entry in (try? journal.entries()) ?? [] where entry.kind == .paid && (entry.nextAttemptAt ?? now) <= now {
            _ = await upload(entry)
        }
    }

    private func publish(_ entitlements: Entitlements) {
        latest = entitlements
        entitlementStream.continuation.yield(entitlements)
    }
}
