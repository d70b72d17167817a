import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseAPI
import PurchaseServer
import StoreSimulator
import Testing

/// Issue 29's acceptance, over real `iap` processes on loopback: what an attacker with a signed-in account (or none)
/// can do to a deployed server.
@Suite("Hardened against abuse, over real processes", .timeLimit(.minutes(3)))
struct AbuseProcessTests {
    /// A session of this suite's own, each request on a connection of its own (`Connection: close`). A kept-alive
    /// connection the server closes for idleness (20 s) just as the client reuses it for a POST is retried by curl on
    /// a fresh one, and FoundationNetworking's retry sends the head without the body (its rewind does nothing for
    /// `data(for:)`): the server waits for the body and the client hears nothing for 30 s — seen once in a full CI run.
    static let session = URLSession(configuration: .ephemeral)

    static func call(_ url: String, method: String = "GET", _ body: String? = nil, token: String?) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue("close", forHTTPHeaderField: "Connection")
        request.timeoutInterval = 60
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    static func post(_ url: String, _ body: String, token: String?) async throws -> (Int, String) {
        try await call(url, method: "POST", body, token: token)
    }

    @Test("iap dev accepting Sandbox and Xcode: five forged Xcode transactions under the next ids leave the customer's real purchase to the customer; a token valid only in an hour is 401")
    func xcodeSquatAndEarlyToken() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-abuse-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let (server, simulator) = (try FreePort.pick(), try FreePort.pick())
        let process = try await IAPServeProcessTests.start(["dev", "--data", data.path, "--server-port", String(server), "--simulator-port", String(simulator)],
                                                           probe: "http://127.0.0.1:\(server)/health", environment: ["IAPKIT_ENVIRONMENTS": "Sandbox,Xcode"])
        defer { process.terminate() }
        let secret = try String(contentsOf: data.appendingPathComponent("server/auth-hs256-secret"), encoding: .utf8)
        let (base, store) = ("http://127.0.0.1:\(server)", "http://127.0.0.1:\(simulator)")
        // The purchase server answering is this run's (a port another test bound meanwhile would answer otherwise).
        let health = try? await Self.call("\(base)/health", token: nil).1.decoded(as: HealthReply.self)
        try #require(health?.status == "ok" && health?.store == "sqlite", "\(String(describing: health))")
        func buy(_ account: String, _ productId: String) async throws -> (transactionId: String, reply: String) {
            let token = try await AccountAuthenticator.issueToken(account: account, secret: secret)
            let order = try await Self.post("\(base)/v1/orders", #"{"productId":"\#(productId)"}"#, token: token).1.decoded(as: OrderReply.self)
            _ = try await Self.post("\(store)/sim/accounts", #"{"id":"store-\#(account)"}"#, token: nil)
            let bought = try await Self.post("\(store)/sim/purchases", """
                {"account":"store-\(account)","device":"phone","productId":"\(productId)","appAccountToken":"\(order.appAccountToken.lowercasedString)"}
                """, token: nil).1.decoded(as: SimulatedPurchaseAnswer.self)
            let jws = try #require(bought.signedTransaction)
            let reply = try await Self.post("\(base)/v1/purchases", #"{"signedTransaction":"\#(jws)","orderId":"\#(order.orderId)"}"#, token: token).1
            return (try #require(bought.transactionId), reply)
        }
        let premium = "com.example.iapkit.premium"
        // The forger's own purchase tells where the store's ids stand; the next five are signed as Xcode's and uploaded.
        let last = try #require(Int(try await buy("fred", premium).transactionId))
        let squatted = last + 1...last + 5
        let forger = try XcodeForger()
        let forgerToken = try await AccountAuthenticator.issueToken(account: "fred", secret: secret)
        for next in squatted {
            var squat = JWSTransactionDecodedPayload()
            (squat.transactionId, squat.originalTransactionId, squat.bundleId) = ("\(next)", "\(next)", "com.example.iapkit")
            (squat.productId, squat.type, squat.quantity, squat.inAppOwnershipType) = (premium, .nonConsumable, 1, .purchased)
            (squat.purchaseDate, squat.signedDate, squat.environment) = (Date() - 60, Date(), .xcode)
            let (status, body) = try await Self.post("\(base)/v1/purchases", #"{"signedTransaction":"\#(try forger.sign(squat))"}"#, token: forgerToken)
            #expect(status == 200, "\(body)")
        }
        let (id, reply) = try await buy("vera", premium)
        let bought: Int = Int(id) ?? 0
        #expect(squatted.contains(bought), "\(id) after \(last)")
        #expect([SubmissionOutcome.granted, .alreadyGranted].contains((try? reply.decoded(as: PurchaseReply.self))?.outcome), "\(reply)")
        let owned = try await Self.call("\(base)/v1/entitlements", token: try await AccountAuthenticator.issueToken(account: "vera", secret: secret)).1
        let item = (try? owned.decoded(as: EntitlementsReply.self))?.entitlements.entitlement("premium")
        #expect(item?.transactionId == id && item?.environment == "Sandbox", "\(owned)")

        // A bearer token whose nbf is an hour ahead is refused; the same claims valid now are taken.
        let early = try await AccountAuthenticator.issueToken(account: "vera", secret: secret, lifetime: 7_200, notBefore: Date() + 3_600)
        #expect(try await Self.call("\(base)/v1/entitlements", token: early).0 == 401)
        try await IAPServeProcessTests.stop(process)
    }

    @Test("iap serve on PostgreSQL: a NUL in a spend's idempotency key is a 4xx whose body names no SQL")
    func nulOnPostgres() async throws {
        let url = try PostgresDatabases.fresh("nul")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-nul-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let port = try FreePort.pick()
        let process = try await IAPServeProcessTests.start(["serve", "--port", String(port), "--data", data.path, "--database", url],
                                                           probe: "http://127.0.0.1:\(port)/health")
        defer { process.terminate() }
        let secret = try String(contentsOf: data.appendingPathComponent("auth-hs256-secret"), encoding: .utf8)
        let token = try await AccountAuthenticator.issueToken(account: "nul-\(UUID().uuidString.prefix(8))", secret: secret)
        let (status, body) = try await Self.post("http://127.0.0.1:\(port)/v1/consumables/coins/spend", #"{"amount":1,"idempotencyKey":"a\u0000b"}"#, token: token)
        #expect((400..<500).contains(status), "\(status) \(body)")
        for word in ["SELECT", "INSERT", "PSQL", "balance_entries", ".swift", "sqlState"] {
            #expect(!body.contains(word), "\(word) in \(body)")
        }
        try await IAPServeProcessTests.stop(process)
    }
}
