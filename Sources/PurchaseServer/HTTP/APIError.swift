import AppStoreFormats
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseAPI
import PurchaseLedger

/// An error the API answers with: an HTTP status and a JSON body
/// `{"error": {"code": "…", "message": "…", "class": "final"|"operator"|"retry"}}` whose `code` is stable. It renders
/// itself, so routes just throw.
public struct APIError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let code: ErrorCode
    public let message: String
    /// What only the server's log may hold: a database's or driver's own words (SQL, table and column names, source
    /// locations). Never in the body.
    let detail: String?
    /// Answered with `Connection: close`, and the connection closed once it is written (a body refused unread).
    var closesConnection = false
    /// What the device may do about it (see `RefusalClass`).
    public var refusalClass: RefusalClass { .of(code: code, status: status.code) }

    public init(_ status: HTTPResponse.Status, code: ErrorCode, _ message: String) {
        self.init(status, code: code, message, detail: nil)
    }

    init(_ status: HTTPResponse.Status, code: ErrorCode, _ message: String, detail: String?) {
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        if let detail { context.logger.error("request failed", metadata: ["error": "\(code)", "detail": "\(detail)"]) }
        let data = try APIJSON.encode(ErrorBody(code: code, message: message, class: refusalClass))
        var headers: HTTPFields = [.contentType: "application/json"]
        if closesConnection { headers[.connection] = "close" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func badRequest(_ message: String) -> Self { .init(.badRequest, code: .badRequest, message) }
    /// Input no store can keep the same (``StorableText``): a NUL, or bytes that are not UTF-8.
    static func invalidInput(_ what: String) -> Self {
        .init(.badRequest, code: .invalidInput, "\(what) holds a NUL character or is not UTF-8")
    }
    static let unauthorized = Self(.unauthorized, code: .unauthorized, "a valid bearer token is required")
    /// A body over `limit` bytes: the connection is closed rather than the rest of it read.
    static func tooLarge(_ limit: Int) -> Self {
        var error = Self(.contentTooLarge, code: .tooLarge, "the request body is over \(limit) bytes")
        error.closesConnection = true
        return error
    }

    /// The API's answer to a ledger refusal.
    init(_ error: LedgerError) {
        let status: HTTPResponse.Status = switch error.code {
        case .transactionBoundElsewhere: .conflict
        case .orderNotFound: .notFound
        // No longer sold, for good: nothing was paid (orders and offers only), and the class stays `operator`, the
        // operator's to undo (never `final`: no paid transaction may be given up over it).
        case .productRetired: .gone
        case .orderAccountMismatch, .possessionRequired: .forbidden
        case .insufficientBalance, .idempotencyKeyReused: .conflict
        case .storage: .serviceUnavailable
        default: .unprocessableContent
        }
        if error.code == .storage {
            // The database's own words name its SQL, tables and source lines: they are the operator's, logged.
            self.init(status, code: ErrorCode(error.code), "the ledger's database failed; try again later", detail: error.message)
        } else {
            self.init(status, code: ErrorCode(error.code), error.message)
        }
    }

    /// The API's answer to a proof that did not verify: 422 with the verifier's stable code.
    init(_ error: AppStoreError) {
        self.init(error.code == .tooLarge ? .contentTooLarge : .unprocessableContent, code: ErrorCode(error.code), error.message)
    }
}
