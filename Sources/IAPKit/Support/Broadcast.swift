import Foundation

/// One value stream for any number of subscribers: each `subscribe()` gets its own `AsyncStream`, starting with the
/// current value (when there is one) and then every new one.
///
/// A single `AsyncStream` hands each element to one consumer only, so a second `for await` (a view model beside a
/// logger) silently steals elements, and a late subscriber starts with whatever stale elements were buffered instead
/// of the state now. `Mutex` would do, but needs iOS 18 / macOS 15; the SDK supports iOS 17, hence the lock.
final class Broadcast<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<Element>.Continuation] = [:]
    private var current: Element?
    private let buffer: Int

    init(buffer: Int) { self.buffer = buffer }

    /// A new subscription: the current value first, if any.
    func subscribe() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(buffer))
        let id = UUID()
        lock.lock()
        if let current { continuation.yield(current) }
        subscribers[id] = continuation
        lock.unlock()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.lock()
            self.subscribers[id] = nil
            self.lock.unlock()
        }
        return stream
    }

    /// Makes `value` current and sends it to every subscriber.
    func send(_ value: Element) {
        lock.lock()
        current = value
        let targets = Array(subscribers.values)
        lock.unlock()
        for continuation in targets { continuation.yield(value) }
    }

    /// Forgets the current value (a late subscriber then starts with the next one).
    func reset() {
        lock.lock()
        current = nil
        lock.unlock()
    }

    var value: Element? {
        lock.lock()
        defer { lock.unlock() }
        return current
    }
}
