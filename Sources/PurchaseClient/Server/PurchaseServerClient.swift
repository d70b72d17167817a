import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The purchase server's app endpoints over URLSession.
public struct PurchaseServerClient: Sendable {
    /// Where the server is.
    public let baseURL: URL
    /// The app's sign-in token for the current account, asked for on every call (it may be refreshed meanwhile).
    public let token: @Sendable () async throws -> String
    let session: URLSession

    /// A client for the server at `baseURL`; `token` gives the signed-in account's bearer token for each call.
    public init(baseURL: URL, timeout: TimeInterval = 20, token: @escaping @Sendable () async throws -> String) {
        self.baseURL = baseURL
        self.token = token
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration)
    }

    /// An order for `productId`.
    public struct Order: Decodable, Sendable, Hashable {
        public var orderId: String
        public var productId: String
        public var appAccountToken: UUID
    }

    /// What submitting a transaction came to.
    public enum Submission: Sendable, Hashable {
        case granted(Entitlements)
        /// The server keeps the proof while it waits for Apple: keep the transaction unfinished, ask again later.
        case held
        /// Refused for a reason retrying cannot change (another account's transaction, a forged proof).
        case rejected(code: String, message: String)
    }

    /// The call did not get an answer to act on (network, 5xx): retry later.
    public struct Unreachable: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Opens an order; its `appAccountToken` goes on the payment.
    public func createOrder(productId: String) async throws -> Order {
        let (status, data) = try await send("POST", "v1/orders", body: ["productId": productId])
        guard status == 201 || status == 200 else { throw PurchaseFailure(.orderFailed, Self.message(data) ?? "HTTP \(status)") }
        return try Self.decoder.decode(Order.self, from: data)
    }

    /// Uploads a signed transaction (with its order id when known, and the device-integrity report on iOS).
    public func submit(signedTransaction: String, orderId: String?, deviceIntegrity: DeviceIntegrity? = nil) async throws -> Submission {
        struct Body: Encodable { var signedTransaction: String; var orderId: String?; var deviceIntegrity: DeviceIntegrity? }
        let (status, data) = try await send("POST", "v1/purchases", body: Body(signedTransaction: signedTransaction, orderId: orderId,
                                                                                 deviceIntegrity: deviceIntegrity?.applicable == true ? deviceIntegrity : nil))
        return try Self.submission(status, data)
    }

    /// Uploads the app receipt (StoreKit 1 apps, or purchases made before the app used StoreKit 2).
    public func submit(receipt: String) async throws -> Submission {
        let (status, data) = try await send("POST", "v1/purchases", body: ["receipt": receipt])
        return try Self.submission(status, data)
    }

    static func submission(_ status: Int, _ data: Data) throws -> Submission {
        switch status {
        case 200:
            struct Reply: Decodable { var entitlements: Entitlements }
            return .granted(try Self.decoder.decode(Reply.self, from: data).entitlements)
        case 202:
            return .held
        case 400, 403, 404, 409, 413, 422:
            struct Failure: Decodable { struct Detail: Decodable { var code: String; var message: String }; var error: Detail }
            let detail = (try? Self.decoder.decode(Failure.self, from: data))?.error
            return .rejected(code: detail?.code ?? "HTTP \(status)", message: detail?.message ?? "")
        default:
            throw Unreachable(description: "HTTP \(status)")
        }
    }

    /// What the account owns now.
    public func entitlements() async throws -> Entitlements {
        let (status, data) = try await send("GET", "v1/entitlements", body: nil)
        guard status == 200 else { throw Unreachable(description: "HTTP \(status)") }
        return try Self.decoder.decode(Entitlements.self, from: data)
    }

    /// Spends `amount` of a consumable currency once per `idempotencyKey` (retrying with the same key is safe).
    /// Returns the balance after it.
    public func spend(currency: String, amount: Int64, idempotencyKey: String) async throws -> Int64 {
        struct Body: Encodable { var amount: Int64; var idempotencyKey: String }
        let path = "v1/consumables/\(currency.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? currency)/spend"
        let (status, data) = try await send("POST", path, body: Body(amount: amount, idempotencyKey: idempotencyKey))
        guard status == 200 else { throw PurchaseFailure(.rejectedByServer, Self.message(data) ?? "HTTP \(status)") }
        struct Reply: Decodable { var balance: Int64 }
        return try Self.decoder.decode(Reply.self, from: data).balance
    }

    /// Server restore: binds what the store restored and answers everything the account owns.
    public func restore(signedTransactions: [String]) async throws -> Entitlements {
        let (status, data) = try await send("POST", "v1/restore", body: ["signedTransactions": signedTransactions])
        guard status == 200 else { throw Unreachable(description: "HTTP \(status)") }
        struct Reply: Decodable { var entitlements: Entitlements }
        return try Self.decoder.decode(Reply.self, from: data).entitlements
    }

    func send(_ method: String, _ path: String, body: (any Encodable & Sendable)?) async throws -> (Int, Data) {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(try await token())", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(body)
        }
        do {
            let (data, response) = try await session.uncancelledData(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        } catch {
            throw Unreachable(description: error is PurchaseFailure ? "\(error)" : error.localizedDescription)
        }
    }

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }()

    static func message(_ data: Data) -> String? {
        String(data: data, encoding: .utf8).map { String($0.prefix(300)) }
    }
}
