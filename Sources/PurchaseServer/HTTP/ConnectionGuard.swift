import Foundation
import NIOCore
import NIOHTTP1
import PurchaseAPI

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
            closeGently(with: Self.answer(.serviceUnavailable, code: .tooManyConnections, refusal,
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
        let answer = unanswered ? Self.answer(.serviceUnavailable, code: .tooManyConnections,
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
            closeGently(with: unanswered ? Self.answer(.requestTimeout, code: .requestTimeout, message,
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
    static func answer(_ status: HTTPResponseStatus, code: ErrorCode, _ message: String, extraHeaders: String = "",
                       allocator: ByteBufferAllocator) -> ByteBuffer {
        let body = (try? APIJSON.encode(ErrorBody(code: code, message: message, class: .of(code: code, status: Int(status.code))))) ?? []
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
