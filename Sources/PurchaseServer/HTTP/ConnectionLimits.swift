import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Hummingbird
import NIOCore
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

/// Refuses at once, from its `Content-Length` alone and before anything else (the bearer token too), a body larger than
/// any route reads: 413 `too_large`, and the connection is closed rather than the body read. A route's own smaller
/// limit is checked the same way when it reads its body (`decodeJSON(_:limit:)`).
struct DeclaredBodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    let limit: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
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
