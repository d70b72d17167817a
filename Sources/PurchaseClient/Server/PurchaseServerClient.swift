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
    /// When set, every entitlements answer must carry a signature this verifier accepts, or it is refused.
    public let verifier: EntitlementsVerifier?
    /// Sends one request; URLSession unless a test or an app supplies its own.
    let transport: @Sendable (URLRequest) async throws -> (Data, URLResponse)

    /// A client for the server at `baseURL`; `token` gives the signed-in account's bearer token for each call.
    /// With a `verifier` (made from the PEM served at `GET /v1/keys/entitlements`), entitlement answers are believed
    /// only when the server signed them for this request.
    public init(baseURL: URL, timeout: TimeInterval = 20, verifier: EntitlementsVerifier? = nil,
                token: @escaping @Sendable () async throws -> String) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        let session = URLSession(configuration: configuration)
        self.init(baseURL: baseURL, verifier: verifier, token: token) { request in try await session.uncancelledData(for: request) }
    }

    /// A client that sends its requests through `transport` (another HTTP stack, or a scripted server in tests).
    public init(baseURL: URL, verifier: EntitlementsVerifier? = nil, token: @escaping @Sendable () async throws -> String,
                transport: @escaping @Sendable (URLRequest) async throws -> (Data, URLResponse)) {
        self.baseURL = baseURL
        self.token = token
        self.verifier = verifier
        self.transport = transport
    }

    /// An order for `productId`: pay with its `appAccountToken`.
    public typealias Order = OrderReply

    /// What submitting a transaction came to.
    public enum Submission: Sendable, Hashable {
        /// Granted to the uploading account (now, or earlier: `alreadyGranted`).
        case granted(Entitlements)
        /// The transaction's `appAccountToken` names another account's order: the server granted it to that account.
        /// The entitlements are the uploader's, without it.
        case deliveredToOwner(Entitlements)
        /// The server keeps the proof while it waits for Apple: keep the transaction unfinished, ask again later.
        case held
        /// Refused; only a ``RefusalClass/final`` refusal lets the device give the transaction up.
        case rejected(code: ErrorCode, message: String, refusal: RefusalClass)
    }

    /// The call did not get an answer to act on (network, 5xx): retry later.
    public struct Unreachable: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Opens an order; its `appAccountToken` goes on the payment.
    /// `expectedAccountId`, the account the order is for, makes the server refuse it (`account_mismatch`, no order made)
    /// when the token fetched for the call is another account's.
    public func createOrder(productId: String, expectedAccountId: String? = nil) async throws -> Order {
        let (status, data) = try await send("POST", "v1/orders", body: OrderRequest(productId: productId, expectedAccountId: expectedAccountId))
        guard status == 201 || status == 200 else { throw PurchaseFailure(.orderFailed, Self.message(data) ?? "HTTP \(status)") }
        return try Self.decoder.decode(Order.self, from: data)
    }

    /// Uploads a signed transaction (with its order id when known, and the device-integrity report on iOS).
    /// `expectedAccountId`, the account that paid, makes the server refuse the upload (`account_mismatch`) when the
    /// token fetched for the call is another account's.
    public func submit(signedTransaction: String, orderId: String?, deviceIntegrity: DeviceIntegrity? = nil,
                       expectedAccountId: String? = nil) async throws -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let report = deviceIntegrity.flatMap { $0.applicable ? DeviceIntegrityReport(signals: $0.signals, applicable: $0.applicable) : nil }
        let body = PurchaseRequest(signedTransaction: signedTransaction, orderId: orderId, expectedAccountId: expectedAccountId, deviceIntegrity: report)
        let (status, data) = try await send("POST", "v1/purchases", body: body, nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    /// Uploads the app receipt (StoreKit 1 apps, or purchases made before the app used StoreKit 2).
    public func submit(receipt: String, expectedAccountId: String? = nil) async throws -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/purchases", body: PurchaseRequest(receipt: receipt, expectedAccountId: expectedAccountId),
                                            nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    /// Sends the signed app transaction (recorded for the account; it grants nothing by itself) and answers what the
    /// account owns.
    public func submit(appTransaction: String) async throws -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/purchases", body: PurchaseRequest(appTransaction: appTransaction), nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    func submission(_ status: Int, _ data: Data, nonce: String?) throws -> Submission {
        switch status {
        case 200:
            let reply: PurchaseReply
            do { reply = try Self.decoder.decode(PurchaseReply.self, from: data) } catch { throw Unreachable(description: "an answer of another shape: \(error)") }
            let entitlements = try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
            return (reply.outcome ?? reply.transactions.first?.outcome) == .deliveredToOwner ? .deliveredToOwner(entitlements) : .granted(entitlements)
        case 202:
            return .held
        case 400..<500 where status != 401 && status != 408 && status != 429:
            let (code, message, refusal) = Self.refusal(status, data)
            return .rejected(code: code, message: message, refusal: refusal)
        default:
            throw Unreachable(description: "HTTP \(status)")
        }
    }

    /// An error body's code, message and class (`{"error": {"code", "message", "class"}}`); an old server's body
    /// without a class is classified by its code.
    static func refusal(_ status: Int, _ data: Data) -> (code: ErrorCode, message: String, refusal: RefusalClass) {
        guard let detail = (try? Self.decoder.decode(ErrorBody.self, from: data))?.error else { return (ErrorCode(rawValue: "HTTP \(status)"), "", .operator) }
        return (detail.code, detail.message, detail.class ?? .of(code: detail.code, status: status))
    }

    /// The entitlements to believe: with a configured key, only those the reply's signature covers for this nonce.
    func trusted(_ unsigned: Entitlements, _ signature: String?, nonce: String?) throws -> Entitlements {
        guard let verifier, let nonce else { return unsigned }
        guard let jws = signature else {
            throw PurchaseFailure(.untrustedAnswer, "the answer is not signed, and this client only believes signed entitlements")
        }
        return try verifier.verify(jws, nonce: nonce)
    }

    /// What the account owns now.
    public func entitlements() async throws -> Entitlements {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("GET", "v1/entitlements", body: nil, nonce: nonce)
        guard status == 200 else { throw Unreachable(description: "HTTP \(status)") }
        let reply: EntitlementsReply
        do { reply = try Self.decoder.decode(EntitlementsReply.self, from: data) } catch { throw Unreachable(description: "an answer of another shape: \(error)") }
        return try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
    }

    /// Spends `amount` of a consumable currency once per `idempotencyKey` (retrying with the same key is safe).
    /// Returns the balance after it.
    public func spend(currency: String, amount: Int64, idempotencyKey: String) async throws -> Int64 {
        let path = "v1/consumables/\(currency.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? currency)/spend"
        let (status, data) = try await send("POST", path, body: SpendRequest(amount: amount, idempotencyKey: idempotencyKey))
        guard status == 200 else { throw PurchaseFailure(.rejectedByServer, Self.message(data) ?? "HTTP \(status)") }
        return try Self.decoder.decode(SpendReply.self, from: data).balance
    }

    /// Asks the server to sign what a purchase redeems (`POST /v1/offers/sign`): a promotional offer the customer may have,
    /// or the server's introductory-offer eligibility. Throws ``PurchaseFailure`` `offerRefused` when it will not.
    /// `appTransaction`: the device's signed app transaction, so that the signatures name this Apple ID's customer.
    /// Where the server would allow the introductory offer it signs nothing, and StoreKit judges as it always does.
    public func signOffers(productId: String, promotionalOffer: String?, introductoryOfferEligibility: Bool,
                           appTransaction: String? = nil) async throws -> SignedOffers {
        var offers = SignedOffers()
        if let promotionalOffer {
            let (status, data) = try await send("POST", "v1/offers/sign", body: OfferSignRequest(kind: .promotionalOffer, productId: productId,
                                                                                                  offerIdentifier: promotionalOffer, appTransaction: appTransaction))
            guard status == 200, let jws = try Self.decoder.decode(OfferSignReply.self, from: data).signature else {
                throw PurchaseFailure(.offerRefused, Self.message(data) ?? "HTTP \(status)")
            }
            offers.promotionalOfferId = promotionalOffer
            offers.promotionalOfferJWS = jws
        }
        if introductoryOfferEligibility {
            let (status, data) = try await send("POST", "v1/offers/sign", body: OfferSignRequest(kind: .introductoryOfferEligibility, productId: productId,
                                                                                                  appTransaction: appTransaction))
            guard status == 200 else { throw PurchaseFailure(.offerRefused, Self.message(data) ?? "HTTP \(status)") }
            offers.introductoryOfferEligibilityJWS = try Self.decoder.decode(OfferSignReply.self, from: data).signature
        }
        return offers
    }

    /// Records whether the signed-in customer agrees to have their consumption data sent to Apple when they ask for a
    /// refund (ask them in plain words; they may withdraw it at any time). Returns what the server now holds.
    @discardableResult
    public func setConsumptionConsent(_ consented: Bool) async throws -> Bool {
        let (status, data) = try await send("PUT", "v1/consumption-consent", body: ConsentRequest(consented: consented))
        guard status == 200 else { throw PurchaseFailure(.rejectedByServer, Self.message(data) ?? "HTTP \(status)") }
        return try Self.decoder.decode(ConsentReply.self, from: data).consented
    }

    /// Server restore: binds what the store restored and answers everything the account owns.
    public func restore(signedTransactions: [String]) async throws -> Entitlements {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/restore", body: RestoreRequest(signedTransactions: signedTransactions), nonce: nonce)
        guard status == 200 else { throw Unreachable(description: "HTTP \(status)") }
        let reply = try Self.decoder.decode(RestoreReply.self, from: data)
        return try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
    }

    /// The public key the server signs entitlement answers with (PEM), for an app that pins it at build time.
    public func entitlementsKey() async throws -> String {
        let (status, data) = try await send("GET", "v1/keys/entitlements", body: nil)
        guard status == 200, let pem = String(data: data, encoding: .utf8) else { throw Unreachable(description: "HTTP \(status)") }
        return pem
    }

    func send(_ method: String, _ path: String, body: (any Encodable & Sendable)?, nonce: String? = nil) async throws -> (Int, Data) {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        let bearer: String
        // The app's token source failing (offline, signed out) is one more reason the call got no answer.
        do { bearer = try await token() } catch { throw Unreachable(description: "no token for the call: \(error)") }
        request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization")
        if let nonce { request.setValue(nonce, forHTTPHeaderField: "X-Entitlements-Nonce") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try APIJSON.encoder(sortedKeys: false).encode(body)
        }
        do {
            let (data, response) = try await transport(request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        } catch {
            throw Unreachable(description: error is PurchaseFailure ? "\(error)" : error.localizedDescription)
        }
    }

    static let decoder = APIJSON.decoder()

    static func message(_ data: Data) -> String? {
        String(data: data, encoding: .utf8).map { String($0.prefix(300)) }
    }
}
