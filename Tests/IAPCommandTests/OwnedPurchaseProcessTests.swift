import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import StoreSimulator
import Testing

/// Issue 32's "done when", over real processes: `iap simulator`, `iap serve`, and the app as `iap app` processes.
@Suite("The simulator as the App Store, over real processes", .serialized, .timeLimit(.minutes(3)))
struct OwnedPurchaseProcessTests {
    static let premium = "com.example.iapkit.premium"

    @Test("A second purchase of an owned non-consumable answers the first transaction and charges once (the same account: granted; another account of the app: delivered to its owner)")
    func secondPurchaseChargesOnce() async throws {
        let world = try await CrashMatrixTests.World.start()
        do {
            try await world.createStoreAccount("owner")
            let first = try await world.app("buy", "owner", ["--product", Self.premium])
            #expect(first.line.outcome == "granted", "\(first.line)")
            let bought = try await transactions(world, "store-owner")
            #expect(bought.count == 1)

            let again = try await world.app("buy", "owner", ["--product", Self.premium])
            #expect(again.line.outcome == "granted", "the owner is told it owns it: \(again.line)")
            // Another account of the app, on another device, with the same Apple ID.
            let other = try await world.app("buy", "other", device: "tablet", storeAccount: "store-owner", ["--product", Self.premium])
            #expect(other.line.outcome == "deliveredToOwner", "\(other.line)")

            #expect(try await transactions(world, "store-owner") == bought, "both purchases answered the first transaction: charged once")
            let notifications = try await world.get(world.simulatorPort, "/sim/notifications").decoded(as: [Notification].self)
            #expect(notifications.filter { $0.notificationType == "ONE_TIME_CHARGE" }.count == 1)
            let id = try #require(bought.first)
            let held = try await world.get(world.serverPort, "/admin/transactions/\(id)", bearer: CrashMatrixTests.adminKey).decoded(as: TransactionRecord.self)
            #expect(held.accountId == "owner")
            let resumed = try await world.app("resume", "other", device: "tablet", storeAccount: "store-owner")
            #expect(resumed.line.entitlements?.contains("premium") != true, "the other account was given nothing: \(resumed.line)")
        } catch {
            try await world.stop()
            throw error
        }
        try await world.stop()
    }

    /// The transaction ids the simulator lists for the Apple ID (`GET /sim/accounts/{a}/transactions`, StoreKit's
    /// `Transaction.all`), oldest first.
    func transactions(_ world: CrashMatrixTests.World, _ storeAccount: String) async throws -> [String] {
        let signed = try await world.get(world.simulatorPort, "/sim/accounts/\(storeAccount)/transactions").decoded(as: SimulatedSignedTransactions.self)
        return try signed.signedTransactions.map { jws in
            var part = String(jws.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while part.count % 4 != 0 { part += "=" }
            struct Payload: Decodable { var transactionId: String }
            return try JSONDecoder().decode(Payload.self, from: try #require(Data(base64Encoded: part))).transactionId
        }
    }

    struct Notification: Decodable { var notificationType: String }
}
