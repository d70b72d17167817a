import AppStoreFormats
import AppStoreTrust
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPKit
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import NIOEmbedded
import StoreSimulator

/// A value shared between the explorer and the closures it hands the SDK.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
    @discardableResult
    func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&stored) } }
}

/// The device or process is gone, the network is down, the disk is full: what the SDK sees from a fault.
struct InjectedFault: Error, CustomStringConvertible {
    let description: String
}

/// Who the App Store's transactions belong to, as the explorer saw the app and the server agree on it: each order's
/// account (by `appAccountToken`), and the first account whose upload of a transaction without one was accepted.
final class Ownership: @unchecked Sendable {
    private let lock = NSLock()
    private var orders: [UUID: String] = [:]
    private var presenters: [String: String] = [:]
    private(set) var spent: [String: Int64] = [:]
    private var spendKeys: Set<String> = []

    func ordered(_ token: UUID, by account: String) { lock.withLock { orders[token] = account } }
    func presented(_ transaction: StoreTransaction, by account: String) {
        presented(ids: [transaction.transactionId, transaction.originalTransactionId].compactMap { $0 }, by: account)
    }
    func presented(ids: [String], by account: String) {
        lock.withLock {
            for key in ids where presenters[key] == nil { presenters[key] = account }
        }
    }

    /// Receipts the server held (Apple unavailable), by proof id: presented by their account once the reconciler
    /// verifies them, which is when the server hears of their purchases.
    private var heldReceipts: [String: (account: String, receipt: String)] = [:]
    func held(receipt: String, proofId: String, by account: String) { lock.withLock { heldReceipts[proofId] = (account, receipt) } }
    func takeHeldReceipts(resolved: Set<String>) -> [(account: String, receipt: String)] {
        lock.withLock {
            let done = heldReceipts.filter { resolved.contains($0.key) }
            for id in done.keys { heldReceipts[id] = nil }
            return done.sorted { $0.key < $1.key }.map(\.value)
        }
    }
    /// A spend the server accepted, counted once per idempotency key (a retried spend is the same spend).
    func spent(_ amount: Int64, by account: String, key: String) {
        // Keys are the account's own: the ledger keys a spend by account and key.
        lock.withLock { if spendKeys.insert(account + "\u{0}" + key).inserted { spent[account, default: 0] += amount } }
    }
    func spentTotals() -> [String: Int64] { lock.withLock { spent } }

    /// The account a transaction belongs to: its token's order, else the first accepted presenter of its series (a
    /// subscription's periods go with the series), else of the transaction itself.
    func owner(of payload: JWSTransactionDecodedPayload) -> String? {
        lock.withLock {
            if let token = payload.appAccountToken, let account = orders[token] { return account }
            return payload.originalTransactionId.flatMap { presenters[$0] } ?? payload.transactionId.flatMap { presenters[$0] }
        }
    }
}

/// The purchase server, replaceable (a restart, a bad deploy) while the history runs.
final class ServerSlot: @unchecked Sendable {
    private let lock = NSLock()
    private let channel: NIOAsyncTestingChannel
    init(channel: NIOAsyncTestingChannel) { self.channel = channel }
    private var current: (http: InProcessHTTP, services: PurchaseServices)?
    var http: InProcessHTTP? { lock.withLock { current?.http } }
    var services: PurchaseServices? { lock.withLock { current?.services } }
    func replace(_ services: PurchaseServices?) -> PurchaseServices? {
        lock.withLock {
            let old = current?.services
            current = services.map { (InProcessHTTP(buildRouter($0), channel: channel), $0) }
            return old
        }
    }
}

/// One install of the app on one device: its journal directory outlives the process, the process does not.
final class ExploredDevice: @unchecked Sendable {
    let index: Int
    let name: String
    let storeAccount: String
    let journalDirectory: URL
    let signedIn: Locked<String?>
    /// The app's process died: nothing it does reaches anything any more.
    let dead = Locked(false)
    let offline = Locked(false)
    let journalRefuses = Locked(false)
    var client: PurchaseClient?
    var store: SimulatorStore?
    /// The last spend sent (its idempotency key and amount), and the last key the server accepted.
    var lastSpend: (key: String, amount: Int, account: String)?
    var lastSpendAccepted: String?

    init(index: Int, storeAccount: String, appAccount: String, root: URL) {
        self.index = index
        name = "device-\(index)"
        self.storeAccount = storeAccount
        journalDirectory = root.appendingPathComponent("journal-\(index)")
        signedIn = Locked(appAccount)
    }
}

/// A journal on disk that fails when the disk is full or the process is gone.
struct FaultyJournal: PurchaseJournal {
    let inner: FileJournal
    let device: ExploredDevice

    func write(_ entry: JournalEntry) throws {
        try check()
        try inner.write(entry)
    }

    func remove(key: String) throws {
        try check()
        try inner.remove(key: key)
    }

    func entries() throws -> [JournalEntry] {
        if device.dead.value { throw InjectedFault(description: "the app's process is gone") }
        return try inner.entries()
    }

    private func check() throws {
        if device.dead.value { throw InjectedFault(description: "the app's process is gone") }
        if device.journalRefuses.value { throw InjectedFault(description: "no space left on device") }
    }
}
