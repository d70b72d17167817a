import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PurchaseAPI
import PurchaseServer
import Testing

/// A server whose clock runs behind Apple's: what Apple signed a moment ago carries dates "in the future" for it.
@Suite("A server clock behind Apple's: what Apple just signed is owned in the answers, and the lag is shown")
struct ServerClockTests {
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"

    /// The server's `iapkit_apple_clock_lead_seconds`.
    static func lead(_ system: System) async throws -> Double? {
        let response = try await system.server.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(System.adminKey)"], body: nil)
        let text = String(decoding: response.body.readableBytesView, as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix("iapkit_apple_clock_lead_seconds ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test("A minute slow: the purchase's answer and later answers own what was bought; the lead shows in /metrics")
    func minuteSlow() async throws {
        try await System.run(.init(deliver: false, serverClockBehind: 60)) { system in
            let (account, store) = try await system.customer("slow")
            var reply: PurchaseReply?
            for product in [Self.premium, Self.monthly] {
                reply = try await system.buy(product, account: account, storeAccount: store).reply
                #expect(reply?.outcome == .granted)
            }
            #expect(Set(try #require(reply).entitlements.entitlementNames) == ["premium", "pro"], "\(String(describing: reply))")
            #expect(Set(try await system.entitlements(account).entitlementNames) == ["premium", "pro"])
            let lead = try #require(try await Self.lead(system))
            // Apple signed before the server saw it: under a loaded machine the lead reads up to seconds short, never over.
            #expect(lead >= 50 && lead <= 61, "\(lead)")
        }
    }

    @Test("Ten minutes slow: past the five minutes allowed, the purchase is granted but not yet owned; the gauge says ten")
    func farBehind() async throws {
        try await System.run(.init(deliver: false, serverClockBehind: 600)) { system in
            let (account, store) = try await system.customer("far")
            let reply = try #require(try await system.buy(Self.premium, account: account, storeAccount: store).reply)
            #expect(reply.outcome == .granted, "granted all the same: the ledger holds it")
            #expect(reply.entitlements.entitlementNames.isEmpty)
            let lead = try #require(try await Self.lead(system))
            #expect(lead >= 590 && lead <= 601, "\(lead)")
        }
    }

    @Test("The operator's figure of Apple's lead: the largest seen in this five-minute slot and the one before; a clock set back starts afresh")
    func appleClock() {
        let clock = AppleClock()
        let slot = Date(timeIntervalSince1970: 1_800_000_000)   // a slot boundary (divisible by 300)
        #expect(clock.lead(at: slot) == nil)
        clock.observe(signedDate: slot - 30, at: slot)
        #expect(clock.lead(at: slot) == -30, "signed before it arrived: no sign of a slow clock")
        clock.observe(signedDate: slot + 70, at: slot + 10)
        clock.observe(signedDate: slot + 20, at: slot + 10)
        #expect(clock.lead(at: slot + 20) == 60)
        #expect(clock.lead(at: slot + 599) == 60, "kept through the next slot")
        #expect(clock.lead(at: slot + 600) == nil, "forgotten two slots on")
        clock.observe(signedDate: slot + 700, at: slot + 650)
        #expect(clock.lead(at: slot + 100) == nil, "a clock set back starts afresh")
    }
}
