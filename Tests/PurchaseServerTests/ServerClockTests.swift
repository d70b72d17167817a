import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PurchaseServer
import Testing

/// A server whose clock runs behind Apple's: what Apple signed a moment ago carries dates "in the future" for it.
@Suite("A server clock behind Apple's: what Apple just signed is owned in the answers, and the lag is shown")
struct ServerClockTests {
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"

    /// The server's `iapkit_apple_clock_lead_seconds`.
    static func lead(_ system: System) async throws -> Double? {
        let response = try await system.server.execute(uri: "/metrics", method: .get, headers: [:], body: nil)
        let text = String(decoding: response.body.readableBytesView, as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix("iapkit_apple_clock_lead_seconds ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test("A minute slow: the purchase's answer and later answers own what was bought; the lead shows in /metrics")
    func minuteSlow() async throws {
        try await System.run(.init(deliver: false, serverClockBehind: 60)) { system in
            let (account, store) = try await system.customer("slow")
            var reply: [String: Any] = [:]
            for product in [Self.premium, Self.monthly] {
                reply = try await system.buy(product, account: account, storeAccount: store).reply
                #expect(reply["outcome"] as? String == "granted")
            }
            #expect(Set(reply.ownedEntitlements.entitlementNames) == ["premium", "pro"], "\(reply)")
            #expect(Set(try await system.entitlements(account).entitlementNames) == ["premium", "pro"])
            let lead = try #require(try await Self.lead(system))
            #expect(lead >= 59 && lead <= 61, "\(lead)")
        }
    }

    @Test("Ten minutes slow: corrected by five at most, so the purchase is granted but not yet owned; the gauge says ten")
    func farBehind() async throws {
        try await System.run(.init(deliver: false, serverClockBehind: 600)) { system in
            let (account, store) = try await system.customer("far")
            let reply = try await system.buy(Self.premium, account: account, storeAccount: store).reply
            #expect(reply["outcome"] as? String == "granted", "granted all the same: the ledger holds it")
            #expect(reply.ownedEntitlements.entitlementNames.isEmpty)
            let lead = try #require(try await Self.lead(system))
            #expect(lead >= 599 && lead <= 601, "\(lead)")
        }
    }

    @Test("Apple's clock lead: the largest seen lately, at most five minutes, forgotten within ten; a clock ahead of Apple's is left alone")
    func appleClock() {
        let clock = AppleClock()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(clock.lead(at: start) == 0)
        clock.observe(signedDate: start - 30, at: start)
        #expect(clock.lead(at: start) == 0, "signed before it arrived: no evidence of a slow clock")
        clock.observe(signedDate: start + 40, at: start)
        clock.observe(signedDate: start + 70, at: start + 10)
        clock.observe(signedDate: start + 20, at: start + 10)
        #expect(clock.lead(at: start + 20) == 60)
        clock.observe(signedDate: start + 1_000, at: start + 20)
        #expect(clock.lead(at: start + 20) == AppleClock.maximumLead)
        #expect(clock.lead(at: start + 400) == AppleClock.maximumLead, "still remembered after five minutes")
        #expect(clock.lead(at: start + 1_000) == 0, "forgotten once no signature showed it for ten minutes")
    }
}
