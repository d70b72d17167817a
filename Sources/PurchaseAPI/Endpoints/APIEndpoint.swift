/// A contract type that is a whole request or answer body.
public typealias APIBody = Codable & Hashable & Sendable

/// One operation of the purchase server's HTTP API, as plain data: ``APIEndpoint/all`` is the table the OpenAPI document
/// is generated from (`iap openapi`, docs/API.md), so that the paths, their credentials and the contract types of their
/// bodies are written down once, beside the types.
public struct APIEndpoint: Sendable {
    public enum Method: String, Sendable, CaseIterable {
        case get, put, post
    }

    /// Who calls it: the app (a bearer token of the app's sign-in), the App Store (its signature is the proof), the
    /// operator (the admin key), or the operation of the server itself.
    public enum Tag: String, Sendable, CaseIterable {
        case app, apple, admin, ops
    }

    /// A credential an operation accepts as `Authorization: Bearer …`.
    public enum Credential: String, Sendable, CaseIterable {
        /// A JWT of the app's own sign-in, naming the account.
        case accountToken
        case adminKey
        case metricsKey
    }

    public struct QueryParameter: Sendable {
        public enum Value: Sendable {
            case string
            case boolean
            case integer(ClosedRange<Int>)
            /// One of these words.
            case oneOf([String])
        }

        public var name: String
        public var value: Value

        public init(_ name: String, _ value: Value) {
            self.name = name
            self.value = value
        }

        /// `limit`: how many rows a list answers at most.
        public static let limit = QueryParameter("limit", .integer(1...10_000))
    }

    /// What a body is.
    public enum Body: Sendable {
        case json(any APIBody.Type)
        /// A JSON object whose shape no contract type describes (it is another party's, or the document itself).
        case anyJSONObject
        /// JSON, or the same rows as CSV (`text/csv`) when the request's `Accept` asks for it.
        case jsonOrCSV(any APIBody.Type)
        /// Text of this media type.
        case text(mediaType: String)
    }

    public struct Reply: Sendable {
        /// Nil: any status the operation does not list (OpenAPI's `default`).
        public var status: Int?
        public var description: String
        public var body: Body
        /// The name the document shares this answer under (`components/responses`), when several operations give it.
        public var shared: String?
        /// Whether it carries `Retry-After`, the whole seconds to wait.
        public var retryAfter: Bool

        public init(_ status: Int?, _ description: String, _ body: Body, shared: String? = nil, retryAfter: Bool = false) {
            self.status = status
            self.description = description
            self.body = body
            self.shared = shared
            self.retryAfter = retryAfter
        }

        public static func ok(_ type: any APIBody.Type) -> Reply { Reply(200, "OK", .json(type)) }

        /// Every operation's answer to what it refuses, with the status that says why.
        public static let refusal = Reply(nil, "A refusal: `error.code` is stable", .json(ErrorBody.self), shared: "Refusal")

        /// Where a request would make the server ask Apple more often than its limits allow.
        public static let rateLimited = Reply(
            429,
            "`rate_limited` (class `retry`): the request would make the server ask Apple more often than its limits allow (per account, "
                + "overall, or proofs held per account while Apple is away); nothing was done, come back after `Retry-After` seconds",
            .json(ErrorBody.self), shared: "RateLimited", retryAfter: true)
    }

    public var method: Method
    /// With `{name}` for each path parameter (a non-empty string of at most 200 bytes).
    public var path: String
    public var summary: String
    public var tag: Tag
    /// Any one of them is enough; none: the operation is open (or proves its caller otherwise, as Apple's signature does).
    public var credentials: [Credential]
    public var request: (any APIBody.Type)?
    public var query: [QueryParameter]
    /// The answers it gives, ``Reply/refusal`` last: every operation refuses with an ``ErrorBody``.
    public var replies: [Reply]

    public init(_ method: Method, _ path: String, _ summary: String, tag: Tag, credentials: [Credential], request: (any APIBody.Type)? = nil,
                query: [QueryParameter] = [], replies: [Reply]) {
        self.method = method
        self.path = path
        self.summary = summary
        self.tag = tag
        self.credentials = credentials
        self.request = request
        self.query = query
        self.replies = replies + [.refusal]
    }

    /// The names of the path's `{name}` segments, in order.
    public var pathParameters: [String] {
        path.split(separator: "/").compactMap { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") ? String(segment.dropFirst().dropLast()) : nil
        }
    }
}
