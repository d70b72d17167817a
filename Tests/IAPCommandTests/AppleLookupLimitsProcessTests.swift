import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import PurchaseServer
import Testing

@Suite("Apple-backed look-ups bounded, over real processes", .timeLimit(.minutes(3)))
struct AppleLookupLimitsProcessTests {
    @Test("iap dev: 60 random transaction ids from one account make at most 20 calls to the simulator's Server API; the rest are 429 with Retry-After")
    func floodOfRandomIds() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-limits-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let (server, simulator) = (try FreePort.pick(), try FreePort.pick())
        let process = try await IAPServeProcessTests.start(["dev", "--data", data.path, "--server-port", String(server), "--simulator-port", String(simulator)],
                                                           probe: "http://127.0.0.1:\(server)/health")
        defer { process.terminate() }
        let secret = try String(contentsOf: data.appendingPathComponent("server/auth-hs256-secret"), encoding: .utf8)
        let token = try await AccountAuthenticator.issueToken(account: "flooder", secret: secret)
        var statuses: [Int: Int] = [:]
        var retryAfter: [String] = []
        for _ in 0..<60 {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server)/v1/purchases")!)
            request.httpMethod = "POST"
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.httpBody = Data(#"{"transactionId":"\#(UInt64.random(in: 100_000_000_000_000...999_999_999_999_999))"}"#.utf8)
            request.timeoutInterval = 30
            let (_, response) = try await URLSession.shared.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            statuses[http.statusCode, default: 0] += 1
            if http.statusCode == 429 { retryAfter.append(http.value(forHTTPHeaderField: "Retry-After") ?? "") }
        }
        let (_, counted) = try await IAPServeProcessTests.request("http://127.0.0.1:\(simulator)/sim/calls?prefix=/inApps/v1/transactions/")
        struct Counted: Decodable { var count: Int }
        let calls = try counted.decoded(as: Counted.self).count
        #expect(calls <= 20 && calls > 0, "\(calls) Server API calls")
        #expect(statuses[429] == 40 && statuses[422] == 20, "\(statuses)")
        #expect(retryAfter.allSatisfy { (Int($0) ?? 0) >= 1 }, "\(retryAfter)")
        try await IAPServeProcessTests.stop(process)
    }
}
