import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Prometheus

/// How long a connection may keep the server waiting, and how many may be open at once: `connections` in the
/// configuration (docs/CONFIGURATION.md). Without them a socket that sends nothing stayed open for ever, a declared
/// body was waited for however large, and ~1,000 idle sockets used up the process's descriptors (`/health` stopped
/// answering).
public struct ConnectionLimits: Codable, Sendable, Equatable {
    /// Seconds a connection may stay open with no request under way (before its first request, and after each
    /// answer); then it is closed.
    public var idleTimeoutSeconds: Double = 20
    /// Seconds from a request's first byte to the end of its head (request line and headers); then 408
    /// `request_timeout` and the connection is closed.
    public var headerTimeoutSeconds: Double = 10
    /// Seconds a request's body may go without progress: from its head, and again from each time at least
    /// ``bodyProgressBytes`` more of it arrived. Then 408 `request_timeout` (when nothing was answered yet) and the
    /// connection is closed. A body that keeps arriving (a receipt over EDGE) is read however long it takes, up to
    /// ``bodyMaxSeconds``; one that stalls, or is trickled slower, is cut off.
    public var bodyTimeoutSeconds: Double = 30
    /// Bytes of a body that count as progress, restarting ``bodyTimeoutSeconds``: the slowest body read is this many
    /// bytes every ``bodyTimeoutSeconds`` (16 KiB in 30 s: about 550 bytes/s, 4.4 kbit/s, a fifth of EDGE's worst).
    public var bodyProgressBytes: Int = 16 << 10
    /// Seconds from a request's head to the end of its body, in all, however steadily it arrives; then 408.
    public var bodyMaxSeconds: Double = 300
    /// Connections open at once. At the cap a new connection takes the place of the open one idle longest (no request
    /// under way: never sent a byte, or every request answered), which is closed; when every one has a request under
    /// way, the new one is answered 503 `too_many_connections` and closed at once.
    public var maxConnections: Int = 512
    /// Connections one client (an IPv4 address, an IPv6 /64) may have open at once; at it, a new one takes the place of
    /// that client's connection idle longest, or is refused (503) when none is idle. Peers listed in `trustedProxies`
    /// are exempt: behind a proxy every connection comes from it. Half the cap: one address can never hold all of it,
    /// and a proxy left out of `trustedProxies` (every connection from one address) still has room under load.
    public var maxConnectionsPerClient: Int = 256

    public init() {}

    // Every key optional: a file names only what it changes.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = ConnectionLimits()
        idleTimeoutSeconds = try c.decodeIfPresent(Double.self, forKey: .idleTimeoutSeconds) ?? d.idleTimeoutSeconds
        headerTimeoutSeconds = try c.decodeIfPresent(Double.self, forKey: .headerTimeoutSeconds) ?? d.headerTimeoutSeconds
        bodyTimeoutSeconds = try c.decodeIfPresent(Double.self, forKey: .bodyTimeoutSeconds) ?? d.bodyTimeoutSeconds
        bodyProgressBytes = try c.decodeIfPresent(Int.self, forKey: .bodyProgressBytes) ?? d.bodyProgressBytes
        bodyMaxSeconds = try c.decodeIfPresent(Double.self, forKey: .bodyMaxSeconds) ?? d.bodyMaxSeconds
        maxConnections = try c.decodeIfPresent(Int.self, forKey: .maxConnections) ?? d.maxConnections
        maxConnectionsPerClient = try c.decodeIfPresent(Int.self, forKey: .maxConnectionsPerClient) ?? d.maxConnectionsPerClient
    }

    /// Refuses limits that cannot work, naming the key.
    func validate() throws {
        for (key, seconds) in [("idleTimeoutSeconds", idleTimeoutSeconds), ("bodyMaxSeconds", bodyMaxSeconds)]
        where !(0.1...3600).contains(seconds) {
            throw ConfigurationError("connections.\(key) must be 0.1 to 3600 seconds")
        }
        // Under a second a request's head or body is cut on any hiccup of the network.
        for (key, seconds) in [("headerTimeoutSeconds", headerTimeoutSeconds), ("bodyTimeoutSeconds", bodyTimeoutSeconds)]
        where !(1...3600).contains(seconds) {
            throw ConfigurationError("connections.\(key) must be 1 to 3600 seconds")
        }
        guard (1...(16 << 20)).contains(bodyProgressBytes) else {
            throw ConfigurationError("connections.bodyProgressBytes must be 1 to 16777216")
        }
        // Each setting valid, together they may ask more of a body than a phone on a poor link sends: it would be cut.
        let rate = Double(bodyProgressBytes) / bodyTimeoutSeconds
        guard rate <= Double(Self.maxMinimumBodyRate) else {
            throw ConfigurationError("connections.bodyProgressBytes (\(bodyProgressBytes)) every connections.bodyTimeoutSeconds "
                                     + "(\(ConnectionGuard.format(bodyTimeoutSeconds))) asks at least \(Int(rate.rounded(.up))) bytes/s of "
                                     + "a body, over \(Self.maxMinimumBodyRate): slow clients would be cut; lower bodyProgressBytes "
                                     + "or raise bodyTimeoutSeconds")
        }
        // At the cap each new connection looks through the open ones (under a lock every event loop shares).
        for (key, count) in [("maxConnections", maxConnections), ("maxConnectionsPerClient", maxConnectionsPerClient)]
        where !(1...100_000).contains(count) {
            throw ConfigurationError("connections.\(key) must be 1 to 100000")
        }
    }

    /// The most, in bytes per second, that ``bodyProgressBytes`` every ``bodyTimeoutSeconds`` may ask of a body: 64 KiB/s.
    static let maxMinimumBodyRate = 64 << 10

    /// `seconds` as NIO's amount; a value no configuration passes (limits set in code are not validated) is held to
    /// 0…1 day rather than trapping.
    static func amount(_ seconds: Double) -> TimeAmount {
        .nanoseconds(Int64((seconds.isNaN ? 86_400 : min(max(seconds, 0), 86_400)) * 1_000_000_000))
    }

    /// What to tell the operator when the cap leaves too few of the process's descriptors for the rest (the ledger,
    /// calls to Apple, the listener): a cap at or over the open-file limit caps nothing, and the descriptors run out
    /// first (what made `/health` stop answering).
    func descriptorWarning() -> String? {
        var limit = rlimit()
        guard getrlimit(Self.openFiles, &limit) == 0 else { return nil }
        let available = Int(clamping: limit.rlim_cur)  // unlimited: the largest value, so no warning
        guard maxConnections + Self.descriptorReserve > available else { return nil }
        return "connections.maxConnections is \(maxConnections) but the open-file limit is \(available): keep the cap "
            + "\(Self.descriptorReserve) under it (lower the cap, or raise the limit with ulimit -n)"
    }

    /// Descriptors left to the rest of the process.
    static let descriptorReserve = 64

    #if canImport(Glibc)
    static let openFiles = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    static let openFiles = RLIMIT_NOFILE
    #endif
}

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

/// Watches one connection: the first handler of its pipeline, next to the socket.
///
/// It keeps one deadline, for whatever the server waits for from the client:
/// - nothing under way (no byte of a next request, every request answered): ``ConnectionLimits/idleTimeoutSeconds``,
///   then the connection is closed;
/// - a request's head begun (a byte arrived): ``ConnectionLimits/headerTimeoutSeconds`` from that byte, then 408;
/// - its body being read: ``ConnectionLimits/bodyTimeoutSeconds`` from the head, and again from each time
///   ``ConnectionLimits/bodyProgressBytes`` more of it arrived, but ``ConnectionLimits/bodyMaxSeconds`` from the head at
///   most; then 408 (if nothing was answered).
/// While a request the client finished sending waits for its answer, nothing is timed: that is the server's turn.
///
/// An answer saying `Connection: close` (a 413) closes the connection once written. Closing is gentle: what the
/// server has to say is written, then its side is shut, and what the client still sends is read and dropped until
/// it closes its side or a moment passes. Closing at once while the client still sends would reset the connection,
/// and a reset can lose the answer before the client reads it.
///
/// A connection over the cap (``ConnectionGate``) is answered 503 `too_many_connections` at once and closed; nothing
/// it sends reaches the routes. One evicted to make room for a newer one is closed while it has no request under way;
/// should a request have begun on it meanwhile, one whose head or body is still arriving is answered 503
/// `too_many_connections` (nothing of it was applied), and one the client finished sending (the server's turn) is
/// answered first. Either way what it was told is written before the connection closes: it holds no place under the
/// cap any more, and so may not stay open on a slow client's account.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// What the server is reading from the client.
    enum Input { case idle, head, body }
    /// What a deadline is for.
    enum Wait: String { case idle, header, body }

    /// How long a closing connection goes on reading (and dropping) what the client sends: after an answer that
    /// closes, or a timeout's 408; and after a refusal, which holds no place under the cap and so is kept shorter.
    static let linger = TimeAmount.seconds(2)
    static let refusalLinger = TimeAmount.milliseconds(250)

    let limits: ConnectionLimits
    let metrics: ServerMetrics
    /// The gate that admitted the connection, and its id there, told when the connection has no request under way.
    var admission: (gate: ConnectionGate, id: Int)?
    /// The gate that admitted or refused the connection: it bounds the closing connections that hold no place.
    var gate: ConnectionGate?
    /// Counted among the gate's lingering connections (``ConnectionGate/beginLingering()``) until it closes.
    private var lingers = false
    /// Why the connection was refused (the 503's message); nil: it was admitted.
    var refusal: String?
    private var context: ChannelHandlerContext?
    private var started = false
    private var input = Input.idle
    /// When ``input`` last changed.
    private var inputSince = NIODeadline.now()
    /// When the body being read last made progress (``ConnectionLimits/bodyProgressBytes`` arrived), and what arrived
    /// since.
    private var bodyProgressAt = NIODeadline.now()
    private var bodyBytes = 0
    /// Evicted: closed as soon as no request is under way.
    private var evicted = false
    /// Since when the gate was last told the connection has had no request under way.
    private var reportedIdle: NIODeadline?
    /// Requests whose head was read, and answers written to the end.
    private var heads = 0
    private var answered = 0
    private var answeredAt = NIODeadline.now()
    /// An answer's head is written and its end not yet.
    private var answering = false
    private(set) var closing = false
    /// A refused connection closes when the client's request has been read (so that no unread byte turns the close
    /// into a reset).
    private var closeOnRead = false
    /// What the server waits for from the client, and until when; nil while it is the server's turn.
    private var due: (wait: Wait, deadline: NIODeadline)?
    /// The one timer (the linger's, once closing) and when it fires.
    private var timer: Scheduled<Void>?
    private var timerAt: NIODeadline?

    init(limits: ConnectionLimits, metrics: ServerMetrics) {
        self.limits = limits
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        endLingering()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        cancelTimer()
        endLingering()
        context.fireChannelInactive()
    }

    private func endLingering() {
        guard lingers else { return }
        lingers = false
        gate?.endLingering()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if closing {
            if closeOnRead { context.close(promise: nil) }
            return
        }
        switch input {
        case .idle:
            input = .head
            inputSince = .now()
            rearm()
        case .body:
            bodyBytes += unwrapInboundIn(data).readableBytes
            if bodyBytes >= limits.bodyProgressBytes {
                // Progress: the deadline moves on (``rearm()`` only keeps the timer, which finds the later deadline).
                bodyBytes = 0
                bodyProgressAt = .now()
                rearm()
            }
        case .head:
            break
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if closing, let event = event as? ChannelEvent, event == .inputClosed {
            // The client closed its side after the server's: nothing is left to say.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func start() {
        guard !started, let context else { return }
        started = true
        if let refusal {
            guard gate?.beginLingering() == true else {
                // Too many refused or evicted connections already linger: no answer, no descriptor held.
                closing = true
                context.close(promise: nil)
                return
            }
            lingers = true
            closeGently(with: Self.answer(.serviceUnavailable, code: "too_many_connections", refusal,
                                          extraHeaders: "Retry-After: 1\r\n", allocator: context.channel.allocator),
                        linger: Self.refusalLinger, closeOnRead: true)
            return
        }
        answeredAt = .now()
        rearm()
    }

    // MARK: What the HTTP side saw (``Messages``)

    func requestHead() {
        heads += 1
        input = .body
        inputSince = .now()
        bodyProgressAt = inputSince
        bodyBytes = 0
        rearm()
    }

    func requestEnd() {
        input = .idle
        inputSince = .now()
        rearm()
    }

    func answerHead() { answering = true }

    func answerEnd() {
        answered += 1
        answering = false
        answeredAt = .now()
        rearm()
    }

    /// A newer connection took this one's place (``ConnectionGate``): closed once it is the client's turn (now, unless
    /// the server owes an answer to a request the client finished sending); a request whose head or body is still
    /// arriving is answered 503 (``closeEvicted(_:)``).
    func evict() {
        evicted = true
        rearm()
    }

    // MARK: The deadline

    /// Sets what is due now. The timer is moved only to fire earlier; one that fires early finds the later deadline
    /// and waits again. So a request costs about one timer, not one at each step.
    private func rearm() {
        guard started, !closing, let context else { return }
        // Requests before the one being read that still wait for their answer: the server's turn, nothing is timed.
        let earlierUnanswered = (input == .body ? heads - 1 : heads) - answered
        guard earlierUnanswered <= 0 else {
            due = nil
            reportIdle(nil)
            return
        }
        let since = max(inputSince, answeredAt)
        let (wait, deadline): (Wait, NIODeadline) = switch input {
        case .idle: (.idle, since + ConnectionLimits.amount(limits.idleTimeoutSeconds))
        case .head: (.header, since + ConnectionLimits.amount(limits.headerTimeoutSeconds))
        case .body: (.body, min(max(bodyProgressAt, answeredAt) + ConnectionLimits.amount(limits.bodyTimeoutSeconds),
                                since + ConnectionLimits.amount(limits.bodyMaxSeconds)))
        }
        reportIdle(wait == .idle ? since : nil)
        // Not in the middle of an answer: one whose end is still to be written is finished first.
        if evicted && !answering {
            closeEvicted(wait)
            return
        }
        due = (wait, deadline)
        if let timerAt, timerAt <= deadline { return }
        timer?.cancel()
        schedule(at: deadline, on: context)
    }

    /// Tells the gate since when the connection has had no request under way (nil: one is), when that changed.
    private func reportIdle(_ since: NIODeadline?) {
        guard since != reportedIdle, let admission else { return }
        reportedIdle = since
        admission.gate.setIdle(admission.id, since: since)
    }

    private func schedule(at deadline: NIODeadline, on context: ChannelHandlerContext) {
        timerAt = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in timerFired() }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerAt = nil
        due = nil
    }

    private func timerFired() {
        timer = nil
        timerAt = nil
        guard !closing, let context, let due else { return }
        if NIODeadline.now() < due.deadline {
            schedule(at: due.deadline, on: context)
        } else {
            expired(due.wait)
        }
    }

    /// Closes an evicted connection, now the client's turn: with nothing to say when no request is under way (or its
    /// answer is written), with 503 `too_many_connections` when a request's head or body is still arriving and nothing
    /// was answered (as a timeout would: nothing of it was applied). Gently, so what it was told (that answer, or the
    /// last one, possibly still queued) is written first; the client told to try again elsewhere, or later.
    private func closeEvicted(_ wait: Wait) {
        guard let context else { return }
        metrics.connectionClosed("evicted")
        let unanswered = wait == .header || (wait == .body && answered < heads)
        let answer = unanswered ? Self.answer(.serviceUnavailable, code: "too_many_connections",
                                              "the connection was closed to make room for a newer one; try again",
                                              extraHeaders: "Retry-After: 1\r\n", allocator: context.channel.allocator) : nil
        // It holds no place under the cap: it lingers only while few others do, otherwise closes once all is written.
        lingers = gate?.beginLingering() ?? false
        closeGently(with: answer, linger: Self.linger, closeOnRead: false, closeOnceWritten: !lingers)
    }

    private func expired(_ wait: Wait) {
        guard let context else { return }
        metrics.connectionClosed("\(wait.rawValue)_timeout")
        switch wait {
        case .idle:
            // Nothing under way: nothing to say, nothing to wait for; but the last answer may still be on its way.
            closeGently(with: nil, linger: Self.linger, closeOnRead: false)
        case .header, .body:
            // A body whose request was already answered (a 401 before it was read) only closes.
            let unanswered = wait == .header || (answered < heads && !answering)
            let message = if wait == .header {
                "the request did not send its headers within \(Self.format(limits.headerTimeoutSeconds)) s"
            } else if NIODeadline.now() >= max(inputSince, answeredAt) + ConnectionLimits.amount(limits.bodyMaxSeconds) {
                "the request did not send its body within \(Self.format(limits.bodyMaxSeconds)) s"
            } else {
                "the request's body stalled: less than \(limits.bodyProgressBytes) bytes of it in \(Self.format(limits.bodyTimeoutSeconds)) s"
            }
            closeGently(with: unanswered ? Self.answer(.requestTimeout, code: "request_timeout", message,
                                                       allocator: context.channel.allocator) : nil,
                        linger: Self.linger, closeOnRead: false)
        }
    }

    /// Writes `bytes` (when given) after whatever is queued, shuts the server's side, and drops what the client still
    /// sends until it closes its side (or `linger` passes; or, with `closeOnRead`, the next read; or, with
    /// `closeOnceWritten`, as soon as everything is written and the side shut).
    ///
    /// Never a full close while writes are queued: that would fail them, and an answer the server already wrote (to a
    /// request it applied) would never reach the client.
    func closeGently(with bytes: ByteBuffer? = nil, linger: TimeAmount = linger, closeOnRead: Bool = false,
                     closeOnceWritten: Bool = false) {
        guard !closing, let context else { return }
        closing = true
        cancelTimer()
        self.closeOnRead = closeOnRead
        if let bytes { context.write(NIOAny(bytes), promise: nil) }
        context.flush()
        // NIO shuts the output once what is pending is written.
        if closeOnceWritten {
            let shut = context.eventLoop.makePromise(of: Void.self)
            context.close(mode: .output, promise: shut)
            shut.futureResult.assumeIsolated().whenComplete { [self] _ in self.context?.close(promise: nil) }
        } else {
            context.close(mode: .output, promise: nil)
        }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: linger) { [self] in
            timer = nil
            self.context?.close(promise: nil)
        }
        timerAt = nil
    }

    /// A whole HTTP/1.1 answer with the API's error body, written below the HTTP encoder.
    static func answer(_ status: HTTPResponseStatus, code: String, _ message: String, extraHeaders: String = "",
                       allocator: ByteBufferAllocator) -> ByteBuffer {
        let body = (try? JSONEncoder().encode(APIError.ErrorBody(error: .init(
            code: code, message: message, class: .of(code: code, status: .init(code: Int(status.code))))))) ?? Data()
        var buffer = allocator.buffer(capacity: 160 + body.count)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\nContent-Type: application/json\r\n"
                           + "Content-Length: \(body.count)\r\nConnection: close\r\n\(extraHeaders)\r\n")
        buffer.writeBytes(body)
        return buffer
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }

    /// The HTTP side: after the decoder, where requests and answers are whole parts.
    final class Messages: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        typealias OutboundIn = HTTPServerResponsePart
        typealias OutboundOut = HTTPServerResponsePart

        let connection: ConnectionGuard
        private var closeAfterAnswer = false

        init(_ connection: ConnectionGuard) { self.connection = connection }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            // A closing connection drops what the decoder still held.
            guard !connection.closing else { return }
            switch unwrapInboundIn(data) {
            case .head: connection.requestHead()
            case .body: break
            case .end: connection.requestEnd()
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            switch unwrapOutboundIn(data) {
            case .head(let head):
                if head.status.code >= 200 {
                    closeAfterAnswer = head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "close" }
                    connection.answerHead()
                }
                context.write(data, promise: promise)
            case .body:
                context.write(data, promise: promise)
            case .end:
                context.write(data, promise: promise)
                connection.answerEnd()
                if closeAfterAnswer {
                    // Hummingbird honours a request's `Connection: close`, not an answer's: without this it would go on
                    // reading (and waiting for) the body the answer refused.
                    context.flush()
                    connection.closeGently()
                }
            }
        }
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}

@available(*, unavailable)
extension ConnectionGuard.Messages: Sendable {}

/// Refuses at once, from its `Content-Length` alone and before anything else (the bearer token too), a body larger than
/// any route reads: 413 `too_large`, and the connection is closed rather than the body read. A route's own smaller
/// limit is checked the same way when it reads its body (`decodeJSON(_:limit:)`).
struct DeclaredBodyLimitMiddleware: RouterMiddleware {
    let limit: Int

    func handle(_ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response) async throws -> Response {
        try request.refuseDeclaredBody(over: limit)
        return try await next(request, context)
    }
}

extension ServerMetrics {
    static var connectionsClosed: MetricNameDescriptor {
        MetricNameDescriptor(namespace: "iapkit", metricName: "connections_closed", unitName: "total",
                             helpText: "Connections the server closed on its limits: refused over a cap, evicted for a newer one, or timed out (idle, header, body)")
    }
    static var connectionsOpen: MetricNameDescriptor {
        // No unit: the name stays `iapkit_connections_open` (empty parts are left out).
        MetricNameDescriptor(namespace: "iapkit", metricName: "connections_open", unitName: "", helpText: "HTTP connections open now")
    }

    /// A connection closed on a limit: `refused`, `client_refused`, `evicted`, `idle_timeout`, `header_timeout`,
    /// `body_timeout`.
    func connectionClosed(_ reason: String) {
        registry.makeCounter(descriptor: Self.connectionsClosed, labels: [("reason", reason)]).increment()
    }

    /// One connection more (`+1`) or less (`-1`) open.
    func openConnections(_ change: Int) {
        let gauge = registry.makeGauge(descriptor: Self.connectionsOpen)
        if change > 0 { gauge.increment(by: Double(change)) } else { gauge.decrement(by: Double(-change)) }
    }
}
