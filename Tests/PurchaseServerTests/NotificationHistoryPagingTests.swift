import Foundation
import IAPTestSupport
@testable import PurchaseServer
import Testing

@Suite("Reading Apple's notification history a page at a time: bounded, and never past what was not read")
struct NotificationHistoryPagingTests {
    @Test("A pass stopped inside a slice (by its cap on pages) says so and leaves the cursor; the next pass reads the slice whole; a budget of one page still reads a whole slice")
    func budgetInsideASlice() async throws {
        try await System.run(.init(deliver: false)) { system in
            let reconciler = Reconciler(services: system.services)
            let cursorName = Reconciler.notificationHistoryCursor(baseURL: system.services.verifier.apple.serverAPI?.baseURL ?? "",
                                                                  bundleId: system.services.verifier.apple.serverAPI?.credentials.bundleId ?? "")
            // A first pass reads the (empty) history to the present.
            #expect(try await reconciler.recoverNotifications(now: system.services.now()).recovered == 0)
            let before = try await system.services.ledger.cursor(cursorName)
            #expect(before != nil)
            let (account, store) = try await system.customer("paged")
            // 25 purchases: 25 ONE_TIME_CHARGE notifications never delivered, two pages of Apple's history (20 a page).
            for _ in 0..<25 { _ = try await system.buy("com.example.iapkit.coins.100", account: account, storeAccount: store) }
            try await system.engine.advanceClock(by: 60)
            let now = system.services.now()
            let stopped = try await reconciler.recoverNotifications(now: now, slicePageCap: 1)
            #expect(stopped.stalled?.contains("ran past 1 pages") == true, "\(stopped)")
            #expect(stopped.recovered == 20)
            #expect(try await system.services.ledger.cursor(cursorName) == before, "the slice was not read whole: the cursor did not move")
            let whole = try await reconciler.recoverNotifications(now: now, pageBudget: 1)
            #expect(whole.stalled == nil && whole.recovered == 5, "\(whole)")
            #expect(try await system.services.ledger.cursor(cursorName).map { $0 > before! } == true)
        }
    }
}
