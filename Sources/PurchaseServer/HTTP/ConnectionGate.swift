import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The open connections, admitted up to the cap (and up to the per-client cap). Shared by every event loop of one
/// server.
///
/// At a cap a new connection is not simply refused: the open connection idle longest (in all, or that client's) is
/// closed and the new one takes its place. So sockets that send nothing, however many, cannot keep anyone else out;
/// only connections with a request under way can fill the cap, and one client can hold at most its share of them.
final class ConnectionGate: Sendable {
    let limit: Int
    let perClient: Int
    let proxies: TrustedProxies

    /// One admitted connection: its client (nil: not limited per client), since when it has had no request under way
    /// (nil: one is), and how to close it.
    private struct Entry {
        var client: String?
        var idleSince: NIODeadline?
        let evict: @Sendable () -> Void
    }

    private struct State {
        var next = 0
        var entries: [Int: Entry] = [:]
        var byClient: [String: Set<Int>] = [:]

        /// Of `ids`, the connection idle longest.
        func longestIdle(_ ids: some Sequence<Int>) -> Int? {
            var best: (id: Int, since: NIODeadline)?
            for id in ids {
                guard let since = entries[id]?.idleSince else { continue }
                if best == nil || since < best!.since { best = (id, since) }
            }
            return best?.id
        }

        mutating func remove(_ id: Int) -> Entry? {
            guard let entry = entries.removeValue(forKey: id) else { return nil }
            if let client = entry.client {
                byClient[client]?.remove(id)
                if byClient[client]?.isEmpty == true { byClient[client] = nil }
            }
            return entry
        }
    }

    private let state = NIOLockedValueBox(State())
    /// Connections closing that hold no place under the cap (refused over it, or evicted), lingering a moment so that
    /// what they were told reaches the client.
    private let lingering = NIOLockedValueBox(0)
    /// The most that may linger at once: past it, a refused connection is closed at once without an answer, and an
    /// evicted one as soon as what it was told is written. So connections at the cap cannot take descriptors unbounded.
    static let maxLingering = 64

    enum Admission: Equatable {
        /// Admitted as `id` (for ``setIdle(_:since:)`` and ``release(_:)``); `evicted`: another connection was closed
        /// to make room.
        case admitted(id: Int, evicted: Bool)
        /// Over the cap (`perClient`: the client's), every connection there busy.
        case refused(perClient: Bool)
    }

    init(limit: Int, perClient: Int, proxies: TrustedProxies) {
        self.limit = limit
        self.perClient = perClient
        self.proxies = proxies
    }

    /// One more connection from `peer` (its address), idle from now; `evict` closes it should a newer one need its
    /// place.
    func admit(peer: String?, evict: @escaping @Sendable () -> Void) -> Admission {
        // A trusted proxy speaks for many clients: only the cap on all connections applies to it.
        let client = peer.flatMap { proxies.contains($0) ? nil : ClientAddress.bucket(forClient: $0) }
        let (admission, victim) = state.withLockedValue { state -> (Admission, Entry?) in
            var victim: Int?
            if let client, let theirs = state.byClient[client], theirs.count >= perClient {
                // The client's own idle connection makes room: its place under the cap is taken by the same client.
                guard let oldest = state.longestIdle(theirs) else { return (.refused(perClient: true), nil) }
                victim = oldest
            } else if state.entries.count >= limit {
                guard let oldest = state.longestIdle(state.entries.keys) else { return (.refused(perClient: false), nil) }
                victim = oldest
            }
            let evicted = victim.flatMap { state.remove($0) }
            let id = state.next
            state.next += 1
            state.entries[id] = Entry(client: client, idleSince: .now(), evict: evict)
            if let client { state.byClient[client, default: []].insert(id) }
            return (.admitted(id: id, evicted: evicted != nil), evicted)
        }
        // Outside the lock: it only schedules the close on the victim's event loop.
        victim?.evict()
        return admission
    }

    /// Connection `id` has had no request under way since `since` (nil: it has one now).
    func setIdle(_ id: Int, since: NIODeadline?) {
        state.withLockedValue { $0.entries[id]?.idleSince = since }
    }

    /// Connection `id` closed (nothing, if it was evicted: its place went to the one that evicted it).
    func release(_ id: Int) { _ = state.withLockedValue { $0.remove(id) } }

    /// One more connection lingering while it closes, holding no place (false: ``maxLingering`` already do; it must
    /// close without lingering). ``endLingering()`` when it closed.
    func beginLingering() -> Bool {
        lingering.withLockedValue { count in
            guard count < Self.maxLingering else { return false }
            count += 1
            return true
        }
    }

    func endLingering() { lingering.withLockedValue { $0 -= 1 } }
}

/// Hummingbird's HTTP/1 child channel, each connection admitted by a ``ConnectionGate`` and watched by a
/// ``ConnectionGuard``.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let http1: HTTP1Channel
    let limits: ConnectionLimits
    let gate: ConnectionGate
    let metrics: ServerMetrics

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let (limits, gate, metrics) = (limits, gate, metrics)
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let watcher = ConnectionGuard(limits: limits, metrics: metrics)
            watcher.gate = gate
            let bound = NIOLoopBound(watcher, eventLoop: channel.eventLoop)
            let loop = channel.eventLoop
            switch gate.admit(peer: channel.remoteAddress?.ipAddress, evict: { loop.execute { bound.value.evict() } }) {
            case .admitted(let id, _):
                watcher.admission = (gate, id)
                metrics.openConnections(+1)
                channel.closeFuture.whenComplete { _ in
                    gate.release(id)
                    metrics.openConnections(-1)
                }
            case .refused(let perClient):
                watcher.refusal = perClient
                    ? "this client has \(limits.maxConnectionsPerClient) connections open, its most; try again shortly"
                    : "the server has \(limits.maxConnections) connections open, its most; try again shortly"
                metrics.connectionClosed(perClient ? "client_refused" : "refused")
            }
            // Before the HTTP decoder, to see a request's first byte and to answer refusals and timeouts itself; after
            // it, to see where each request and answer begins and ends.
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(watcher, position: .first)
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(ConnectionGuard.Messages(watcher), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with the connection limits: timeouts, the caps on open connections (`proxies` exempt from the
    /// per-client one).
    static func guardedHTTP1(_ limits: ConnectionLimits, trustedProxies proxies: TrustedProxies = .none,
                             metrics: ServerMetrics) -> HTTPServerBuilder {
        let gate = ConnectionGate(limit: limits.maxConnections, perClient: limits.maxConnectionsPerClient, proxies: proxies)
        return .init { responder in
            GuardedHTTP1Channel(http1: HTTP1Channel(responder: responder), limits: limits, gate: gate, metrics: metrics)
        }
    }
}
