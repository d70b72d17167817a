import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

/// A Hummingbird router called in process: the real routes, middleware, JSON and error mapping, without a socket.
/// The history explorer runs every request of a history through these, so a history takes milliseconds and a replay
/// sees the same order of events.
struct InProcessHTTP: Sendable {
    private let respond: @Sendable (Request, ApplicationRequestContextSource) async throws -> Response
    private let logger: Logger
    /// What the request contexts name as their channel. One per history, closed with it: a channel and its pipeline
    /// hold each other until the channel is closed. NIOAsyncTestingChannel, unlike EmbeddedChannel, may be used from
    /// whatever thread a request resumes on.
    private let channel: NIOAsyncTestingChannel

    init<Context: RequestContext>(_ router: Router<Context>, channel: NIOAsyncTestingChannel) where Context.Source == ApplicationRequestContextSource {
        self.channel = channel
        let responder = router.buildResponder()
        respond = { try await responder.respond(to: $0, context: Context(source: $1)) }
        var logger = Logger(label: "iapkit.explorer")
        logger.logLevel = .critical
        self.logger = logger
    }

    /// One request as URLSession would send it; the answer as URLSession would give it.
    func send(_ request: URLRequest) async throws -> (Data, URLResponse) {
        guard let url = request.url else { throw URLError(.badURL) }
        var fields = HTTPFields()
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            if let field = HTTPField.Name(name) { fields[field] = value }
        }
        let path = url.path + (url.query.map { "?" + $0 } ?? "")
        let head = HTTPRequest(method: HTTPRequest.Method(request.httpMethod ?? "GET") ?? .get, scheme: "http", authority: "localhost",
                               path: path, headerFields: fields)
        let body = request.httpBody.map { ByteBuffer(bytes: $0) } ?? ByteBuffer()
        let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
        let response: Response
        do { response = try await respond(Request(head: head, body: RequestBody(buffer: body)), .init(channel: channel, logger: logger)) } catch let error as HTTPResponseError {
            response = try error.response(from: Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
        } catch {
            response = Response(status: .internalServerError)
        }
        let collector = Collector()
        try await response.body.write(collector)
        var headers: [String: String] = [:]
        for field in response.headers { headers[field.name.canonicalName] = field.value }
        let answer = HTTPURLResponse(url: url, statusCode: response.status.code, httpVersion: "HTTP/1.1", headerFields: headers)!
        return (Data(collector.buffer.storage.readableBytesView), answer)
    }

    /// Gathers a response body.
    private struct Collector: ResponseBodyWriter {
        final class Storage: @unchecked Sendable { var storage = ByteBuffer() }
        let buffer = Storage()
        mutating func write(_ part: ByteBuffer) async throws { buffer.storage.writeImmutableBuffer(part) }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
