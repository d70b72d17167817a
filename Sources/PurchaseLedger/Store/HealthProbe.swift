import Foundation

/// Health checks that share database reads without answering from an old one: a check waits for a read that *began
/// after it arrived*. At most one read runs and one waits to start; every check arriving meanwhile joins the waiting
/// one. A load balancer's probes (or a load test of `/health`) then cost the database one read per round trip, not
/// one per request, and a database that stopped answering fails every check that arrives after it stopped.
///
/// A database can also hang instead of refusing. A read that has not answered within `deadline` fails its checks then,
/// and until it answers every check fails at once without starting another read: reads piling up behind a hung one
/// would each hold a thread (SQLite reads run on the caller's) until none is left to answer anything.
actor HealthProbe {
    private let read: @Sendable () async throws -> Void
    private let deadline: Duration
    private var running: Task<Void, any Error>?
    private var waiting: Task<Void, any Error>?
    /// Reads past their deadline that have not answered yet (it may briefly go below zero: a late answer can be
    /// counted before its overrun is).
    private var overrunning = 0

    init(deadline: Duration = .seconds(5), read: @escaping @Sendable () async throws -> Void) {
        self.deadline = deadline
        self.read = read
    }

    func check() async throws {
        guard overrunning <= 0 else {
            throw LedgerError(.storage, "the database has not answered a read started over \(deadline) ago")
        }
        let task: Task<Void, any Error>
        if let waiting {
            task = waiting
        } else {
            let previous = running
            task = Task {
                if let previous {
                    _ = await previous.result
                    self.started()
                }
                try await self.answer()
            }
            if previous == nil { running = task } else { waiting = task }
        }
        let result = await task.result
        if running == task { running = nil }
        try result.get()
    }

    /// The waiting read begins: checks arriving from now on wait for the next one.
    private func started() {
        if let waiting {
            running = waiting
            self.waiting = nil
        }
    }

    private func overran(by change: Int) { overrunning += change }

    /// The read's outcome, or a storage error once the deadline passed without one. Neither waits for the other: a
    /// read that hangs is not awaited (it cannot be cancelled into answering), and a read that answers stops the timer.
    private nonisolated func answer() async throws {
        let first = FirstAnswer()
        let (read, deadline) = (self.read, self.deadline)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>, Never>) in
            first.set(continuation)
            let timer = Task {
                try await Task.sleep(for: deadline)
                if first.resume(.failure(LedgerError(.storage, "the database did not answer within \(deadline)"))) { await self.overran(by: 1) }
            }
            Task {
                let answered: Result<Void, any Error>
                do { try await read(); answered = .success(()) } catch { answered = .failure(error) }
                timer.cancel()
                if !first.resume(answered) { await self.overran(by: -1) }
            }
        }
        try result.get()
    }
}

/// The continuation that whichever of the read and its timer ends first resumes; the other finds it taken. (A lock,
/// not `Mutex`: the package supports macOS 14 and iOS 17.)
private final class FirstAnswer: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Result<Void, any Error>, Never>?

    func set(_ continuation: CheckedContinuation<Result<Void, any Error>, Never>) {
        lock.withLock { self.continuation = continuation }
    }

    /// Resumes with `result` unless the other side did first; says whether it did.
    func resume(_ result: Result<Void, any Error>) -> Bool {
        guard let continuation = lock.withLock({ () -> CheckedContinuation<Result<Void, any Error>, Never>? in
            defer { self.continuation = nil }
            return self.continuation
        }) else { return false }
        continuation.resume(returning: result)
        return true
    }
}
