import Synchronization

/// Health checks that share database reads without answering from an old one: a check waits for a read that *began
/// after it arrived*. At most one read runs and one waits to start; every check arriving meanwhile joins the waiting
/// one. A load balancer's probes (or a load test of `/health`) then cost the database one read per round trip, not
/// one per request, and a database that stopped answering fails every check that arrives after it stopped. A read
/// that has not answered within `deadline` fails its checks then (a database that hangs, rather than refusing, must not
/// hang the probes that should report it); it is left to finish on its own, and the next read starts meanwhile.
actor HealthProbe {
    private let read: @Sendable () async throws -> Void
    private let deadline: Duration
    private var running: Task<Void, any Error>?
    private var waiting: Task<Void, any Error>?

    init(deadline: Duration = .seconds(5), read: @escaping @Sendable () async throws -> Void) {
        self.deadline = deadline
        self.read = read
    }

    func check() async throws {
        let task: Task<Void, any Error>
        if let waiting {
            task = waiting
        } else {
            let previous = running
            task = Task { [read, deadline] in
                if let previous {
                    _ = await previous.result
                    self.started()
                }
                try await Self.answer(within: deadline, read)
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

    /// `read`'s outcome, or a storage error once `deadline` passed without one. Neither waits for the other: a read
    /// that hangs is not awaited (it cannot be cancelled into answering), and a read that answers stops the timer.
    static func answer(within deadline: Duration, _ read: @escaping @Sendable () async throws -> Void) async throws {
        let first = FirstAnswer()
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>, Never>) in
            first.slot.withLock { $0 = continuation }
            let timer = Task {
                try await Task.sleep(for: deadline)
                first.resume(.failure(LedgerError(.storage, "the database did not answer within \(deadline)")))
            }
            Task {
                do { try await read(); first.resume(.success(())) } catch { first.resume(.failure(error)) }
                timer.cancel()
            }
        }
        try result.get()
    }
}

/// The continuation that whichever of the read and its timer ends first resumes; the other finds it taken.
private final class FirstAnswer: Sendable {
    let slot = Mutex<CheckedContinuation<Result<Void, any Error>, Never>?>(nil)

    func resume(_ result: Result<Void, any Error>) {
        slot.withLock { $0.take() }?.resume(returning: result)
    }
}
