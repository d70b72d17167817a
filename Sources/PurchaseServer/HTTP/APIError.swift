import AppStoreFormats
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseLedger

/// An error the API answers with: an HTTP status and a JSON body `{"error": {"code": "…", "message": "…"}}` whose
/// `code` is stable. It renders itself, so routes just throw.
public struct APIError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String

    public init(_ status: HTTPResponse.Status, code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = try JSONEncoder().encode(ErrorBody(error: .init(code: code, message: message)))
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The JSON an error answers with.
    struct ErrorBody: Codable { struct Detail: Codable { var code: String; var message: String }; var error: Detail }

    static func badRequest(_ message: String) -> Self { .init(.badRequest, code: "bad_request", message) }
    static let unauthorized = Self(.unauthorized, code: "unauthorized", "a valid bearer token is required")

    /// The API's answer to a ledger refusal.
    init(_ error: LedgerError) {
        let status: HTTPResponse.Status = switch error.code {
        case .transactionBoundElsewhere: .conflict
        case .orderNotFound: .notFound
        case .orderAccountMismatch: .forbidden
        case .insufficientBalance, .idempotencyKeyReused: .conflict
        case .storage: .serviceUnavailable
        default: .unprocessableContent
        }
        self.init(status, code: error.code.rawValue, error.message)
    }

    /// The API's answer to a proof that did not verify: 422 with the verifier's stable code.
    init(_ error: AppStoreError) {
        self.init(error.code == .tooLarge ? .contentTooLarge : .unprocessableContent, code: error.code.rawValue, error.message)
    }
}
