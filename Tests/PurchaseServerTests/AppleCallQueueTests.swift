import Foundation
import Logging
@testable import PurchaseServer
import ServiceLifecycle
import Testing

/// The calls to Apple that follow answers (Finish Transaction, Set App Account Token): made beside the requests, several
/// at a time, and never holding a server that was asked to stop.
@Suite("Apple calls after answers: made concurrently, bounded at shutdown, refused once the drainer stopped")
struct AppleCallQueueTests {
    /// Runs `queue` as a service of its own group, so that a graceful shutdown reaches it as it reaches a server's.
    struct Drainer: Service {
        let queue: AppleCallQueue
        let grace: Duration
        func run() async throws { await queue.run(workers: 4, grace: grace) }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func add() { lock.withLock { value += 1 } }
        var count: Int { lock.withLock { value } }
    }

    static func group(_ queue: AppleCallQueue, grace: Duration) -> ServiceGroup {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return ServiceGroup(configuration: .init(services: [.init(service: Drainer(queue: queue, grace: grace))], logger: logger))
    }

    @Test("Slow calls run side by side: while one waits on Apple, others are made (at most the workers' number at once)", .timeLimit(.minutes(1)))
    func concurrent() async throws {
        let queue = AppleCallQueue()
        let group = Self.group(queue, grace: .seconds(5))
        let done = Counter()
        let inFlight = Gauge()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            for _ in 0..<8 {
                #expect(queue.enqueue {
                    inFlight.enter()
                    try? await Task.sleep(for: .milliseconds(300))
                    inFlight.leave()
                    done.add()
                })
            }
            while done.count < 8 { try await Task.sleep(for: .milliseconds(20)) }
            // Counted, not timed: one after another, never more than one would be in flight, however loaded the machine.
            #expect(inFlight.peak > 1, "the calls were made one after another")
            #expect(inFlight.peak <= 4, "more calls at once than workers: \(inFlight.peak)")
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    final class Gauge: @unchecked Sendable {
        private let lock = NSLock()
        private var now = 0
        private var highest = 0
        func enter() { lock.withLock { now += 1; highest = max(highest, now) } }
        func leave() { lock.withLock { now -= 1 } }
        var peak: Int { lock.withLock { highest } }
    }

    @Test("A shutdown with a call that would last a minute ends after the grace, not the minute; a call queued afterwards is refused", .timeLimit(.minutes(1)))
    func boundedShutdown() async throws {
        let queue = AppleCallQueue()
        let group = Self.group(queue, grace: .milliseconds(300))
        let completed = Counter()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // Calls stuck for a minute (Apple timing out), and more behind them than workers can take.
            for _ in 0..<10 {
                #expect(queue.enqueue {
                    do { try await Task.sleep(for: .seconds(60)); completed.add() } catch {}
                })
            }
            try await Task.sleep(for: .milliseconds(100))
            let asked = ContinuousClock.now
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            let took = ContinuousClock.now - asked
            // The calls under way were cancelled after the grace: none ran its minute, and the group ended long before.
            #expect(completed.count == 0)
            #expect(took < .seconds(30), "the shutdown waited \(took) for calls to Apple")
        }
        #expect(!queue.enqueue { completed.add() }, "a call queued after the drainer stopped would never be made: it must be refused (and counted failed)")
    }
}
