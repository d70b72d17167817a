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

    // Eight: a history waiting out a slow Apple (600 ms) holds its place without a core; with four, those waits left the
    // two cores idle a sixth of the time (measured: 26.4 histories/s at 4, 31.5 at 8, 32.1 at 16).
    @Option(help: "Histories run at once.")
    var parallel: Int = 8

    @Flag(help: "Shrink a failing history to the fewest steps that still fail.")
    var shrink = false

    @Option(help: "Before the campaign, time this many empty histories (the world built, brought to rest, checked and torn down) as its baseline.")
    var baseline: Int = 0

    @Flag(help: "Keep each history's ledger in a PostgreSQL database of its own on the server IAPKIT_POSTGRES_URL names.")
    var postgres = false

    func run() async throws {
        var postgresURL: String?
        if postgres {
            guard let url = ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"] else {
                throw ValidationError("--postgres needs IAPKIT_POSTGRES_URL (scripts/explore starts a throwaway PostgreSQL when it is unset)")
            }
            postgresURL = url
        }
        let explorer = Explorer(environment: try ExplorerEnvironment(postgresURL: postgresURL))
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
        if baseline > 0 {
            var empty = explorer
            empty.generator.minSteps = 0
            empty.generator.maxSteps = 0
            let report = await empty.campaign(first: first, histories: baseline, parallel: parallel)
            print(String(format: "baseline: %d empty histories in %.1f s: %.1f histories/s (%.1f ms each, %d at a time)%@", report.histories,
                         report.seconds, report.historiesPerSecond, 1000 * report.seconds / Double(max(report.histories, 1)) * Double(parallel),
                         parallel, report.failures.isEmpty ? "" : ", \(report.failures.count) failing"))
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
