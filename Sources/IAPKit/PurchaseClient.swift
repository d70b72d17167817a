import Foundation

/// The app side of the purchase flow, in the style of StoreKit 2.
///
/// `purchase(_:)` runs the whole way: an order from the app's server, the payment with the order's
/// `appAccountToken`, the paid transaction written to the journal before anything else, the upload, and `finish`
/// only once the server has granted it to its owner (or refused it as `final`). Whatever interrupts that — a crash,
/// a lost network, the server or Apple down, a server misconfigured, a journal that cannot be written, another
/// account signing in — the journal and the store's unfinished queue carry the purchase to the next attempt or the
/// next launch: call ``start()`` at launch, and ``logIn(_:token:)`` / ``logOut()`` when the app's user changes.
///
/// What it throws is always a ``PurchaseFailure``; what it reports while it works comes through ``events``, and what
/// the signed-in account owns through ``entitlementUpdates``.
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
    /// How long after the server issued it an answer may still be served offline; nil for as long as its items last.
    public let offlineMaxAge: TimeInterval?

    /// Who is signed in and what of theirs may be shown (``AccountSession``).
    var session: AccountSession
    /// The account signed in (the app's user id, as the server's tokens name it); nil when none.
    public var accountId: String? { session.accountId }

    /// Where the SDK's debug lines go (off unless asked).
    public nonisolated let log: PurchaseLog

    /// How one upload ended.
    enum UploadResult: Sendable, Hashable {
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

    // The state below is internal, not private, where the extensions in PurchaseClient+*.swift use it.
    var productCache: [String: StoreProduct] = [:]
    private var listener: Task<Void, Never>?
    private var retrier: Task<Void, Never>?
    /// The delivery queue's sleep: until the earliest backoff ends, or until something changes what is due (a payment
    /// rescheduled, a finish refused, a sign-in).
    private var sleeper: CheckedContinuation<Void, Never>?
    private var alarm: Task<Void, Never>?
    private var wokenEarly = false
    /// Settled transactions whose journal entry could not be removed: the queue tries again after the first retry delay.
    var pendingRemovals: Set<String> = []
    /// How many times ``retryDue(owner:)`` looked at what is due (the tests see the queue idle).
    package var deliveryQueueLooks = 0

    /// The queue's last look could not read the journal: it looks again after the first retry delay.
    var journalUnreadable = false

    private var promotedListener: Task<Void, Never>?
    /// Uploads in flight, by transaction id: a second caller waits for the first instead of racing it.
    var inFlight: [String: Task<UploadResult, Never>] = [:]
    /// Purchases in flight, by product: a second tap joins the first instead of opening a second order.
    var purchasesInFlight: [String: (id: UUID, task: Task<PurchaseOutcome, Never>)] = [:]
    /// Transactions this client saw settled (granted, delivered to their owner, refused as final). A late copy — from
    /// the updates stream, or a retry working from an older read of the journal — is answered from here and never
    /// uploaded or written back.
    var settled: [String: UploadResult] = [:]
    /// Transactions granted by this client, in order: ``resume()`` counts the ones granted while it ran, whichever
    /// task (the listener, the retrier, itself) did the upload.
    var grantLog: [String] = []
    /// Backoff kept in memory as well as in the journal, so it holds when the journal cannot be written.
    var backoff: [String: (attempts: Int, next: Date)] = [:]
    /// Paid transactions the journal refused to take: kept here, uploaded by the retrier, written again when the
    /// journal recovers. The store's unfinished queue holds them across launches.
    var unjournaled: [String: JournalEntry] = [:]
    /// Settled transactions whose `finish` the store refused: finished again by the retrier, with backoff, rather than
    /// left in the store's queue until the next launch (where a consumable's payment sheet would show it still pending).
    var unfinishedSettled: [String: (transaction: StoreTransaction, attempts: Int, next: Date)] = [:]
    /// Finishes in flight: a second caller (the retrier beside the store handing the transaction over again) does not
    /// finish it again, and so never hears the store say that nothing is left to finish.
    var finishing: Set<String> = []
    var promoted = PromotedPurchases()
    /// The upload a sign-in started in the background; kept so that a caller driving the client step by step (the
    /// history explorer) can wait for it.
    var loginRetry: Task<Void, Never>?

    let eventBroadcast = Broadcast<PurchaseEvent>(buffer: 256)
    let entitlementBroadcast = Broadcast<EntitlementsState>(buffer: 8)
    /// The order last made for each product shown in StoreKit's views (its token, and the account it was made for): the
    /// view completes the payment it asked the order for.
    var storeViewOrders: [String: (token: UUID, orderId: String, accountId: String?)] = [:]
    /// The entitlements fetch ``start()`` began in the background.
    var launchRefresh: Task<Void, Never>?
    /// Reports of orders ended with nothing charged, under way.
    var orderEndReports: [UUID: Task<Void, Never>] = [:]
    /// The last answer published, as the offline copy keeps it (the cache may be absent or unwritable).
    var offlineAnswer: CachedEntitlements?
    /// The device's clock (a test sets it back).
    package var clock: @Sendable () -> Date = { Date() }
    package func setClock(_ clock: @escaping @Sendable () -> Date) { self.clock = clock }

    /// Progress of purchases, uploads and deliveries. Each access is its own subscription (any number of
    /// consumers each get every event), starting with the latest event.
    public nonisolated var events: AsyncStream<PurchaseEvent> { eventBroadcast.subscribe() }
    /// What the signed-in account owns, each time that changes: `.notLoaded` at a sign-in until the server (or the
    /// offline copy) answers, `.loaded` after ``start()``, every sign-in, purchase, restore and ``entitlements()``,
    /// `.signedOut` at a sign-out. Each access is its own subscription, starting with the current state.
    public nonisolated var entitlementUpdates: AsyncStream<EntitlementsState> { entitlementBroadcast.subscribe() }
    /// The signed-in account's entitlements as last answered (or served offline), if any.
    public var currentEntitlements: Entitlements? { session.latest }
    /// The current state of ``entitlementUpdates``.
    public nonisolated var entitlementsState: EntitlementsState { entitlementBroadcast.value ?? .signedOut }

    /// A client; call ``start()`` at launch before anything else. `accountId` is the account signed in at launch
    /// (or nil); the server client's token must be that account's. `offlineCache` keeps the last answer for when the
    /// server cannot be reached, served for at most `offlineMaxAge` after the server issued it (a week by default).
    public init(store: any StoreAdapter, server: PurchaseServerClient, journal: any PurchaseJournal, accountId: String? = nil,
                retryDelays: [Duration] = [.seconds(2), .seconds(10), .seconds(30), .seconds(120), .seconds(600)],
                deviceIntegrity: DeviceIntegrity? = nil, offlineCache: (any EntitlementsCache)? = nil,
                offlineMaxAge: TimeInterval? = 7 * 86_400, log: PurchaseLog = .off) {
        self.deviceIntegrity = deviceIntegrity
        self.offlineMaxAge = offlineMaxAge
        self.store = store
        var server = server
        server.log = log
        self.server = server
        self.log = log
        entitlementBroadcast.send(accountId.map { .notLoaded(accountId: $0) } ?? .signedOut)
        self.journal = journal
        session = AccountSession(accountId: accountId)
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
                for await intent in intents {
                    guard let self else { return }
                    _ = await self.handlePromotedPurchase(intent)
                }
            }
        }
        if retrier == nil {
            retrier = Task { [weak self] in
                while !Task.isCancelled {
                    guard let self else { return }
                    await self.sleepUntilDue()
                    guard !Task.isCancelled else { return }
                    await self.retryDue()
                }
            }
        }
        let granted = await resume()
        // What the account owns, published without the app asking (the server, or the offline copy while it is away).
        if accountId != nil, launchRefresh == nil {
            launchRefresh = Task { _ = try? await self.entitlements() }
        }
        return granted
    }

    /// The delivery queue sleeps until the earliest retry or finish falls due — at most ten minutes, a safety net —
    /// or until ``wakeDeliveryQueue()``.
    private func sleepUntilDue() async {
        if wokenEarly {
            wokenEarly = false
            return
        }
        let now = Date()
        // Whatever waits for a sign-in is not due on the clock (a sign-in wakes the queue): counted, it would spin it.
        let waiting = session.waitingForSignIn
        // A finish under way elsewhere ends by clearing its entry or rescheduling it (which wakes the queue).
        var due = backoff.filter { !waiting.contains($0.key) }.map(\.value.next)
            + unfinishedSettled.filter { !finishing.contains($0.key) }.map(\.value.next)
            + unjournaled.values.filter { !waiting.contains($0.transactionId ?? "") }.compactMap(\.nextAttemptAt)
        let firstRetry = DeliveryRules.nextAttempt(after: 1, delays: retryDelays, now: now)
        if !pendingRemovals.isEmpty { due.append(firstRetry) }
        // A journal that cannot be read: the queue can act only on the store's queue, which it just did; it looks again
        // after the first retry delay, not at once.
        if journalUnreadable { due = due.map { max($0, firstRetry) } + [firstRetry] }
        let wait = DeliveryRules.sleep(dueTimes: due, now: now)
        log("delivery queue sleeps \(wait) s")
        // One sleeper at a time: a queue restarted (stop, then start) before the old one left must not strand it.
        sleeper?.resume()
        alarm?.cancel()
        await withCheckedContinuation { continuation in
            sleeper = continuation
            alarm = Task { [weak self] in
                // A cancelled alarm (the queue was woken already) wakes nothing.
                do { try await Task.sleep(for: .seconds(wait)) } catch { return }
                await self?.wakeDeliveryQueue()
            }
        }
    }

    /// Something changed what is due: the queue looks again now.
    func wakeDeliveryQueue() {
        alarm?.cancel()
        alarm = nil
        if let sleeper {
            self.sleeper = nil
            sleeper.resume()
        } else {
            wokenEarly = true
        }
    }

    /// Sends `event` to every subscriber, and to the debug log.
    func send(_ event: PurchaseEvent) {
        log("event \(event)")
        eventBroadcast.send(event)
    }

    /// Stops listening and retrying (the journal keeps everything for the next start).
    public func stop() {
        listener?.cancel()
        retrier?.cancel()
        promotedListener?.cancel()
        listener = nil
        retrier = nil
        promotedListener = nil
        wakeDeliveryQueue()
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
            send(.journalFailed(productId: nil, transactionId: nil, reason: "the journal cannot be read: \(error)"))
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

    var checkpointObserver: (@Sendable (Checkpoint) -> Void)?

    /// Calls `observer` at each ``Checkpoint``. For crash tests only.
    public func setCheckpointObserver(_ observer: (@Sendable (Checkpoint) -> Void)?) { checkpointObserver = observer }
}
