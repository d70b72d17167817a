import Foundation

/// Runs histories against the real components and reports which promises broke; shrinks a failing history to the
/// fewest steps that still break the same promise.
public struct Explorer: Sendable {
    public let environment: ExplorerEnvironment
    public var generator = HistoryGenerator()

    public init(environment: ExplorerEnvironment) {
        self.environment = environment
    }

    /// The history of `seed`, run once.
    public func run(seed: UInt64) async -> HistoryResult {
        var result = await run(generator.history(seed: seed))
        result.seed = seed
        return result
    }

    /// `steps`, run once in a fresh world.
    public func run(_ steps: [Step]) async -> HistoryResult {
        let started = ContinuousClock.now
        let history: HistoryRun
        do { history = try await HistoryRun(environment: environment) } catch {
            return HistoryResult(seed: nil, steps: steps, violations: [Violation(invariant: 0, step: nil, detail: "the world could not be built: \(error)")],
                                 checks: [:], seconds: 0)
        }
        let (violations, checks) = await history.run(steps)
        await history.close()
        let elapsed = ContinuousClock.now - started
        return HistoryResult(seed: nil, steps: steps, violations: violations, checks: checks,
                             seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, events: history.events)
    }

    /// The shortest history found that still breaks the first broken invariant of `failing`: chunks, then single
    /// steps, are dropped while the failure stays (delta debugging). Steps after the failure are dropped first.
    public func shrink(_ failing: HistoryResult, budget: Int = 400) async -> HistoryResult {
        guard let target = failing.violations.first?.invariant else { return failing }
        var best = failing
        if let step = failing.violations.first?.step, step + 1 < failing.steps.count {
            let prefix = await run(Array(failing.steps.prefix(step + 1)))
            if prefix.violations.contains(where: { $0.invariant == target }) { best = prefix }
        }
        var runs = 0
        var chunk = max(1, best.steps.count / 2)
        while chunk >= 1 && runs < budget {
            var start = 0
            var removedAny = false
            while start < best.steps.count && runs < budget {
                var candidate = best.steps
                candidate.removeSubrange(start..<min(start + chunk, candidate.count))
                runs += 1
                let attempt = await run(candidate)
                if attempt.violations.contains(where: { $0.invariant == target }) {
                    best = attempt
                    removedAny = true
                } else {
                    start += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        best.seed = failing.seed
        return best
    }

    /// What a campaign saw.
    public struct CampaignReport: Sendable {
        public var histories = 0
        public var steps = 0
        public var seconds = 0.0
        public var failures: [HistoryResult] = []
        /// Steps run, by kind.
        public var coverage: [String: Int] = [:]
        /// Checks performed and violations found, by invariant.
        public var checks: [Int: Int] = [:]
        public var violations: [Int: Int] = [:]
        public var historiesPerSecond: Double { seconds > 0 ? Double(histories) / seconds : 0 }
    }

    /// Runs the histories of seeds `first`, `first + 1`, … until `histories` ran or `seconds` passed, `parallel` at a
    /// time.
    public func campaign(first: UInt64 = 1, histories: Int, seconds: Double = .infinity, parallel: Int = 4,
                         progress: (@Sendable (CampaignReport) -> Void)? = nil) async -> CampaignReport {
        var report = CampaignReport()
        let started = ContinuousClock.now
        func elapsed() -> Double {
            let duration = ContinuousClock.now - started
            return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        await withTaskGroup(of: HistoryResult.self) { group in
            var next = first
            var launched = 0
            func launch() {
                let seed = next
                next += 1
                launched += 1
                group.addTask { await self.run(seed: seed) }
            }
            for _ in 0..<max(1, parallel) where launched < histories { launch() }
            while let result = await group.next() {
                report.histories += 1
                report.steps += result.steps.count
                for step in result.steps { report.coverage[step.kind, default: 0] += 1 }
                for (event, count) in result.events { report.coverage["→ " + event, default: 0] += count }
                for (invariant, count) in result.checks { report.checks[invariant, default: 0] += count }
                for violation in result.violations { report.violations[violation.invariant, default: 0] += 1 }
                if !result.violations.isEmpty { report.failures.append(result) }
                report.seconds = elapsed()
                if report.histories % 100 == 0 { progress?(report) }
                if launched < histories && elapsed() < seconds { launch() }
            }
        }
        report.seconds = elapsed()
        return report
    }
}

extension HistoryResult {
    /// The history as a numbered list, and what broke.
    public var readable: String {
        var lines = ["seed \(seed.map(String.init) ?? "none"): \(steps.count) steps, \(violations.isEmpty ? "every invariant held" : "\(violations.count) violation(s)")"]
        for (index, step) in steps.enumerated() { lines.append(String(format: "%4d. ", index + 1) + step.description) }
        for violation in violations { lines.append("  ✗ " + violation.description) }
        return lines.joined(separator: "\n")
    }
}
