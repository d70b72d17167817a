import Foundation
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import Testing

/// The dashboard in a real browser: headless Chromium (Debian's) driven through Selenium by
/// `Tests/Browser/dashboard_walk.py`, against the server on loopback; its screenshots read back by OCR.
@Suite("Dashboard in headless Chromium", .timeLimit(.minutes(3)))
struct DashboardBrowserTests {
    static let premium = "com.example.iapkit.premium"

    @Test("Sign in, find the account by a transaction id, see its timeline, settle a lost order: the ledger shows the settle and its audit entry; the revenue page shows the money, draws its charts and downloads its CSV")
    func walk() async throws {
        guard let python = ProcessInfo.processInfo.environment["IAPKIT_BROWSER_PYTHON"] else {
            Issue.record("IAPKIT_BROWSER_PYTHON is not set: run the suite with scripts/test, which installs Chromium, chromedriver and Selenium")
            return
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Browser/dashboard_walk.py").path
        // IAPKIT_DASHBOARD_SHOTS keeps the screenshots there, to look at.
        let kept = ProcessInfo.processInfo.environment["IAPKIT_DASHBOARD_SHOTS"]
        let shots = kept.map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-dashboard-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        defer { if kept == nil { try? FileManager.default.removeItem(at: shots) } }
        try await System.run(.sqlite) { system in
            let (account, store) = try await system.customer("erin")
            let (_, purchase, _) = try await system.buy(Self.premium, account: account, storeAccount: store)
            let transactionId = try #require(purchase.transactionId)
            // Money for the revenue page: Premium 9.99 and the yearly plan 39.99, so MRR 39.99 / 12.
            _ = try await system.buy(PurchaseFlowTests.yearly, account: account, storeAccount: store)
            // An order opened and never paid: the operator closes it with a note.
            let (_, order) = try await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: Self.premium))
            let orderId = try decode(OrderReply.self, order).orderId
            let port = try #require(system.server.port)
            let run = try await Subprocess.run(python, [script, "--base", "http://127.0.0.1:\(port)", "--key", System.adminKey,
                                                        "--transaction", transactionId, "--account", account, "--order", orderId, "--out", shots.path])
            let seen = try #require((try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any], "\(run.stdout)\n\(run.stderr)")
            #expect(run.status == 0 && seen["ok"] as? Bool == true, "at \((seen["steps"] as? [String])?.last ?? "the start"): \(seen["error"] ?? "")\n\(seen["failurePage"] ?? "")\n\(run.stderr)")
            #expect(seen["signedOutLandsOn"] as? String == "/dashboard/login")
            #expect(seen["afterSignIn"] as? String == "/dashboard" && seen["overviewHeading"] as? String == "Overview")
            let cookie = seen["cookie"] as? [String: Any] ?? [:]
            #expect(cookie["httpOnly"] as? Bool == true && cookie["sameSite"] as? String == "Strict" && cookie["path"] as? String == "/dashboard")
            #expect(seen["documentCookieHidden"] as? Bool == true, "script cannot read the session")
            #expect(seen["overviewChartDrawn"] as? Bool == true, "the overview's screenshot shows the charts' bars")
            #expect((seen["searchLandsOn"] as? String)?.hasPrefix("/dashboard/account?id=") == true && seen["accountShown"] as? String == account)
            #expect(seen["timelineHasTransaction"] as? Bool == true && (seen["ownedText"] as? String)?.contains(Self.premium) == true)
            let accountWords = seen["accountScreenshotWords"] as? [String] ?? []
            #expect(accountWords.contains("timeline") && accountWords.contains("owns now"), "OCR of the account page: \(accountWords)")
            #expect((seen["flash"] as? String)?.contains("Order \(orderId) is settled") == true)
            #expect((seen["settledScreenshotWords"] as? [String] ?? []).contains("settled"), "OCR of the settled order's page")
            #expect(seen["revenueHeading"] as? String == "Revenue")
            let figures = seen["revenueFigures"] as? [String: String] ?? [:]
            #expect(figures["active-subscriptions"]?.hasPrefix("1") == true && figures["active-trials"]?.hasPrefix("0") == true, "\(figures)")
            #expect((seen["revenueMrr"] as? [String])?.contains { $0.contains("3.33 USD") } == true, "\(seen["revenueMrr"] ?? "")")
            #expect((seen["revenueAllTime"] as? String)?.contains("USD 49.98 USD 0.00 USD 49.98 USD 2 0") == true, "\(seen["revenueAllTime"] ?? "")")
            let charts = seen["revenueCharts"] as? [String: [String: Any]] ?? [:]
            #expect(Set(charts.keys).isSuperset(of: ["chart-mrr", "chart-actives", "chart-revenue-USD", "chart-trials", "chart-churn"]), "\(charts)")
            for (id, box) in charts {
                let (width, height) = (box["width"] as? Double ?? 0, box["height"] as? Double ?? 0)
                #expect(width > 100 && height > 50 && box["lines"] as? Int ?? 0 >= 1 && box["linesWidth"] as? Double ?? 0 > 100, "\(id): \(box)")
            }
            #expect(seen["revenueChartDrawn"] as? Bool == true, "the revenue page's screenshot shows the charts' lines")
            #expect((seen["revenueScreenshotWords"] as? [String] ?? []).contains("revenue"), "OCR of the revenue page")
            let csv = seen["revenueCSV"] as? [String] ?? []
            #expect(csv.first == "figure,currency,value" && csv.contains("mrr,USD,3333") && csv.contains("gross,USD,49980"), "\(csv)")
            #expect(seen["revenueWeekCharts"] as? Int ?? 0 >= 5)
            #expect(try await system.services.ledger.order(orderId)?.state == .settled)
            let audit = try await system.services.ledger.auditLog()
            #expect(audit.contains { $0.actor == "dashboard" && $0.action == "settle" && $0.subject == orderId && $0.detail == "refunded by support in the browser" })
            #expect(audit.contains { $0.actor == "dashboard" && $0.action == "sign-in" })
        }
    }
}
