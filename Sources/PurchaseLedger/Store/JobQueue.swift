import Foundation

/// Operations handed from callers' tasks to the thread a store owns (SQLite's writer): callers enqueue, the thread
/// takes, and stopping lets the queue drain before the thread ends.
final class JobQueue<Job>: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var stopping = false
    private var running: Int
    private var endWaiters: [CheckedContinuation<Void, Never>] = []

    init(threads: Int) { running = threads }

    /// Queues `job`; false once the queue is stopped (the caller answers the job itself).
    func enqueue(_ job: Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// How many jobs wait to be taken.
    var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count
    }

    /// Waits for work and takes up to `limit` jobs; empty once stopped and drained: the thread then ends.
    func take(upTo limit: Int) -> [Job] {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !stopping { condition.wait() }
        let taken = Array(jobs.prefix(limit))
        jobs.removeFirst(taken.count)
        return taken
    }

    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// A thread calls this as it ends.
    func threadEnded() {
        condition.lock()
        running -= 1
        let waiters = running == 0 ? endWaiters : []
        if running == 0 { endWaiters = [] }
        condition.unlock()
        waiters.forEach { $0.resume() }
    }

    /// Returns once every thread has ended.
    func finished() async {
        await withCheckedContinuation { continuation in
            condition.lock()
            if running == 0 {
                condition.unlock()
                continuation.resume()
                return
            }
            endWaiters.append(continuation)
            condition.unlock()
        }
    }
}
