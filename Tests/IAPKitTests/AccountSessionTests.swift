import Foundation
@testable import IAPKit
import Testing

@Suite("Account sessions and offline entitlements, without a server or a store")
struct AccountSessionTests {
    static let ann = Entitlements(accountId: "ann", entitlements: [.init(name: "pro", productId: "p.pro", transactionId: "1", expiresAt: nil, state: .active)])

    @Test("A switch clears what the previous account saw; an answer is shown only to the account signed in when it was asked and still signed in")
    func switchAndShow() {
        var session = AccountSession(accountId: "ann")
        #expect(session.state == .notLoaded(accountId: "ann"))
        #expect(session.refusal(toShow: Self.ann, askedAs: "ann") == nil)
        session.show(Self.ann)
        #expect(session.state == .loaded(Self.ann))
        session.waitingForSignIn = ["t1"]
        #expect(session.switchTo("bea") == .notLoaded(accountId: "bea"))
        #expect(session.latest == nil && session.waitingForSignIn.isEmpty, "nothing of Ann's is kept; what waited is looked at again")
        #expect(session.refusal(toShow: Self.ann, askedAs: "ann")?.code == .accountMismatch, "asked as Ann, answered after Bea signed in")
        #expect(session.refusal(toShow: Self.ann, askedAs: "bea")?.code == .accountMismatch, "Ann's answer to Bea's call")
        #expect(session.switchTo(nil) == .signedOut)
        #expect(session.refusal(toShow: Self.ann, askedAs: nil)?.code == .notSignedIn, "signed out: nobody's to show")
    }

    @Test("Offline: expired items and balances go; only renewals of the account's own series, token and product extend it")
    func offline() throws {
        let now = Date(timeIntervalSince1970: 2_000_000)
        let token = UUID()
        let base = Entitlements(accountId: "ann", entitlements: [
            .init(name: "pro", productId: "p.pro", transactionId: "10", originalTransactionId: "10", appAccountToken: token,
                  expiresAt: now.addingTimeInterval(-60), state: .active),
            .init(name: "lifetime", productId: "p.life", transactionId: "20", expiresAt: nil, state: .active),
        ], balances: ["coins": 5], cachedAt: now.addingTimeInterval(-3600))
        func renewal(_ id: String, product: String = "p.pro", original: String = "10", token renewalToken: UUID?) -> StoreTransaction {
            StoreTransaction(transactionId: id, originalTransactionId: original, productId: product, appAccountToken: renewalToken,
                             expiresDate: now.addingTimeInterval(3600), signedTransaction: "jws")
        }
        #expect(OfflineEntitlements.derive(from: base, storeOwns: [], now: now).entitlements.map(\.name) == ["lifetime"], "the plan expired")
        #expect(OfflineEntitlements.derive(from: base, storeOwns: [], now: now).balances.isEmpty)
        let renewed = OfflineEntitlements.derive(from: base, storeOwns: [renewal("11", token: token)], now: now)
        #expect(renewed.has("pro") && renewed.entitlements.first { $0.name == "pro" }?.transactionId == "11")
        for other in [renewal("12", token: UUID()), renewal("13", token: nil), renewal("14", product: "p.basic", token: token), renewal("15", original: "99", token: token)] {
            #expect(!OfflineEntitlements.derive(from: base, storeOwns: [other], now: now).has("pro"), "\(other.transactionId) is not Ann's renewal of p.pro")
        }
    }
}
