import AppStoreFormats
import Foundation
import Hummingbird
import NIOCore
import PurchaseAPI
import PurchaseLedger

extension Request {
    /// The body decoded as `T`, refusing more than `limit` bytes or JSON of another shape with a typed error. A body
    /// declared larger is refused before a byte of it is read.
    func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        try refuseDeclaredBody(over: limit)
        let buffer: ByteBuffer
        do { buffer = try await body.collect(upTo: limit) } catch {
            throw APIError.tooLarge(limit)
        }
        // Every string field is checked at once, keys and ids among them: what no store keeps the same never reaches one.
        let bytes = buffer.readableBytesView
        guard String(validating: bytes, as: UTF8.self) != nil, !StorableText.jsonCarriesNUL(bytes) else {
            throw APIError.invalidInput("the request body")
        }
        do { return try AppStoreJSON.decoder().decode(type, from: Data(buffer.readableBytesView)) } catch {
            throw APIError.badRequest("the request body is not JSON of the expected shape")
        }
    }

    /// 413 when `Content-Length` declares more than `limit` bytes: known from the head, so the body is never read, and
    /// the answer closes the connection (``ConnectionGuard``) instead of reading the rest.
    func refuseDeclaredBody(over limit: Int) throws {
        if let declared = headers[.contentLength].flatMap(Int.init), declared > limit { throw APIError.tooLarge(limit) }
    }
}

/// JSON responses, in the contract's conventions (`APIJSON`: dates in whole milliseconds since 1970, as Apple's APIs),
/// keys sorted: the same encoder as the error bodies and the signed entitlements.
enum JSONReply {
    static func encode(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(bytes: try APIJSON.encode(value))))
    }
}

extension Parameters {
    /// The path parameter `name`, percent-decoded: Hummingbird hands it over as the path spelled it, and an id with a
    /// space or a slash in it (an account id is any text) arrives encoded.
    func decoded(_ name: String) throws -> String {
        let raw = try require(name)
        guard raw.contains("%") else { return try InputCheck.storable(String(raw), "the path's \(name)") }
        // Percent-encoding that decodes to bytes other than UTF-8 is nil here, as a malformed escape is.
        guard let value = raw.removingPercentEncoding else { throw APIError.invalidInput("the path's \(name)") }
        return try InputCheck.storable(value, "the path's \(name)")
    }
}

/// Identifiers a request names outside its JSON body (the body is checked whole by ``Request/decodeJSON(_:limit:)``):
/// path parameters, query items, headers.
enum InputCheck {
    /// `value`, unless it holds a NUL (``StorableText``): refused with 400 `invalid_input` on either store.
    static func storable(_ value: String, _ what: String) throws -> String {
        guard !StorableText.holdsNUL(value) else { throw APIError.invalidInput(what) }
        return value
    }

    /// The query item `name` of `request`, checked as ``storable(_:_:)``.
    static func query(_ request: Request, _ name: Substring) throws -> String? {
        try request.uri.queryParameters[name].map { try storable(String($0), "the query's \(name)") }
    }
}
