import Foundation
import IAPKit

/// The demo's timeline: what a newcomer should see the system do, each result checked.
struct DemoScript {
    let world: DemoWorld
    let timeline: Timeline

    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let season = "com.example.iapkit.season.pass"
    static let monthly = "com.example.iapkit.pro.monthly"

    let account = "demo-user"
    let storeAccount = "sandbox-tester"

    func run() async throws {
        try await world.simulator("POST", "sim/accounts", ["id": storeAccount])
        let (app, _) = try world.app(account: account, storeAccount: storeAccount, device: "iphone", journal: "journal-iphone")
        await app.start()

        timeline.section("1. Buying each kind of product (PurchaseClient: order → App Store → journal → server → finish)")
        var owned = try await buy(app, Self.coins, "100 coins (consumable)") { $0.balances["coins"] == 100 } detail: { "balance \($0.balances["coins"] ?? 0) coins" }
        let balance = try await app.server.spend(currency: "coins", amount: 30, idempotencyKey: "demo-spend-1")
        let again = try await app.server.spend(currency: "coins", amount: 30, idempotencyKey: "demo-spend-1")
        timeline.step("spend 30 coins, then the same request again", balance == 70 && again == 70, "balance \(again) (the repeat spent nothing)")
        owned = try await buy(app, Self.premium, "Premium (non-consumable)") { $0.entitlements.contains { $0.name == "premium" && $0.expiresAt == nil } } detail: { _ in "premium, for life" }
        owned = try await buy(app, Self.season, "Season Pass (non-renewing subscription)") { $0.has("season") } detail: {
            "season until \(Self.day($0.entitlements.first { $0.name == "season" }?.expiresAt)) (the server keeps its period)"
        }
        owned = try await buy(app, Self.monthly, "Pro Monthly (auto-renewable, 1 free week)") { $0.has("pro") } detail: { "pro, \(Self.until($0, "pro"))" }
        let original = owned.entitlements.first { $0.name == "pro" }?.transactionId ?? ""

        timeline.section("2. The subscription's life on the accelerated clock (1 week = 3 min, 1 month = 5 min), told by notifications")
        try await advance(180)
        owned = try await app.entitlements()
        timeline.step("the free week ends: renewed", pro(owned)?.transactionId != original && pro(owned)?.state == "active", "pro, \(Self.until(owned, "pro"))")
        try await world.simulator("POST", "sim/accounts", ["id": storeAccount, "billingFails": true])
        try await advance(300)
        owned = try await app.entitlements()
        timeline.step("the card is declined at renewal: grace period", pro(owned)?.state == "gracePeriod", "pro kept in its grace period")
        try await world.simulator("POST", "sim/accounts", ["id": storeAccount, "billingFails": false])
        owned = try await app.entitlements()
        timeline.step("the card works again: billing recovered", pro(owned)?.state == "active", "pro active, \(Self.until(owned, "pro"))")
        try await world.simulator("POST", "sim/subscriptions/\(original)/autoRenew", ["enabled": false])
        try await advance(300)
        owned = try await app.entitlements()
        timeline.step("auto-renew turned off: expires at the period's end", pro(owned) == nil, "no pro")

        timeline.section("3. A refund")
        let premiumTransaction = owned.entitlements.first { $0.name == "premium" }?.transactionId ?? ""
        try await world.simulator("POST", "sim/transactions/\(premiumTransaction)/refund")
        owned = try await app.entitlements()
        timeline.step("Apple refunds Premium: REFUND revokes it", !owned.has("premium"), "premium gone; season \(owned.has("season") ? "still" : "not") owned")
        await app.stop()

        timeline.section("4. Crashes: the paid order is never lost")
        let (crashing, crashingStore) = try world.app(account: account, storeAccount: storeAccount, device: "ipad", journal: "journal-ipad")
        await crashingStore.setNextOutcome("interrupted")
        let interrupted = await crashing.purchase(Self.coins)
        timeline.step("an interrupted purchase (the customer must confirm something first)", interrupted == .pendingApproval, "pending; the app then crashes")
        await crashing.stop()
        for request in await world.engine.pendingRequestIds() { try await world.simulator("POST", "sim/requests/\(request)/approve") }
        let (relaunched, relaunchedStore) = try await launch(journal: "journal-ipad")
        try await expectCoins(relaunched, relaunchedStore, 170, "the customer completes it; the app relaunches") {
            "balance \($0) coins (70 + 100, once), \($1) unfinished transactions left"
        }

        let order = try await relaunched.server.createOrder(productId: Self.coins)
        _ = try await relaunchedStore.purchase(StorePurchaseRequest(productId: Self.coins, appAccountToken: order.appAccountToken))
        await relaunched.stop()
        let (reinstalled, reinstalledStore) = try await launch(journal: "journal-ipad-reinstalled")
        try await expectCoins(reinstalled, reinstalledStore, 270, "paid, then the app died before its journal write and was reinstalled") { balance, _ in
            "found through the store's unfinished queue and the order's appAccountToken: balance \(balance)"
        }
        await reinstalled.stop()
    }

    /// A launch of the app on the iPad with `journal`.
    func launch(journal: String) async throws -> (PurchaseClient, SimulatorStore) {
        let (client, store) = try world.app(account: account, storeAccount: storeAccount, device: "ipad", journal: journal)
        await client.start()
        return (client, store)
    }

    /// Checks the coin balance and that nothing is left unfinished on the device.
    func expectCoins(_ client: PurchaseClient, _ store: SimulatorStore, _ coins: Int64, _ what: String,
                     detail: (Int64, Int) -> String) async throws {
        let balance = try await client.entitlements().balances["coins"] ?? 0
        let left = try await store.unfinished().count
        timeline.step(what, balance == coins && left == 0, detail(balance, left))
    }

    func buy(_ app: PurchaseClient, _ productId: String, _ what: String, expect: (Entitlements) -> Bool,
             detail: (Entitlements) -> String) async throws -> Entitlements {
        let outcome = await app.purchase(productId)
        guard case .granted(let owned) = outcome else {
            timeline.step(what, false, "\(outcome)")
            return try await app.entitlements()
        }
        timeline.step(what, expect(owned), detail(owned))
        return owned
    }

    func advance(_ seconds: Double) async throws {
        try await world.simulator("POST", "sim/clock/advance", ["seconds": seconds])
        timeline.note("⏩ \(Int(seconds)) s of the simulated clock")
    }

    func pro(_ owned: Entitlements) -> Entitlements.Item? { owned.entitlements.first { $0.name == "pro" } }

    static func until(_ owned: Entitlements, _ name: String) -> String {
        guard let item = owned.entitlements.first(where: { $0.name == name }) else { return "none" }
        guard let expires = item.expiresAt else { return "for life" }
        return "until \(ISO8601DateFormatter().string(from: expires))"
    }

    static func day(_ date: Date?) -> String {
        guard let date else { return "—" }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
