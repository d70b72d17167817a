import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import Testing

@Suite("iap serve refuses a device its policy refuses before the payment", .timeLimit(.minutes(3)))
struct DeviceIntegrityProcessTests {
    @Test("Over a real process with deviceIntegrityPolicy refuse: an order for a jailbroken device is 403 device_integrity and no order is made; a clean device orders")
    func refusedBeforePayment() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-integrity-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        let config = data.appendingPathComponent("iapkit.json")
        try Data(#"{"deviceIntegrityPolicy": "refuse"}"#.utf8).write(to: config)
        let port = try FreePort.pick()
        let base = "http://127.0.0.1:\(port)"
        let adminKey = "integrity-admin-key-16"
        let process = try await IAPServeProcessTests.start(["serve", "--config", config.path, "--port", String(port), "--data", data.path],
                                                           probe: "\(base)/health",
                                                           environment: ["IAPKIT_AUTH_HS256_SECRET": IAPServeProcessTests.secret, "IAPKIT_ADMIN_KEY": adminKey])
        defer { process.terminate() }
        let jailbroken = #"{"productId":"com.example.iapkit.premium","deviceIntegrity":{"signals":["known-paths","url-schemes"],"applicable":true}}"#
        let (status, body) = try await IAPServeProcessTests.request("\(base)/v1/orders", method: "POST", body: jailbroken, account: "ria")
        #expect(status == 403)
        #expect(try body.decoded(as: ErrorBody.self).error.code == .deviceIntegrity)
        let (listed, open) = try await IAPServeProcessTests.adminRequest("\(base)/admin/orders?state=created", key: adminKey)
        #expect(listed == 200)
        #expect(try open.decoded(as: AdminOrdersReply.self).orders.isEmpty, "no order was made")

        let clean = #"{"productId":"com.example.iapkit.premium","deviceIntegrity":{"signals":[],"applicable":true}}"#
        let (cleanStatus, order) = try await IAPServeProcessTests.request("\(base)/v1/orders", method: "POST", body: clean, account: "ria")
        #expect(cleanStatus == 201)
        let made = try order.decoded(as: OrderReply.self)
        #expect(try await IAPServeProcessTests.adminRequest("\(base)/admin/orders?state=created", key: adminKey).1
            .decoded(as: AdminOrdersReply.self).orders.map(\.orderId) == [made.orderId])
        try await IAPServeProcessTests.stop(process)
    }
}
