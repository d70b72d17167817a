import AppStoreFormats
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// One log line a request — method, path, status, milliseconds, the refusal's stable code — under a request id (the
/// caller's `X-Request-Id` when it is a plain token, else a new one), answered back in `X-Request-Id` so a client's
/// report can be matched to the line. Bodies, query strings and headers are never logged: they carry tokens and signed
/// payloads.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    static var header: HTTPField.Name { RequestIds.header }

    /// A caller's id is taken when it is 1–64 characters of letters, digits, `-`, `_` and `.`.
    static func callerId(_ value: String?) -> String? {
        guard let value, (1...64).contains(value.utf8.count),
              value.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E })
        else { return nil }
        return value
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = Self.callerId(request.headers[Self.header]) ?? RequestIds.next()
        var context = context
        context.logger[metadataKey: "requestId"] = "\(id)"
        let started = ContinuousClock.now
        var response: Response
        var code: String?
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
            code = (error as? APIError)?.code.rawValue ?? "http_error"
        } catch {
            response = Response(status: .internalServerError)
            code = "internal"
            var log = logger
            log[metadataKey: "requestId"] = "\(id)"
            log.error("unexpected error", metadata: ["error": "\(String(reflecting: type(of: error)))"])
        }
        response.headers[Self.header] = id
        let level: Logger.Level = response.status.code >= 500 ? .error : .info
        // Built only when it is written: under load, at `warning`, a request pays for no line it does not log (setting
        // metadata on a text logger renders it at once).
        guard logger.logLevel <= level else { return response }
        var log = logger
        log[metadataKey: "requestId"] = "\(id)"
        let elapsed = ContinuousClock.now - started
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
            "ms": "\(Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1000 + Double(elapsed.components.seconds) * 1000)",
        ]
        if let code { metadata["error"] = "\(code)" }
        log.log(level: level, "request", metadata: metadata)
        return response
    }
}

/// New request ids in a UUID's shape: this process's random first 24 characters and a 48-bit counter
/// (`1f0c2a9e-47b1-4c3d-9a7e-0000000000a7`), as unique across replicas and restarts but without a random draw per
/// request (a UUID was ~2 % of a health check's CPU).
enum RequestIds {
    static let header = HTTPField.Name("X-Request-Id")!
    private static let prefix = String(UUID().lowercasedString.prefix(24))
    private static let counter = Counter()

    static func next() -> String {
        let hex = String(counter.next() & 0xFFFF_FFFF_FFFF, radix: 16)
        return prefix + String(repeating: "0", count: 12 - hex.count) + hex
    }

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value: UInt64 = 0

        func next() -> UInt64 {
            lock.withLock {
                value &+= 1
                return value
            }
        }
    }
}
