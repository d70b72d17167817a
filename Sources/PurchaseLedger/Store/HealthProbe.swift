import Foundation

/// Health checks that share database reads without answering from an old one: a check waits for a read that *began
/// after it arrived*. At most one read runs; every check arriving meanwhile waits for the next, which begins when the
/// running one ends and answers all of them. A load balancer's probes (or a load test of `/health`) then cost the
/// database one read per round trip, not one per request, and a database that stopped answering fails every check that
/// arrives after it stopped.
///
/// A database can also hang instead of refusing. A read that has not answered within `deadline` fails its checks then,
/// those waiting for the next read too, and until it answers every check fails at once without starting another read:
/// reads piling up behind a hung one would each hold a thread (SQLite reads run on the caller's) until none is left to
/// answer anything.
///
/// The waiting checks are continuations under a lock, not tasks awaited through an actor: under a load of checks the
/// actor's hops and task results were a visible share of each check's CPU (BENCHMARKS.md). (A lock, not `Mutex`: the
/// package supports macOS 14 and iOS 17.)
final class HealthProbe: @unchecked Sendable {
    private typealias Waiter = CheckedContinuation<Void, any Error>

    private let read: @Sendable () async throws -> Void
    private let deadline: Duration
    private let lock = NSLock()
    // Guarded by `lock`:
    /// The running read's number; a read or timer that reports with another number was already settled.
    private var generation = 0
    private var reading = false
    /// Checks the running read answers.
    private var current: [Waiter] = []
    /// Checks that arrived after it began: the next read answers them.
    private var next: [Waiter] = []
    /// Reads past their deadline that have not answered yet.
    private var overrunning = 0

    init(deadline: Duration = .seconds(5), read: @escaping @Sendable () async throws -> Void) {
        self.deadline = deadline
        self.read = read
    }

    func check() async throws {
        try await withCheckedThrowingContinuation { (waiter: Waiter) in
            enum Step { case refuse, wait, begin(Int) }
            let step: Step = lock.withLock {
                if overrunning > 0 { return .refuse }
                if reading {
                    next.append(waiter)
                    return .wait
                }
                reading = true
                current = [waiter]
                return .begin(generation)
            }
            switch step {
            case .refuse:
                waiter.resume(throwing: LedgerError(.storage, "the database has not answered a read started over \(deadline) ago"))
            case .wait:
                break
            case .begin(let number):
                begin(number)
            }
        }
    }

    /// Starts read `number` and its timer; whichever ends first settles it.
    private func begin(_ number: Int) {
        let (read, deadline) = (self.read, self.deadline)
        let timer = Task {
            try await Task.sleep(for: deadline)
            self.settle(number, .failure(LedgerError(.storage, "the database did not answer within \(deadline)")), byTimer: true)
        }
        Task {
            let answered: Result<Void, any Error>
            do { try await read(); answered = .success(()) } catch { answered = .failure(error) }
            timer.cancel()
            self.settle(number, answered, byTimer: false)
        }
    }

    /// Answers the checks of read `number` with `result` unless it was settled already. When it answered, the checks
    /// that arrived during it get a read of their own, begun now; when its deadline passed, they fail with it (a read
    /// begun now would run beside the hung one).
    private func settle(_ number: Int, _ result: Result<Void, any Error>, byTimer: Bool) {
        let (answered, following): ([Waiter], Int?) = lock.withLock {
            guard number == generation else {
                // The read answered after its timer had failed its checks.
                if !byTimer { overrunning -= 1 }
                return ([], nil)
            }
            generation += 1
            var answered = current
            if byTimer {
                overrunning += 1
                answered += next
                current = []
            } else {
                current = next
            }
            next = []
            reading = !current.isEmpty
            return (answered, reading ? generation : nil)
        }
        for waiter in answered { waiter.resume(with: result) }
        if let following { begin(following) }
    }
}
