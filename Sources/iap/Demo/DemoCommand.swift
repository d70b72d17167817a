import AppStoreTrust
import ArgumentParser
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import Logging
import IAPKit
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import ServiceLifecycle
import StoreSimulator

/// `iap demo`: the whole system in one command — simulator and server on loopback with a temporary SQLite ledger,
/// an app (PurchaseClient) buying each product type, a subscription's life on the accelerated clock, a refund, and a
/// purchase whose app crashes and is recovered at the next launch — told as a timeline. Exits non-zero if any step's
/// result is wrong.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show the whole system in under a minute: purchases of every type, a subscription's life, a refund, a crash recovered.")

    @Flag(help: "Keep the temporary directory (ledger, journal, simulator state) and print where it is.")
    var keep = false

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-demo-\(UUID().uuidString)")
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        let timeline = Timeline()
        let world = try await DemoWorld.start(in: directory)
        timeline.note("simulated App Store on \(world.simulatorURL.absoluteString), purchase server on \(world.serverURL.absoluteString) (SQLite ledger in a temporary directory)")
        do { try await DemoScript(world: world, timeline: timeline).run() } catch {
            timeline.step("the demo ran to its end", false, "stopped by \(error)")
        }
        await world.stop()
        if keep { timeline.note("kept \(directory.path)") }
        timeline.summary()
        if timeline.failures > 0 { throw ExitCode(1) }
        // The demo's world is gone when it ends; the next step is one that stays up for an app of one's own.
        Output.print("""

            next: `iap dev` keeps the simulator and the server running for your app, with the dashboard \
            (http://127.0.0.1:8080/dashboard) and its admin key, a sign-in token, and `iap dev token ACCOUNT` for more.
            """)
    }
}

/// The demo's output: one line per step, ✔ or ✘, with the simulated time.
final class Timeline: @unchecked Sendable {
    private let lock = NSLock()
    private let started = ContinuousClock.now
    private(set) var failures = 0
    private var steps = 0

    func note(_ text: String) { Output.print("   \(text)") }

    func section(_ title: String) { Output.print("\n\(title)") }

    /// Records a step: `ok` decides the mark; `detail` says what was seen.
    func step(_ what: String, _ ok: Bool, _ detail: String) {
        lock.withLock {
            steps += 1
            if !ok { failures += 1 }
        }
        Output.print(" \(ok ? "✔" : "✘") \(what) — \(detail)")
    }

    func summary() {
        let seconds = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
        Output.print("\n\(failures == 0 ? "✔" : "✘") \(steps - failures)/\(steps) steps as expected in \(String(format: "%.1f", seconds)) s")
    }
}
