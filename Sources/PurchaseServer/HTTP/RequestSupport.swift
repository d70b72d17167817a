import AppStoreFormats
import Foundation
import Hummingbird
import NIOCore

extension Request {
    /// The body decoded as `T`, refusing more than `limit` bytes or JSON of another shape with a typed error.
    func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        let buffer: ByteBuffer
        do { buffer = try await body.collect(upTo: limit) } catch {
            throw APIError(.contentTooLarge, code: "too_large", "the request body is over \(limit) bytes")
        }
        do { return try AppStoreJSON.decoder().decode(type, from: Data(buffer.readableBytesView)) } catch {
            throw APIError.badRequest("the request body is not JSON of the expected shape")
        }
    }
}

/// JSON responses, in the conventions of Apple's APIs that the simulator answers with too (`AppStoreJSON`: dates in
/// whole milliseconds since 1970), keys sorted.
enum JSONReply {
    static func encode(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(bytes: try AppStoreJSON.encoder(sortedKeys: true).encode(value))))
    }
}

extension Parameters {
    /// The path parameter `name`, percent-decoded: Hummingbird hands it over as the path spelled it, and an id with a
    /// space or a slash in it (an account id is any text) arrives encoded.
    func decoded(_ name: String) throws -> String {
        guard let value = try require(name).removingPercentEncoding else {
            throw APIError.badRequest("the path's \(name) is not valid percent-encoding")
        }
        return value
    }
}
