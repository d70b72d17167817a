import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// How Apple's servers answer the purchase server's calls (Server API, verifyReceipt) in a history.
public enum AppleFault: String, CaseIterable, Sendable, Codable {
    /// Every call answered.
    case up
    /// 503 Service Unavailable, as Apple's edge answers during an outage.
    case down
    /// 500, Apple's `GeneralInternalError`.
    case serverError
    /// The next answer comes after the purchase server's timeout (its retry is answered in time), then Apple is up.
    case slow
    /// verifyReceipt answers `{"status": 21005}` (the receipt server is temporarily unavailable); the Server API is up.
    case receiptUnavailable
}

/// Apple's side over real HTTP on loopback: one listener for the whole process, `/h/<history>/<Apple's path>` forwarded
/// to that history's in-process simulator, with the history's fault applied first. The purchase server reaches Apple
/// through `AppStoreClient` and AsyncHTTPClient exactly as it reaches Apple in production.
actor AppleSwitchboard {
    static let shared = AppleSwitchboard()

    /// How long a slow answer takes; the explorer's server gives up on an attempt sooner (``HistoryRun/applePolicy``).
    static let slowAnswer: Duration = .milliseconds(1_500)

    private final class Line: Sendable {
        let simulator: InProcessHTTP
        let fault: Locked<AppleFault>
        init(simulator: InProcessHTTP, fault: Locked<AppleFault>) {
            self.simulator = simulator
            self.fault = fault
        }
    }

    private let lines = Locked<[String: Line]>([:])
    private var port: Int?
    private var starting: Task<Int, any Error>?

    /// The listener's base URL for `history`, its line connected to `simulator` with `fault` deciding the answers.
    func connect(_ history: String, to simulator: InProcessHTTP, fault: Locked<AppleFault>) async throws -> String {
        lines.update { $0[history] = Line(simulator: simulator, fault: fault) }
        return "http://127.0.0.1:\(try await listening())/h/\(history)"
    }

    nonisolated func disconnect(_ history: String) { lines.update { $0[history] = nil } }

    private func listening() async throws -> Int {
        if let port { return port }
        if let starting { return try await starting.value }
        let lines = lines
        let task = Task<Int, any Error> {
            let (ports, continuation) = AsyncStream<Int>.makeStream()
            var logger = Logger(label: "iapkit.explorer.apple")
            logger.logLevel = .critical
            let app = Application(responder: CallbackResponder<BasicRequestContext> { request, _ in try await Self.answer(request, lines: lines) },
                                  configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "explorer-apple"),
                                  onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
            // The listener lives as long as the process: every history of a campaign shares it.
            Task.detached { try await app.runService(gracefulShutdownSignals: []) }
            for await port in ports { return port }
            throw CancellationError()
        }
        starting = task
        let port = try await task.value
        self.port = port
        return port
    }

    private static func answer(_ request: Request, lines: Locked<[String: Line]>) async throws -> Response {
        let parts = request.uri.path.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count == 3, parts[0] == "h", let line = lines.value[String(parts[1])] else { return Response(status: .notFound) }
        switch line.fault.value {
        case .up: break
        case .receiptUnavailable:
            if parts[2].hasSuffix("verifyReceipt") {
                return Response(status: .ok, headers: [.contentType: "application/json"],
                                body: .init(byteBuffer: ByteBuffer(string: #"{"status":21005,"is-retryable":true}"#)))
            }
        case .down: return Response(status: .serviceUnavailable)
        case .serverError: return Response(status: .internalServerError)
        case .slow:
            // One slow answer: a timeout costs the history real time, and normal answers of a debug build on a loaded
            // machine need the timeout's margin.
            line.fault.value = .up
            try await Task.sleep(for: slowAnswer)
        }
        var forwarded = URLRequest(url: URL(string: "http://apple/\(parts[2])" + (request.uri.query.map { "?" + $0 } ?? ""))!)
        forwarded.httpMethod = request.method.rawValue
        for field in request.headers { forwarded.setValue(field.value, forHTTPHeaderField: field.name.canonicalName) }
        let body = try await request.body.collect(upTo: 1 << 20)
        if body.readableBytes > 0 { forwarded.httpBody = Data(body.readableBytesView) }
        let (data, response) = try await line.simulator.send(forwarded)
        let http = response as? HTTPURLResponse
        var headers = HTTPFields()
        for (name, value) in http?.allHeaderFields ?? [:] {
            guard let text = name as? String, let field = HTTPField.Name(text), field != HTTPField.Name.contentLength, let value = value as? String else { continue }
            headers[field] = value
        }
        return Response(status: .init(code: http?.statusCode ?? 500), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
