import Foundation
import HistoryExplorer
import Testing

@Suite("The seeded history explorer", .timeLimit(.minutes(3)))
struct HistoryExplorerTests {
    static let environment = try! ExplorerEnvironment()

    @Test("A fixed set of seeded histories: every invariant holds after each")
    func fixedSeeds() async throws {
        let explorer = Explorer(environment: Self.environment)
        let report = await explorer.campaign(first: 1, histories: 300)
        #expect(report.histories == 300)
        for failure in report.failures.prefix(3) {
            Issue.record("\(failure.readable)\nreplay: scripts/explore --seed \(failure.seed ?? 0) --shrink")
        }
        #expect(report.checks.keys.sorted() == [1, 2, 3, 4, 5], "every invariant was checked")
        #expect(report.coverage.count >= 40, "the histories met most kinds of step: \(report.coverage.keys.sorted())")
    }

    /// Histories the explorer found failing, shrunk, each kept with the fix it led to (docs/EXPLORER.md).
    static let regressions: [(seed: UInt64, steps: [Step])] = [
        // Account 0 buys the yearly plan on the Apple ID where account 1 subscribes monthly: an upgrade carrying
        // account 0's token. Account 1 kept "pro" (the ledger judged a series by the account's own latest period).
        (13, [.buy(device: 1, product: .monthly, end: .success, crash: nil), .buy(device: 0, product: .yearly, end: .interrupted, crash: nil),
              .answerRequest(pick: 41, approve: true)]),
        (115, [.buy(device: 1, product: .yearly, end: .deferred, crash: nil), .buy(device: 0, product: .monthly, end: .success, crash: .afterGrant),
               .answerRequest(pick: 6, approve: true)]),
        // A family member's device, signed in as another app account, uploads a new period of a shared series the
        // first account holds: refused as another's and finished — while the ledger had never kept the period.
        (730, [.family(share: true), .buy(device: 0, product: .monthly, end: .success, crash: nil),
               .buy(device: 2, product: .monthly, end: .success, crash: .afterJournal), .advance(seconds: 14_400), .reinstall(device: 2),
               .signIn(device: 2, account: 0), .buy(device: 1, product: .yearly, end: .deferred, crash: .duringUpload),
               .answerRequest(pick: 17, approve: true)]),
        // A refund of a past period (the upgraded monthly) during the yearly's grace period: its notification carried
        // no status, and the ledger took that as the series' latest status — ending the grace period it knew of.
        (10253, [.billing(storeAccount: 0, fails: true), .buy(device: 1, product: .monthly, end: .success, crash: .afterPayment),
                 .buy(device: 0, product: .yearly, end: .success, crash: nil), .advance(seconds: 3600), .refund(pick: 18)]),
        // A refunded purchase reported by verifyReceipt with its appAccountToken was taken as it stood: a receipt says
        // nothing of how much was refunded, and its stand-in signing date outdated Apple's later REFUND notification.
        // Revoked receipt purchases are now looked up with the Server API whatever they carry.
        (259, [.buy(device: 0, product: .monthly, end: .success, crash: .duringUpload), .receiptsByApple(true), .refund(pick: 10),
               .launch(device: 0), .syncReceipt(device: 0)]),
        // A receipt held while Apple was down, verified by verifyReceipt after a refund: the receipt's own purchases,
        // as they stood when it was made, were dated by Apple's answer and so outdated the refund (also 5940, 7235, 16509).
        // Purchases from the receipt's `in_app` now carry its creation date.
        (7223, [.receiptsByApple(true), .buy(device: 0, product: .season, end: .success, crash: nil), .apple(.down), .syncReceipt(device: 0),
                .advance(seconds: 900), .proratedRefund(pick: 10, percentage: 99_999),
                .buy(device: 0, product: .season, end: .userCancelled, crash: .duringUpload)]),
        // A family member's copy (no appAccountToken) claimed by another app account that sent only its id: granted to
        // it, first to present. A bare id now binds nothing nobody holds (403 possession_required).
        (145, [.buy(device: 1, product: .premium, end: .success, crash: .duringUpload), .family(share: true),
               .strangerSendsId(pick: 43, account: 2)]),
    ]

    /// Histories where the explorer itself was wrong, kept so that the oracle stays right.
    static let oracleRegressions: [[Step]] = [
        // One device's spend key reused by another account signed in there is another spend (seed 19405).
        [.buy(device: 0, product: .coins, end: .success, crash: nil), .spend(device: 0, amount: 10),
         .buy(device: 2, product: .coins, end: .success, crash: .duringUpload), .signIn(device: 0, account: 2), .spend(device: 0, amount: 10)],
        // A family member's receipt presents the shared copy it lists: its account is the first presenter (seeds 758, 1148).
        [.buy(device: 0, product: .premium, end: .success, crash: .afterJournal), .family(share: true), .syncReceipt(device: 2)],
        [.family(share: true), .buy(device: 2, product: .season, end: .success, crash: nil), .buy(device: 0, product: .premium, end: .success, crash: nil),
         .syncReceipt(device: 2), .signIn(device: 2, account: 1)],
    ]

    @Test("Histories where the explorer's own oracle was wrong stay clean")
    func oracleRegression() async throws {
        let explorer = Explorer(environment: Self.environment)
        for steps in Self.oracleRegressions {
            let result = await explorer.run(steps)
            #expect(result.violations.isEmpty, "\(result.readable)")
        }
    }

    @Test("The histories the explorer found failing hold now, as found and as shrunk", arguments: regressions.map(\.seed))
    func regression(_ seed: UInt64) async throws {
        let explorer = Explorer(environment: Self.environment)
        let found = await explorer.run(seed: seed)
        #expect(found.violations.isEmpty, "\(found.readable)")
        let shrunk = await explorer.run(Self.regressions.first { $0.seed == seed }!.steps)
        #expect(shrunk.violations.isEmpty, "\(shrunk.readable)")
    }

    @Test("A smaller run on PostgreSQL: a database per history, every invariant holds")
    func postgres() async throws {
        guard let url = ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"] else {
            Issue.record("IAPKIT_POSTGRES_URL is not set: run the suite with scripts/test, which starts a throwaway PostgreSQL")
            return
        }
        let explorer = Explorer(environment: try ExplorerEnvironment(postgresURL: url))
        let report = await explorer.campaign(first: 1, histories: 16)
        #expect(report.histories == 16)
        for failure in report.failures.prefix(3) {
            Issue.record("\(failure.readable)\nreplay: scripts/explore --postgres --seed \(failure.seed ?? 0) --shrink")
        }
        #expect(report.checks.keys.sorted() == [1, 2, 3, 4, 5])
    }

    @Test("The same seed gives the same history")
    func seedsAreStable() {
        let generator = HistoryGenerator()
        #expect(generator.history(seed: 7) == generator.history(seed: 7))
        #expect(generator.history(seed: 7) != generator.history(seed: 8))
    }
}
