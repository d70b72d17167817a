import AppStoreFormats
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseLedger

/// What a refusal lets a device do with a paid transaction. Only `final` lets it finish one that was not granted:
/// finishing on a refusal the operator can fix (a bad deploy, a policy) would lose every purchase made meanwhile.
public enum RefusalClass: String, Sendable, Codable {
    /// No retry can change it: a forged proof, another account's transaction.
    case final
    /// Configuration or policy the operator can fix: the device keeps the transaction and retries with backoff.
    case `operator`
    /// Transient (storage, Apple unavailable, 5xx): retry.
    case retry

    /// Only what a genuine payment cannot cause: a signature that fails under a chain that verified, and another
    /// account's transaction (kept for that account). A payload this server cannot decode, or a chain of a shape it
    /// does not expect, may be Apple's own after a change on Apple's side or a bug here: finishing on it would lose
    /// every purchase until the fix, so those are the operator's.
    static let finalCodes: Set<String> = ["bad_signature", "transaction_bound_elsewhere"]
    static let retryCodes: Set<String> = ["storage", "apple_unavailable", "apple_invalid_response", "unauthorized", "request_timeout"]

    /// The class of a refusal with this code and status; what is not known to be final or transient is the operator's.
    public static func of(code: String, status: HTTPResponse.Status) -> RefusalClass {
        if finalCodes.contains(code) { return .final }
        if retryCodes.contains(code) || status.code >= 500 { return .retry }
        return .operator
    }
}

/// An error the API answers with: an HTTP status and a JSON body
/// `{"error": {"code": "…", "message": "…", "class": "final"|"operator"|"retry"}}` whose `code` is stable. It renders
/// itself, so routes just throw.
public struct APIError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// What only the server's log may hold: a database's or driver's own words (SQL, table and column names, source
    /// locations). Never in the body.
    let detail: String?
    /// Answered with `Connection: close`, and the connection closed once it is written (a body refused unread).
    var closesConnection = false
    /// What the device may do about it (see ``RefusalClass``).
    public var refusalClass: RefusalClass { .of(code: code, status: status) }

    public init(_ status: HTTPResponse.Status, code: String, _ message: String) {
        self.init(status, code: code, message, detail: nil)
    }

    init(_ status: HTTPResponse.Status, code: String, _ message: String, detail: String?) {
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        if let detail { context.logger.error("request failed", metadata: ["error": "\(code)", "detail": "\(detail)"]) }
        let data = try JSONEncoder().encode(ErrorBody(error: .init(code: code, message: message, class: refusalClass)))
        var headers: HTTPFields = [.contentType: "application/json"]
        if closesConnection { headers[.connection] = "close" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The JSON an error answers with.
    struct ErrorBody: Codable { struct Detail: Codable { var code: String; var message: String; var `class`: RefusalClass? }; var error: Detail }

    static func badRequest(_ message: String) -> Self { .init(.badRequest, code: "bad_request", message) }
    /// Input no store can keep the same (``StorableText``): a NUL, or bytes that are not UTF-8.
    static func invalidInput(_ what: String) -> Self {
        .init(.badRequest, code: "invalid_input", "\(what) holds a NUL character or is not UTF-8")
    }
    static let unauthorized = Self(.unauthorized, code: "unauthorized", "a valid bearer token is required")
    /// A body over `limit` bytes: the connection is closed rather than the rest of it read.
    static func tooLarge(_ limit: Int) -> Self {
        var error = Self(.contentTooLarge, code: "too_large", "the request body is over \(limit) bytes")
        error.closesConnection = true
        return error
    }

    /// The API's answer to a ledger refusal.
    init(_ error: LedgerError) {
        let status: HTTPResponse.Status = switch error.code {
        case .transactionBoundElsewhere: .conflict
        case .orderNotFound: .notFound
        case .orderAccountMismatch, .possessionRequired: .forbidden
        case .insufficientBalance, .idempotencyKeyReused: .conflict
        case .storage: .serviceUnavailable
        default: .unprocessableContent
        }
        if error.code == .storage {
            // The database's own words name its SQL, tables and source lines: they are the operator's, logged.
            self.init(status, code: error.code.rawValue, "the ledger's database failed; try again later", detail: error.message)
        } else {
            self.init(status, code: error.code.rawValue, error.message)
        }
    }

    /// The API's answer to a proof that did not verify: 422 with the verifier's stable code.
    init(_ error: AppStoreError) {
        self.init(error.code == .tooLarge ? .contentTooLarge : .unprocessableContent, code: error.code.rawValue, error.message)
    }
}
