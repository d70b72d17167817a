import AppStoreFormats
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// The App Store Server API, authenticated with an ES256 token made from the app's In-App Purchase key, as Apple
/// describes it: header `kid`, claims `iss` `iat` `exp` (a few minutes) `aud` `appstoreconnect-v1` `bid`.
/// The base URL is configuration, so the same client talks to the simulator.
public struct ServerAPIClient: Sendable {
    /// Apple's two base URLs: its recommended hosts since 2026-05-05 (the older `api.storekit(-sandbox).itunes.apple.com`
    /// still answer).
    public static let productionURL = "https://api.storekit.apple.com"
    public static let sandboxURL = "https://api.storekit-sandbox.apple.com"
    static let productionHosts: Set = [productionURL, "https://api.storekit.itunes.apple.com"]
    static let sandboxHosts: Set = [sandboxURL, "https://api.storekit-sandbox.itunes.apple.com"]

    /// The In-App Purchase key from App Store Connect and the app it speaks for.
    public struct Credentials: Sendable {
        public var keyId: String
        public var issuerId: String
        public var bundleId: String
        public var privateKey: P256.Signing.PrivateKey

        public init(keyId: String, issuerId: String, bundleId: String, privateKey: P256.Signing.PrivateKey) {
            self.keyId = keyId
            self.issuerId = issuerId
            self.bundleId = bundleId
            self.privateKey = privateKey
        }

        /// A JWS Compact Serialization of `claims` as Apple's APIs take them: `alg` ES256, `kid` this key, `typ` JWT.
        public func signJWT(_ claims: some Encodable) throws -> String {
            let header = #"{"alg":"ES256","kid":"\#(keyId)","typ":"JWT"}"#
            let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(try JSONEncoder().encode(claims)))
            let signature = try privateKey.signature(for: Array(input.utf8))
            return input + "." + Base64.urlEncode(signature.rawRepresentation)
        }
    }

    public let baseURL: String
    public let credentials: Credentials
    let transport: Transport

    /// A client for `baseURL` (Apple's production or sandbox URL, or the simulator's).
    public init(baseURL: String, credentials: Credentials, policy: RetryPolicy = RetryPolicy(), httpClient: HTTPClient = .shared) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.credentials = credentials
        transport = Transport(client: httpClient, policy: policy)
    }

    private init(baseURL: String, sameAs other: ServerAPIClient, policy: RetryPolicy? = nil) {
        self.baseURL = baseURL
        credentials = other.credentials
        transport = policy.map { Transport(client: other.transport.client, policy: $0) } ?? other.transport
    }

    /// The same client, retrying as `policy` says (a call that must answer within a caller's deadline).
    public func retrying(_ policy: RetryPolicy) -> ServerAPIClient {
        ServerAPIClient(baseURL: baseURL, sameAs: self, policy: policy)
    }

    /// The client for a transaction of `environment`: Apple answers for a sandbox purchase only at its sandbox URL (the
    /// purchases of App Review and TestFlight reach production servers), and the reverse. A base URL that is not
    /// Apple's (the simulator's) serves every environment itself.
    public func serving(_ environment: AppStoreEnvironment?) -> ServerAPIClient {
        switch environment {
        case .sandbox? where Self.productionHosts.contains(baseURL): ServerAPIClient(baseURL: Self.sandboxURL, sameAs: self)
        case .production? where Self.sandboxHosts.contains(baseURL): ServerAPIClient(baseURL: Self.productionURL, sameAs: self)
        default: self
        }
    }

    /// A bearer token valid for five minutes.
    public func token(now: Date = Date()) throws -> String {
        let issued = Int64(now.timeIntervalSince1970)
        struct Claims: Encodable { var iss: String; var iat: Int64; var exp: Int64; var aud: String; var bid: String }
        return try credentials.signJWT(Claims(iss: credentials.issuerId, iat: issued, exp: issued + 300, aud: "appstoreconnect-v1",
                                              bid: credentials.bundleId))
    }

    /// Get Transaction Info: the signed transaction (`signedTransactionInfo`), still to be verified by the caller.
    public func transactionInfo(_ transactionId: String) async throws -> String {
        let response = try await get("/inApps/v1/transactions/\(try Self.pathSegment(transactionId))", as: TransactionInfoResponse.self)
        guard let signed = response.signedTransactionInfo else { throw AppStoreClientError(.invalidResponse, "no signedTransactionInfo") }
        return signed
    }

    /// Get Transaction History (v2): one page from `revision`.
    /// `sort`: Apple's order of the pages, by each transaction's last change (`ASCENDING`, Apple's default, or
    /// `DESCENDING`); the same on every page of one read.
    public func history(_ transactionId: String, revision: String? = nil, sort: HistorySort? = nil) async throws -> HistoryResponse {
        var path = "/inApps/v2/history/\(try Self.pathSegment(transactionId))"
        var query: [String] = []
        if let revision { query.append("revision=\(revision.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")") }
        if let sort { query.append("sort=\(sort.rawValue)") }
        if !query.isEmpty { path += "?" + query.joined(separator: "&") }
        return try await get(path, as: HistoryResponse.self)
    }

    /// The `sort` of Get Transaction History.
    public enum HistorySort: String, Sendable {
        case ascending = "ASCENDING"
        case descending = "DESCENDING"
    }

    /// Get All Subscription Statuses.
    public func subscriptionStatuses(_ transactionId: String) async throws -> StatusResponse {
        try await get("/inApps/v1/subscriptions/\(try Self.pathSegment(transactionId))", as: StatusResponse.self)
    }

    /// Look Up Order ID (the order id on the customer's App Store receipt email).
    public func lookUpOrder(_ orderId: String) async throws -> OrderLookupResponse {
        try await get("/inApps/v1/lookup/\(try Self.pathSegment(orderId))", as: OrderLookupResponse.self)
    }

    /// Get Notification History: one page (at most 20) of the notifications Apple sent, or tried to send, between the
    /// request's dates — how a server recovers the ones its endpoint never answered.
    public func notificationHistory(_ query: NotificationHistoryRequest, paginationToken: String? = nil) async throws -> NotificationHistoryResponse {
        var path = "/inApps/v1/notifications/history"
        if let paginationToken { path += "?paginationToken=\(paginationToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
        let body = try AppStoreJSON.encoder().encode(query)
        return try await call(.POST, path, body: Array(body), as: NotificationHistoryResponse.self)
    }

    /// Finish Transaction (API 1.20): the server delivered the transaction, so it leaves the customer's unfinished
    /// queues — a device that died between the grant and its own `finish()` has nothing left to deliver.
    public func finishTransaction(_ transactionId: String) async throws {
        _ = try await call(.POST, "/inApps/v1/transactions/\(try Self.pathSegment(transactionId))/finish", body: nil, as: NoContent.self)
    }

    /// Set App Account Token (API 1.16): names the app's customer on a purchase made outside the app, for Apple's
    /// later transactions of its series too. Only on an original transaction id (4000187), never on a family member's
    /// copy (4000185).
    public func setAppAccountToken(originalTransactionId: String, _ token: UUID) async throws {
        let body = try AppStoreJSON.encoder().encode(["appAccountToken": token.lowercasedString])
        _ = try await call(.PUT, "/inApps/v1/transactions/\(try Self.pathSegment(originalTransactionId))/appAccountToken", body: [UInt8](body), as: NoContent.self)
    }

    /// Send Consumption Information (`PUT /inApps/v2/transactions/consumption/{transactionId}`): the answer to a
    /// `CONSUMPTION_REQUEST`, for a customer who consented. Apple answers 202.
    public func sendConsumptionInformation(_ transactionId: String, _ request: ConsumptionRequest) async throws {
        let body = try AppStoreJSON.encoder().encode(request)
        _ = try await call(.PUT, "/inApps/v2/transactions/consumption/\(try Self.pathSegment(transactionId))", body: [UInt8](body), as: NoContent.self)
    }

    /// An answer whose body, if any, carries nothing.
    struct NoContent: Decodable {}

    func get<T: Decodable>(_ path: String, as type: T.Type) async throws -> T {
        try await call(.GET, path, body: nil, as: type)
    }

    func call<T: Decodable>(_ method: HTTPMethod, _ path: String, body: [UInt8]?, contentType: String = "application/json", as type: T.Type) async throws -> T {
        let url = baseURL + path
        let answer = try await transport.send { [self] in
            var request = HTTPClientRequest(url: url)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(try token())")
            request.headers.add(name: "Accept", value: "application/json")
            if let body {
                request.headers.add(name: "Content-Type", value: contentType)
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            return request
        }
        switch answer.status {
        case 200..<300:
            if let nothing = NoContent() as? T { return nothing }
            do { return try AppStoreJSON.decoder().decode(type, from: Data(answer.body)) } catch {
                throw AppStoreClientError(.invalidResponse, "\(path) answered JSON of another shape")
            }
        case 401:
            throw AppStoreClientError(.unauthorized, "the API key was refused")
        default:
            let body = try? AppStoreJSON.decoder().decode(APIErrorBody.self, from: Data(answer.body))
            throw AppStoreClientError(.rejected, "HTTP \(answer.status): \(body?.errorMessage ?? "no error body")", apiErrorCode: body?.errorCode)
        }
    }

    /// Ids go into a path: digits, letters, `-` and `_` only, so nothing can reach another endpoint.
    static func pathSegment(_ id: String) throws -> String {
        guard !id.isEmpty, id.utf8.count <= 128, id.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }) else {
            throw AppStoreClientError(.rejected, "not an id: \(id.prefix(40))")
        }
        return id
    }
}
