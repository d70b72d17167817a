import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import PurchaseServer
import StoreSimulator
import Testing

/// Issue 32's "done when", over real processes: `iap simulator` posting its notifications to `iap serve`, and the app's
/// view of a subscription's renewal state as the server answers it.
@Suite("Renewal info over real processes", .timeLimit(.minutes(3)))
struct RenewalInfoProcessTests {
    static let monthly = "com.example.iapkit.pro.monthly"

    @Test("After the customer turns auto-renew off, the auto-renewable entitlement carries renewalInfo with autoRenewStatus 0 and the autoRenewProductId; a price increase awaiting consent shows as priceIncreaseStatus 0; the signed answer carries it too")
    func autoRenewOff() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-renewal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let (serverPort, simulatorPort) = (try FreePort.pick(), try FreePort.pick())
        let (server, store) = ("http://127.0.0.1:\(serverPort)", "http://127.0.0.1:\(simulatorPort)")
        let simulator = try await IAPServeProcessTests.start(
            ["simulator", "--port", String(simulatorPort), "--data", root.appendingPathComponent("sim").path,
             "--webhook", "\(server)/v1/notifications/appstore"], probe: "\(store)/sim/root.cer")
        defer { simulator.terminate() }
        let serve = try await IAPServeProcessTests.start(
            ["serve", "--port", String(serverPort), "--data", root.appendingPathComponent("server").path,
             "--root", root.appendingPathComponent("sim/jws-root.pem").path],
            probe: "\(server)/health", environment: ["IAPKIT_AUTH_HS256_SECRET": IAPServeProcessTests.secret])
        defer { serve.terminate() }
        let account = "renewal-\(UUID().uuidString.prefix(8).lowercased())"

        // The customer subscribes through an order; the app uploads the transaction.
        let (ordered, orderBody) = try await IAPServeProcessTests.request("\(server)/v1/orders", method: "POST", body: #"{"productId":"\#(Self.monthly)"}"#,
                                                                          account: account)
        try #require(ordered == 201, "\(String(decoding: orderBody, as: UTF8.self))")
        let order = try orderBody.decoded(as: OrderReply.self)
        _ = try await IAPServeProcessTests.request("\(store)/sim/accounts", method: "POST", body: #"{"id":"store-\#(account)"}"#)
        let (_, boughtBody) = try await IAPServeProcessTests.request("\(store)/sim/purchases", method: "POST", body: """
            {"account":"store-\(account)","device":"phone","productId":"\(Self.monthly)","appAccountToken":"\(order.appAccountToken.lowercasedString)"}
            """)
        let bought = try boughtBody.decoded(as: SimulatedPurchaseAnswer.self)
        let original = try #require(bought.transactionId, "\(String(decoding: boughtBody, as: UTF8.self))")
        let jws = try #require(bought.signedTransaction)
        let (status, granted) = try await IAPServeProcessTests.request("\(server)/v1/purchases", method: "POST",
                                                                       body: #"{"signedTransaction":"\#(jws)","orderId":"\#(order.orderId)"}"#, account: account)
        #expect(status == 200, "\(String(decoding: granted, as: UTF8.self))")

        /// The `pro` entitlement once `ready` holds of it (notifications are delivered as the simulator answers, but a
        /// retry may come a moment later).
        func pro(until ready: (Entitlements.Item) -> Bool) async throws -> Entitlements.Item? {
            var last: Entitlements.Item?
            for _ in 0..<50 {
                let (status, body) = try await IAPServeProcessTests.request("\(server)/v1/entitlements", account: account)
                guard let reply = try? body.decoded(as: EntitlementsReply.self) else {
                    Issue.record("GET /v1/entitlements answered \(status): \(String(decoding: body, as: UTF8.self))")
                    return nil
                }
                last = reply.entitlements.entitlement("pro")
                if let last, ready(last) { return last }
                try await Task.sleep(for: .milliseconds(100))
            }
            return last
        }

        // SUBSCRIBED's renewal info: renewing into the same plan.
        let subscribed = try await pro { $0.renewalInfo?.autoRenewStatus == 1 }
        #expect(subscribed?.renewalInfo?.autoRenewStatus == 1, "\(String(describing: subscribed))")
        #expect(subscribed?.willAutoRenew == true)

        // The developer raises the price, needing the subscriber's consent: PRICE_INCREASE / PENDING.
        let (raised, told) = try await IAPServeProcessTests.request("\(store)/sim/products/\(Self.monthly)/price", method: "POST",
                                                                    body: #"{"price":99990,"consentRequired":true}"#)
        #expect(raised == 200, "\(String(decoding: told, as: UTF8.self))")
        let asked = try await pro { $0.renewalInfo?.priceIncreaseStatus == 0 }
        #expect(asked?.renewalInfo?.priceIncreaseStatus == 0, "\(String(describing: asked))")
        #expect(asked?.renewalInfo?.awaitsPriceIncreaseConsent == true)

        // The customer turns auto-renew off: DID_CHANGE_RENEWAL_STATUS / AUTO_RENEW_DISABLED reaches the server.
        let (turnedOff, offBody) = try await IAPServeProcessTests.request("\(store)/sim/subscriptions/\(original)/autoRenew", method: "POST",
                                                                          body: #"{"enabled":false}"#)
        #expect(turnedOff == 200 || turnedOff == 204, "\(String(decoding: offBody, as: UTF8.self))")
        let off = try #require(try await pro { $0.renewalInfo?.autoRenewStatus == 0 })
        let info = try #require(off.renewalInfo, "\(off)")
        #expect(info.autoRenewStatus == 0)
        #expect(info.autoRenewProductId == Self.monthly)
        #expect(off.willAutoRenew == false)
        #expect(info.signedDate != nil)
        #expect(off.state == .active && off.expiresAt != nil, "still served to the end of the period it paid for: \(off)")

        // The answer the server signs for the device says the same.
        var request = URLRequest(url: URL(string: "\(server)/v1/entitlements")!)
        request.setValue("Bearer \(try await AccountAuthenticator.issueToken(account: account, secret: IAPServeProcessTests.secret))",
                         forHTTPHeaderField: "Authorization")
        request.setValue("renewalNonce-0000000001", forHTTPHeaderField: "X-Entitlements-Nonce")
        let signed = try #require(try await URLSession.shared.data(for: request).0.decoded(as: EntitlementsReply.self).signedEntitlements)
        let parts = signed.split(separator: ".")
        try #require(parts.count == 3)
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        let claims = String(decoding: try #require(Data(base64Encoded: payload)), as: UTF8.self)
        #expect(claims.contains(#""renewalInfo":{"#) && claims.contains(#""autoRenewStatus":0"#), "\(claims)")

        try await IAPServeProcessTests.stop(serve)
        try await IAPServeProcessTests.stop(simulator)
    }
}
