import Crypto
import Foundation
@testable import IAPKit
import Testing

/// The offline copy's judgement, without a server: when an answer kept on the device may be served.
@Suite("Offline answers: judged by when they were issued")
struct OfflineAnswerTests {
    let issued = Date(timeIntervalSince1970: 1_800_000_000)
    var kept: CachedEntitlements {
        CachedEntitlements(entitlements: Entitlements(accountId: "ann", entitlements: [
            .init(name: "pro", productId: "pro.monthly", transactionId: "2", originalTransactionId: "1", expiresAt: issued.addingTimeInterval(86_400), state: .active),
        ]), cachedAt: issued)
    }

    func served(at now: Date, maxAge: TimeInterval? = 7 * 86_400) -> Bool {
        if case .success = OfflineEntitlements.trusted(kept, verifier: nil, now: now, maxAge: maxAge) { return true }
        return false
    }

    @Test("A device clock earlier than the answer (beyond five minutes of skew) serves nothing; within the skew it does")
    func clockSetBack() {
        #expect(served(at: issued))
        #expect(served(at: issued.addingTimeInterval(-299)))
        #expect(!served(at: issued.addingTimeInterval(-301)))
        #expect(!served(at: issued.addingTimeInterval(-30 * 86_400)))
    }

    @Test("A device clock behind the latest time it showed while the copy was kept serves nothing: a plan seen to expire stays expired")
    func clockBehindLatestSeen() {
        var read = kept
        read.latestDeviceTime = issued.addingTimeInterval(2 * 86_400)
        let served = { (now: Date) -> Bool in
            if case .success = OfflineEntitlements.trusted(read, verifier: nil, now: now, maxAge: nil) { return true }
            return false
        }
        #expect(!served(issued.addingTimeInterval(3600)), "set back to before the plan's expiry")
        #expect(served(issued.addingTimeInterval(2 * 86_400 - 60)), "within the skew")
        #expect(served(issued.addingTimeInterval(3 * 86_400)))
    }

    @Test("An answer older than the maximum age is not served; without a maximum it is, less what expired")
    func maximumAge() throws {
        #expect(served(at: issued.addingTimeInterval(7 * 86_400)))
        #expect(!served(at: issued.addingTimeInterval(7 * 86_400 + 1)))
        #expect(served(at: issued.addingTimeInterval(365 * 86_400), maxAge: nil))
        let late = issued.addingTimeInterval(2 * 86_400)
        guard case .success(let answer) = OfflineEntitlements.trusted(kept, verifier: nil, now: late, maxAge: nil) else { Issue.record("not served"); return }
        #expect(OfflineEntitlements.derive(from: answer.entitlements, storeOwns: [], now: late).entitlements.isEmpty, "the plan expired a day after the answer")
    }

    @Test("With an entitlements key, a copy without the server's signature is not served")
    func unsignedRefused() throws {
        let verifier = try EntitlementsVerifier(publicKeyPEM: P256.Signing.PrivateKey().publicKey.pemRepresentation)
        guard case .failure(let refusal) = OfflineEntitlements.trusted(kept, verifier: verifier, now: issued, maxAge: nil) else {
            Issue.record("an unsigned copy was served"); return
        }
        #expect(refusal.code == .untrustedAnswer)
    }
}
