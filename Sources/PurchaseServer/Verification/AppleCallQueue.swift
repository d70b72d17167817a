import Foundation
import Logging
import ServiceLifecycle

/// Calls to Apple that follow an answer (Finish Transaction, Set App Account Token): a request queues them and goes on,
/// and ``AppleCallService`` makes them inside the application's service group, so none outlives the server or runs
/// where nothing waits for it. Best effort, as the calls themselves are: a call the queue cannot take is counted failed.
///
/// Copies of ``PurchaseServices`` share one queue; one ``AppleCallService`` drains it.
final class AppleCallQueue: @unchecked Sendable {
    typealias Call = @Sendable () async -> Void

    /// Calls waiting at most; past it a call is refused (Apple unreachable for long, or no service draining).
    static let capacity = 10_000

    private let lock = NSLock()
    private var calls: [Call] = []
    private var first = 0
    /// One per running ``run()``: rung when a call is queued.
    private var doorbells: [UUID: AsyncStream<Void>.Continuation] = [:]

    /// Set once the draining service has stopped: nothing would make a call queued later.
    private var closed = false

    /// Queues `call`; false when the queue is full or closed (the call is dropped: its caller counts it failed).
    @discardableResult
    func enqueue(_ call: @escaping Call) -> Bool {
        let bells: [AsyncStream<Void>.Continuation]? = lock.withLock {
            guard !closed, calls.count - first < Self.capacity else { return nil }
            calls.append(call)
            return Array(doorbells.values)
        }
        guard let bells else { return false }
        for bell in bells { bell.yield() }
        return true
    }

    private func next() -> Call? {
        lock.withLock {
            guard first < calls.count else { return nil }
            let call = calls[first]
            first += 1
            // Compacted now and then rather than on every take, which would move the whole array each time.
            if first > 64, first * 2 > calls.count {
                calls.removeFirst(first)
                first = 0
            }
            return call
        }
    }

    /// Makes the calls queued now, one after another, until none is left or the task is cancelled.
    private func drain() async {
        while !Task.isCancelled, let call = next() { await call() }
    }

    /// Makes the calls as they are queued, `workers` at a time (one call may take most of a minute while Apple times out,
    /// and purchases do not wait for it), until a graceful shutdown or cancellation. On a graceful shutdown what is queued
    /// is still made for up to `grace`; then the calls under way are cancelled and the rest dropped, and the queue closes.
    /// Best effort, as the calls themselves are: a device finishes its own transactions, and the next upload of a series
    /// without a token sets it again — but a server must stop when asked.
    func run(workers: Int = 8, grace: Duration = .seconds(10)) async {
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<workers { group.addTask { await self.work(); return true } }
            group.addTask {
                // The deadline: `grace` after the shutdown begins. Cancelled (and so quiet) when every worker ended first.
                do {
                    try await gracefulShutdown()
                    try await Task.sleep(for: grace)
                } catch { return false }
                return false
            }
            var working = workers
            while let workerEnded = await group.next() {
                if workerEnded { working -= 1 }
                if !workerEnded || working == 0 { group.cancelAll() }
            }
        }
        lock.withLock {
            closed = true
            calls.removeAll()
            first = 0
        }
    }

    /// One worker: rung by every call queued, it takes calls until the shutdown begins, then what is left.
    private func work() async {
        let (bell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        lock.withLock { doorbells[id] = ring }
        defer { _ = lock.withLock { doorbells.removeValue(forKey: id) } }
        await drain()
        for await _ in bell.cancelOnGracefulShutdown() { await drain() }
        await drain()
    }
}

/// Drains the server's `AppleCallQueue` (Finish Transaction, Set App Account Token after an answer) for as long as
/// the service group runs.
public struct AppleCallService: Service {
    let queue: AppleCallQueue

    public init(services: PurchaseServices) { queue = services.appleCalls }

    public func run() async throws { await queue.run() }
}
