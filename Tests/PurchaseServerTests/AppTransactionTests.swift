import AppStoreFormats
import Foundation
import PurchaseAPI
import IAPKit
import PurchaseLedger
import PurchaseServer
import StoreSimulator
import Testing

/// A device whose store has no receipt (StoreKit 2 apps often have none) but signs an app transaction.
struct NoReceiptStore: StoreAdapter {
    let inner: SimulatorStore
    let signedAppTransaction: String

    func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) { try await inner.products(productIds) }
    func canMakePayments() async throws -> Bool { try await inner.canMakePayments() }
    func purchase(_ request: StorePurchaseRequest) async throws -> StorePurchaseResult { try await inner.purchase(request) }
    func unfinished() async throws -> [StoreTransaction] { try await inner.unfinished() }
    func finish(_ transaction: StoreTransaction) async throws { try await inner.finish(transaction) }
    func restore() async throws -> [StoreTransaction] { try await inner.restore() }
    func updates() -> AsyncStream<StoreTransaction> { inner.updates() }
    func receipt() async throws -> String? { nil }
    func appTransaction() async throws -> String? { signedAppTransaction }
}

@Suite("Without a receipt the device sends its signed app transaction, never a store refresh", .timeLimit(.minutes(3)))
struct AppTransactionTests {
    func appTransaction(id: String, bundleId: String = System.bundleId) throws -> String {
        var payload = AppTransactionDecodedPayload()
        payload.appTransactionId = id
        payload.bundleId = bundleId
        payload.receiptType = .sandbox
        payload.applicationVersion = "3"
        payload.originalApplicationVersion = "1"
        payload.originalPurchaseDate = Date(timeIntervalSince1970: 1_700_000_000)
        payload.receiptCreationDate = Date()
        payload.originalPlatform = .iOS
        return try Minter(authority: simulatorAuthority).sign(payload)
    }

    func client(_ system: System, account: String, store: any StoreAdapter) -> PurchaseClient {
        let secret = system.secret
        let server = PurchaseServerClient(baseURL: URL(string: "http://127.0.0.1:\(system.server.port!)")!, timeout: 30,
                                          token: { try await AccountAuthenticator.issueToken(account: account, secret: secret) })
        let journal = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)")
        return PurchaseClient(store: store, server: server, journal: try! FileJournal(directory: journal), accountId: account)
    }

    @Test("syncReceipt() with no receipt sends the app transaction: verified, recorded for the account, entitlements answered")
    func sentInstead() async throws {
        try await System.run { system in
            let account = "apptx-\(UUID().uuidString.prefix(8))"
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-\(account)"])
            _ = try await system.buy("com.example.iapkit.premium", account: account, storeAccount: "store-\(account)")
            let simulator = SimulatorStore(baseURL: URL(string: "http://127.0.0.1:\(system.simulator.port!)")!, account: "store-\(account)",
                                           device: "phone")
            let id = "7\(UInt64.random(in: 1_000_000_000...9_999_999_999))"
            let app = client(system, account: account, store: NoReceiptStore(inner: simulator, signedAppTransaction: try appTransaction(id: id)))
            let owned = try #require(try await app.syncReceipt(), "an app without a receipt still syncs")
            #expect(owned.entitlements.contains { $0.name == "premium" })
            let recorded = try await system.services.ledger.appTransactions(accountId: account)
            #expect(recorded.map(\.appTransactionId) == [id])
            #expect(recorded.first?.originalApplicationVersion == "1")
            // Presented again: still one record, seen again.
            _ = try await app.syncReceipt()
            #expect(try await system.services.ledger.appTransactions(accountId: account).count == 1)
        }
    }

    @Test("An app transaction of another app, or unsigned, is refused as final and recorded nowhere")
    func refused() async throws {
        try await System.run { system in
            let account = "apptx-\(UUID().uuidString.prefix(8))"
            let other = try appTransaction(id: "1234", bundleId: "com.example.other")
            let (status, body) = try await system.call(.post, "/v1/purchases", as: account, ["appTransaction": other])
            #expect(status == .unprocessableContent)
            #expect(try errorCode(body) == "wrong_bundle")
            var forged = try appTransaction(id: "1235")
            forged.removeLast(4)
            forged += "AAAA"
            #expect(try await system.call(.post, "/v1/purchases", as: account, ["appTransaction": forged]).0 == .unprocessableContent)
            #expect(try await system.call(.post, "/v1/purchases", as: account,
                                          PurchaseRequest(signedTransaction: "x", appTransaction: try appTransaction(id: "1236"))).0 == .badRequest)
            #expect(try await system.services.ledger.appTransactions(accountId: account).isEmpty)
        }
    }
}
