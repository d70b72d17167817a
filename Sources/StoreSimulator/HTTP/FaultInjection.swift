import AppStoreFormats
import Foundation
import Hummingbird

/// Faults the simulator injects into its own endpoints, chosen per path prefix with a seeded generator so a test
/// sees the same faults on every run for the same sequence of requests.
public struct FaultPlan: Codable, Sendable, Hashable {
    /// One rule: requests whose path starts with `pathPrefix` get these faults.
    public struct Rule: Codable, Sendable, Hashable {
        public var pathPrefix: String
        /// Added latency in milliseconds (at most 30 s).
        public var latencyMilliseconds: Int?
        /// Probability (0…1) of answering with `errorStatus` instead of handling the request.
        public var errorRate: Double?
        /// The HTTP status of injected errors (500–599; default 503).
        public var errorStatus: Int?
        /// `/verifyReceipt` only: probability of answering `{"status": 21005}` (receipt server unavailable).
        public var status21005Rate: Double?
        /// Probability of dropping the connection: headers promising a body, then the connection closes.
        public var dropRate: Double?

        public init(pathPrefix: String, latencyMilliseconds: Int? = nil, errorRate: Double? = nil, errorStatus: Int? = nil,
                    status21005Rate: Double? = nil, dropRate: Double? = nil) {
            self.dropRate = dropRate
            self.pathPrefix = pathPrefix
            self.latencyMilliseconds = latencyMilliseconds
            self.errorRate = errorRate
            self.errorStatus = errorStatus
            self.status21005Rate = status21005Rate
        }
    }

    public var seed: UInt64
    public var rules: [Rule]

    public init(seed: UInt64 = 1, rules: [Rule] = []) {
        self.seed = seed
        self.rules = rules
    }
}

/// Applies the current `FaultPlan`; `POST /sim/faults` replaces it, `DELETE /sim/faults` clears it.
public final class FaultInjector: @unchecked Sendable {
    private struct Current {
        var plan = FaultPlan()
        var state: UInt64 = 1
    }
    private let lock = NSLock()
    private var current = Current()
    /// The paths of the requests to Apple's endpoints, newest last (the latest 100,000): how a test counts the calls a
    /// server made.
    private var calls: [String] = []

    public init() {}

    /// Notes one request to an Apple endpoint.
    func record(_ path: String) {
        lock.withLock {
            if calls.count >= 100_000 { calls.removeFirst(50_000) }
            calls.append(path)
        }
    }

    /// How many of the recorded requests went to a path starting with `prefix`.
    public func calls(to prefix: String) -> Int {
        lock.withLock { calls.count(where: { $0.hasPrefix(prefix) }) }
    }

    /// Forgets the recorded requests.
    public func forgetCalls() {
        lock.withLock { calls.removeAll() }
    }

    public func configure(_ plan: FaultPlan) throws {
        for rule in plan.rules {
            for rate in [rule.errorRate, rule.status21005Rate, rule.dropRate].compactMap({ $0 }) where !(0...1).contains(rate) {
                throw HTTPError(.badRequest, message: "fault rates are between 0 and 1")
            }
            if let status = rule.errorStatus, !(500...599).contains(status) { throw HTTPError(.badRequest, message: "errorStatus must be 5xx") }
            if let latency = rule.latencyMilliseconds, !(0...30_000).contains(latency) { throw HTTPError(.badRequest, message: "latency must be 0…30000 ms") }
        }
        lock.withLock { current = Current(plan: plan, state: plan.seed) }
    }

    /// What to do to one request: its rule and one draw of the seeded generator (SplitMix64).
    func decide(path: String) -> (rule: FaultPlan.Rule, draw: Double)? {
        lock.withLock {
            guard let rule = current.plan.rules.first(where: { path.hasPrefix($0.pathPrefix) }) else { return nil }
            current.state &+= 0x9E37_79B9_7F4A_7C15
            var z = current.state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return (rule, Double(z >> 11) / Double(1 << 53))
        }
    }
}

/// Middleware that applies the injector's faults before the routes see a request.
struct FaultMiddleware: RouterMiddleware {
    let injector: FaultInjector

    func handle(_ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard !path.hasPrefix("/sim/") else { return try await next(request, context) }
        injector.record(path)
        guard let (rule, draw) = injector.decide(path: path) else { return try await next(request, context) }
        if let latency = rule.latencyMilliseconds, latency > 0 { try await Task.sleep(for: .milliseconds(latency)) }
        // One draw, consecutive bands: a dropped connection, then a 5xx, then (verifyReceipt) 21005.
        let dropRate = rule.dropRate ?? 0
        if draw < dropRate {
            return Response(status: .ok, headers: [.contentType: "application/json", .contentLength: "4096"],
                            body: ResponseBody { _ in throw DroppedConnection() })
        }
        let errorRate = dropRate + (rule.errorRate ?? 0)
        if draw < errorRate {
            return Response(status: .init(code: rule.errorStatus ?? 503))
        }
        if path.hasSuffix("verifyReceipt"), draw < errorRate + (rule.status21005Rate ?? 0) {
            return try Reply.json(VerifyReceiptResponse(status: .serviceUnavailable))
        }
        return try await next(request, context)
    }
}

/// Thrown while writing a response body to make the server abandon the connection mid-response.
struct DroppedConnection: Error {}
