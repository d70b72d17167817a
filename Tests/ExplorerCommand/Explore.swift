import ArgumentParser
import Foundation
import HistoryExplorer

/// `scripts/explore`: replays one seed, or runs a campaign of seeded histories.
@main
struct Explore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explore",
        abstract: "Random purchase histories against the real simulator, server, ledger and SDK, each checked against the App Store's record.")

    @Option(help: "Replay the history of this seed and print it step by step.")
    var seed: UInt64?

    @Option(help: "Run a campaign of this many histories (seeds --first, --first + 1, …).")
    var histories: Int = 1_000

    @Option(help: "Stop the campaign after this many minutes.")
    var minutes: Double = 10

    @Option(help: "The first seed of the campaign.")
    var first: UInt64 = 1

    @Option(help: "Histories run at once.")
    var parallel: Int = 2

    @Flag(help: "Shrink a failing history to the fewest steps that still fail.")
    var shrink = false

    func run() async throws {
        let explorer = Explorer(environment: try ExplorerEnvironment())
        if let seed {
            var result = await explorer.run(seed: seed)
            print(result.readable)
            if !result.violations.isEmpty && shrink {
                result = await explorer.shrink(result)
                print("\nshrunk to \(result.steps.count) steps:")
                print(result.readable)
            }
            if !result.violations.isEmpty { throw ExitCode(1) }
            return
        }
        let report = await explorer.campaign(first: first, histories: histories, seconds: minutes * 60, parallel: parallel) { report in
            print(String(format: "%6d histories, %7d steps, %6.1f s, %6.1f histories/s, %d failing", report.histories, report.steps,
                         report.seconds, report.historiesPerSecond, report.failures.count))
        }
        print(String(format: "\n%d histories (seeds %llu…%llu), %d steps in %.1f s: %.1f histories/s, %.0f steps/s", report.histories, first,
                     first + UInt64(max(report.histories, 1)) - 1, report.steps, report.seconds, report.historiesPerSecond,
                     Double(report.steps) / max(report.seconds, 0.001)))
        print("\nchecks by invariant (violations):")
        for invariant in Set(report.checks.keys).union(report.violations.keys).sorted() {
            print("  \(invariant): \(report.checks[invariant, default: 0]) checks, \(report.violations[invariant, default: 0]) violations")
        }
        print("\nsteps covered:")
        for (kind, count) in report.coverage.sorted(by: { $0.key < $1.key }) { print("  \(kind): \(count)") }
        guard let failure = report.failures.first else { return }
        print("\n\(report.failures.count) failing histories; seeds: \(report.failures.prefix(20).compactMap(\.seed).map(String.init).joined(separator: " "))")
        let shrunk = shrink ? await explorer.shrink(failure) : failure
        print(shrunk.readable)
        throw ExitCode(1)
    }
}
