import AppStoreFormats
import Foundation

/// Everything the simulator remembers, as one value saved to `state.json` in its data directory after each change.
struct StoreState: Codable, Sendable {
    var accounts: [String: Account] = [:]
    var transactions: [String: StoredTransaction] = [:]
    /// Transaction ids in the order they were minted.
    var transactionOrder: [String] = []
    var pendingPurchases: [String: PendingPurchase] = [:]
    var nextId: Int64 = 2_000_000_000_000_001
    var clockAdvance: TimeInterval = 0
    var retiredProductIds: Set<String> = []
    /// Renewal-date extensions per original transaction id (their times), and request identifiers already served.
    var extensions: [String: [Date]] = [:]
    var extensionRequests: [String: String] = [:]

    /// A simulated customer.
    struct Account: Codable, Sendable {
        var id: String
        var storefront: String
        var canMakePayments: Bool
        var askToBuy: Bool
        /// Subscription groups in which an introductory offer was used.
        var introOfferGroupsUsed: Set<String> = []
    }

    /// A minted transaction and its bookkeeping.
    struct StoredTransaction: Codable, Sendable {
        var payload: JWSTransactionDecodedPayload
        var account: String
        /// Devices that have not finished it yet; empty once finished everywhere it was delivered.
        var unfinishedOn: Set<String>
    }

    /// An Ask to Buy request waiting for a parent.
    struct PendingPurchase: Codable, Sendable {
        var account: String
        var device: String
        var productId: String
        var appAccountToken: UUID?
        var quantity: Int
    }

    mutating func mintId() -> String {
        defer { nextId += 1 }
        return String(nextId)
    }
}
