import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseServer
import Testing

@Suite("Hostile requests: mutated proofs and bodies get a typed 4xx, never a 5xx, and change nothing", .timeLimit(.minutes(3)))
struct HostileRequestTests {
    static func mutate(_ text: String, _ random: inout SeededGenerator) -> String {
        var bytes = Array(text.utf8)
        switch Int.random(in: 0..<5, using: &random) {
        case 0 where !bytes.isEmpty:
            let index = Int.random(in: 0..<bytes.count, using: &random)
            bytes[index] = UInt8.random(in: 33...126, using: &random)
        case 1:
            bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random)))
        case 2 where !bytes.isEmpty:
            let index = Int.random(in: 0..<bytes.count, using: &random)
            bytes.insert(contentsOf: Array(".".utf8), at: index)
        case 3:
            bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        default:
            bytes += bytes.prefix(Int.random(in: 0...200, using: &random))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("300 mutated signed transactions and notification bodies, seeded")
    func mutations() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-zed"])
            let (_, purchase, _) = try await system.buy("com.example.iapkit.coins.100", account: "zed", storeAccount: "store-zed", submit: false)
            let jws = try #require(purchase.signedTransaction)
            let notification = try #require(await system.engine.notifications().first?.signedPayload)
            var random = SeededGenerator(state: 20_261_121)
            var statuses: [Int: Int] = [:]
            for round in 0..<300 {
                let (path, body): (String, [String: String]) = round.isMultiple(of: 3)
                    ? ("/v1/notifications/appstore", ["signedPayload": Self.mutate(notification, &random)])
                    : ("/v1/purchases", ["signedTransaction": Self.mutate(jws, &random)])
                let (status, reply) = try await system.call(.post, path, as: "zed", body)
                statuses[status.code, default: 0] += 1
                #expect(status.code < 500, "round \(round): \(status.code) \(String(decoding: reply, as: UTF8.self))")
                if status.code >= 400 { #expect((try? errorCode(reply)) != nil, "round \(round): a typed error") }
            }
            // Raw bodies that are not JSON at all.
            for raw in ["", "{", "[]", "null", String(repeating: "[", count: 10_000), #"{"signedTransaction": 42}"#] {
                let response = try await system.server.execute(uri: "/v1/purchases", method: .post,
                                                               headers: [.authorization: "Bearer \(try await system.token("zed"))"],
                                                               body: ByteBuffer(string: raw))
                #expect(response.status == .badRequest, "\(raw.prefix(20))")
            }
            #expect(try await system.services.ledger.purchases(accountId: "zed").count <= 1, "at most the one real transaction")
            #expect(statuses.keys.allSatisfy { $0 < 500 })
        }
    }
}
