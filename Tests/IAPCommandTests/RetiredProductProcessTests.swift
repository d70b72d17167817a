import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import Testing

@Suite("iap serve and a product customers own", .timeLimit(.minutes(3)))
struct RetiredProductProcessTests {
    static let premium = "com.example.iapkit.premium"
    static let coinsRule = #""com.example.iapkit.coins.100": {"type": "Consumable", "currency": "coins", "amount": 100}"#

    @Test("A catalog that dropped a product customers own: iap serve exits 1 at start, naming it and \"retired\": true; retired, it starts, refuses its orders (410 product_retired) and keeps what was bought")
    func refusedAtStart() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-retired-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        // A ledger where an account owns premium (what a server with the demo catalog granted).
        let store = try SQLiteLedgerStore(path: data.appendingPathComponent("ledger.sqlite").path)
        let ledger = Ledger(store: store, catalog: .demo)
        try await ledger.migrate()
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = "retired-\(UUID().uuidString)"
        payload.originalTransactionId = payload.transactionId
        (payload.productId, payload.type, payload.quantity, payload.environment) = (Self.premium, .nonConsumable, 1, .sandbox)
        payload.purchaseDate = Date().addingTimeInterval(-60)
        payload.signedDate = payload.purchaseDate
        _ = try await ledger.submit(.init(accountId: "pia", transaction: payload))
        try await store.close()

        let config = data.appendingPathComponent("config.json")
        let log = data.appendingPathComponent("stderr.log")
        let binary = try IAPSimulatorProcessTests.binary().path
        let environment = ["IAPKIT_AUTH_HS256_SECRET": IAPServeProcessTests.secret]

        // The next release's catalog forgot premium.
        try Data(#"{"catalog": {"products": {\#(Self.coinsRule)}}}"#.utf8).write(to: config)
        let port = try FreePort.pick()
        let refused = try Subprocess.start(binary, ["serve", "--config", config.path, "--port", String(port), "--data", data.path],
                                           environment: environment, stderrFile: log)
        for _ in 0..<600 where refused.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        if refused.isRunning {
            try await IAPServeProcessTests.stop(refused)
            Issue.record("iap serve started without a product customers own")
        }
        let said = try String(contentsOf: log, encoding: .utf8)
        #expect(refused.terminationStatus == 1, "\(said)")
        #expect(said.contains(Self.premium) && said.contains(#""retired": true"#), "\(said)")

        // Retired instead: it starts, sells premium no more, and the customer keeps it.
        try Data(#"""
            {"catalog": {"products": {\#(Self.coinsRule),
              "\#(Self.premium)": {"type": "Non-Consumable", "entitlement": "premium", "retired": true}}}}
            """#.utf8).write(to: config)
        let process = try await IAPServeProcessTests.start(["serve", "--config", config.path, "--port", String(port), "--data", data.path],
                                                           probe: "http://127.0.0.1:\(port)/health", environment: environment)
        let (status, body) = try await IAPServeProcessTests.request("http://127.0.0.1:\(port)/v1/orders", method: "POST",
                                                                    body: #"{"productId":"\#(Self.premium)"}"#, account: "pia")
        #expect(status == 410 && (try? body.decoded(as: ErrorBody.self).error.code) == .productRetired, "\(String(decoding: body, as: UTF8.self))")
        let (_, owned) = try await IAPServeProcessTests.request("http://127.0.0.1:\(port)/v1/entitlements", account: "pia")
        #expect((try? owned.decoded(as: EntitlementsReply.self).entitlements.entitlements.map(\.name)) == ["premium"],
                "\(String(decoding: owned, as: UTF8.self))")
        try await IAPServeProcessTests.stop(process)
    }
}
