import AppStoreFormats
import Foundation
import Hummingbird

/// Largest request body the simulator reads.
let maxRequestBody = 1 << 20

extension Request {
    /// The body as bytes, refusing more than `limit`.
    func bytes(limit: Int = maxRequestBody) async throws -> [UInt8] {
        Array(try await body.collect(upTo: limit).readableBytesView)
    }

    /// The body decoded as `T` with App Store JSON conventions; a typed 400 otherwise.
    func decode<T: Decodable>(_ type: T.Type) async throws -> T {
        guard let value = try await decodeIfPresent(type) else {
            throw HTTPError(.badRequest, message: "request body is not valid JSON of the expected shape")
        }
        return value
    }

    /// As ``decode(_:)``, or nil for an empty body.
    func decodeIfPresent<T: Decodable>(_ type: T.Type) async throws -> T? {
        let bytes = try await bytes()
        guard !bytes.isEmpty else { return nil }
        do { return try AppStoreJSON.decoder().decode(type, from: Data(bytes)) } catch {
            throw HTTPError(.badRequest, message: "request body is not valid JSON of the expected shape")
        }
    }
}

/// The one error-to-response mapping of what the simulator serves as Apple's APIs (`/inApps`, `/advancedCommerce`):
/// a request the routes could not read (a body of another shape, a query value out of place) is Apple's general bad
/// request (4000000), anything else that failed Apple's general internal error (5000000) — in Apple's error body,
/// which Apple's clients parse. Routes answer Apple's specific codes themselves; the device routes (`/sim`) keep
/// Hummingbird's error body with its message.
struct AppleErrorMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: BasicRequestContext, next: (Request, BasicRequestContext) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard path.hasPrefix("/inApps/") || path.hasPrefix("/advancedCommerce/") else { return try await next(request, context) }
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .badRequest {
            return try Reply.apiError(.generalBadRequest, error.body ?? "Invalid request.")
        } catch let error as HTTPError where error.status.code < 500 {
            throw error
        } catch {
            return try Reply.apiError(.generalInternal, "An unknown error occurred.")
        }
    }
}

/// Builds responses the way Apple's clients expect them.
enum Reply {
    /// JSON with `Content-Type: application/json` exactly (Apple's Python client compares it for equality).
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try AppStoreJSON.encoder().encode(value)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// An empty success.
    static func empty(_ status: HTTPResponse.Status = .ok) -> Response { Response(status: status) }

    /// Raw bytes with a content type.
    static func bytes(_ bytes: [UInt8], contentType: String) -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A Server API error: Apple's body, and the HTTP status its code begins with.
    static func apiError(_ code: APIErrorCode, _ message: String) throws -> Response {
        try json(APIErrorBody(code, message), status: .init(code: code.rawValue / 10_000))
    }
}
