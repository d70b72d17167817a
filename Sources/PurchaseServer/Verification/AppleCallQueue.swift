import Foundation
import Logging
import ServiceLifecycle

/// Calls to Apple that follow an answer (Finish Transaction, Set App Account Token): a request queues them and goes on,
/// and ``AppleCallService`` makes them inside the application's service group, so none outlives the server or runs
/// where nothing waits for it. Best effort, as the calls themselves are: a call the queue cannot take is counted failed.
///
/// Copies of ``PurchaseServices`` share one queue, and any number of services may drain it (each takes whole calls).
final class AppleCallQueue: @unchecked Sendable {
    typealias Call = @Sendable () async -> Void

    /// Calls waiting at most; past it a call is refused (Apple unreachable for long, or no service draining).
    static let capacity = 10_000

    private let lock = NSLock()
    private var calls: [Call] = []
    private var first = 0
    /// One per running ``run()``: rung when a call is queued.
    private var doorbells: [UUID: AsyncStream<Void>.Continuation] = [:]

    /// Queues `call`; false when the queue is full (the call is dropped).
    @discardableResult
    func enqueue(_ call: @escaping Call) -> Bool {
        let bells: [AsyncStream<Void>.Continuation]? = lock.withLock {
            guard calls.count - first < Self.capacity else { return nil }
            calls.append(call)
            return Array(doorbells.values)
        }
        guard let bells else { return false }
        for bell in bells { bell.yield() }
        return true
    }

    /// Calls queued and not yet taken.
    var waiting: Int { lock.withLock { calls.count - first } }

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

    /// Makes the calls queued now, one after another; for a router served without ``AppleCallService``.
    func drain() async {
        while let call = next() { await call() }
    }

    /// Makes the calls as they are queued until a graceful shutdown or cancellation; what is queued then is made first
    /// on a graceful shutdown (each call is bounded by the Server API's retry policy), left on cancellation.
    func run() async {
        let (bell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        lock.withLock { doorbells[id] = ring }
        defer { _ = lock.withLock { doorbells.removeValue(forKey: id) } }
        await drain()
        for await _ in bell.cancelOnGracefulShutdown() { await drain() }
        if !Task.isCancelled { await drain() }
    }
}

/// Drains the server's ``AppleCallQueue`` (Finish Transaction, Set App Account Token after an answer) for as long as
/// the service group runs.
public struct AppleCallService: Service {
    let queue: AppleCallQueue

    public init(services: PurchaseServices) { queue = services.appleCalls }

    public func run() async throws { await queue.run() }
}
