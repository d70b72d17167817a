import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The purchase server's app endpoints over URLSession. Every call throws ``PurchaseFailure`` only: `notSignedIn` (no
/// token), `networkUnreachable`, `serverUnavailable` (5xx), `responseTooLarge`, `untrustedAnswer`, or the refusal the
/// server answered, typed by its code.
public struct PurchaseServerClient: Sendable {
    /// Where the server is.
    public let baseURL: URL
    /// When set, every entitlements answer must carry a signature this verifier accepts, or it is refused.
    public let verifier: EntitlementsVerifier?
    /// Sends one request; URLSession unless a test or an app supplies its own.
    let transport: @Sendable (URLRequest) async throws -> (Data, URLResponse)
    /// The signed-in account's token source; replaced by ``PurchaseClient/logIn(_:token:)`` together with the account.
    let credentials: Credentials
    /// Where the underlying detail of a failure goes (``PurchaseClient`` sets its own).
    var log: PurchaseLog = .off
    /// The last signed answer verified for each account, so that the offline copy keeps the server's signature.
    let signedAnswers = SignedAnswers()

    /// A client for the server at `baseURL`; `token` gives the signed-in account's bearer token for each call (throw when
    /// nobody is signed in). With a `verifier` (made from the PEM served at `GET /v1/keys/entitlements`), entitlement
    /// answers are believed only when the server signed them for this request.
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
        self.credentials = Credentials(token)
        self.verifier = verifier
        self.transport = transport
    }

    /// The token for the next call, as the current source gives it.
    public func token() async throws(PurchaseFailure) -> String {
        do { return try await credentials.source()() } catch let failure as PurchaseFailure where failure.code == .notSignedIn {
            throw failure
        } catch {
            // The app's token source failing while an account is signed in is most often a refresh without a network:
            // one more reason the call got no answer (the offline copy may stand in). An app that means "nobody is
            // signed in" throws `PurchaseFailure(.notSignedIn, …)` from it, or signs out.
            log("no sign-in token for the call: \(error)")
            throw PurchaseFailure(.networkUnreachable, "no sign-in token could be had for the call")
        }
    }

    /// The token source, swapped as one value (a call reads the source once, then awaits it).
    final class Credentials: @unchecked Sendable {
        private let lock = NSLock()
        private var current: @Sendable () async throws -> String

        init(_ source: @escaping @Sendable () async throws -> String) { current = source }

        func source() -> @Sendable () async throws -> String {
            lock.lock()
            defer { lock.unlock() }
            return current
        }

        func replace(_ source: @escaping @Sendable () async throws -> String) {
            lock.lock()
            current = source
            lock.unlock()
        }
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
        /// Refused; only a `RefusalClass.final` refusal lets the device give the transaction up.
        case rejected(code: ErrorCode, message: String, refusal: RefusalClass)
    }

    /// Opens an order; its `appAccountToken` goes on the payment.
    /// `expectedAccountId`, the account the order is for, makes the server refuse it (`accountMismatch`, no order made)
    /// when the token fetched for the call is another account's. A refusal is typed by the server's code
    /// (`unknownProduct`, `accountMismatch`, `deviceRefused`, else `orderFailed`). `deviceIntegrity`: the device's checks,
    /// which a server with the `refuse` policy judges before anything is charged.
    public func createOrder(productId: String, expectedAccountId: String? = nil,
                            deviceIntegrity: DeviceIntegrity? = nil) async throws(PurchaseFailure) -> Order {
        let body = OrderRequest(productId: productId, expectedAccountId: expectedAccountId, deviceIntegrity: deviceIntegrity?.report)
        let (status, data) = try await send("POST", "v1/orders", body: body)
        guard status == 201 || status == 200 else { throw failure(status, data, otherwise: .orderFailed, doing: "open an order for \(productId)") }
        return try decode(Order.self, data)
    }

    /// Tells the server that `orderId`'s payment ended with nothing charged, so that its operator's list of lost orders
    /// leaves it out. Answers whether the server recorded it (not for an order a payment was seen for).
    @discardableResult
    public func abandonOrder(_ orderId: String, reason: OrderAbandonRequest.Reason) async throws(PurchaseFailure) -> Bool {
        let path = "v1/orders/\(orderId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-"])) ?? orderId)/abandon"
        let (status, data) = try await send("POST", path, body: OrderAbandonRequest(reason: reason))
        guard status == 200 else { throw failure(status, data, otherwise: .rejectedByServer, doing: "record that order \(orderId) was abandoned") }
        return try decode(OrderAbandonReply.self, data).recorded
    }

    /// Uploads a signed transaction (with its order id when known, and the device-integrity report on iOS).
    /// `expectedAccountId`, the account that paid, makes the server refuse the upload (`account_mismatch`) when the
    /// token fetched for the call is another account's. Throws when no answer to act on came (network, 5xx, 401, 429).
    /// `signedRenewalInfo`: an auto-renewable subscription's renewal info as the store holds it, which the server applies
    /// after the grant (one it cannot verify never blocks the grant).
    public func submit(signedTransaction: String, orderId: String?, deviceIntegrity: DeviceIntegrity? = nil,
                       expectedAccountId: String? = nil, signedRenewalInfo: String? = nil) async throws(PurchaseFailure) -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let body = PurchaseRequest(signedTransaction: signedTransaction, orderId: orderId, expectedAccountId: expectedAccountId,
                                   deviceIntegrity: deviceIntegrity?.report, signedRenewalInfo: signedRenewalInfo)
        let (status, data) = try await send("POST", "v1/purchases", body: body, nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    /// Uploads the app receipt (StoreKit 1 apps, or purchases made before the app used StoreKit 2).
    public func submit(receipt: String, expectedAccountId: String? = nil) async throws(PurchaseFailure) -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/purchases", body: PurchaseRequest(receipt: receipt, expectedAccountId: expectedAccountId),
                                            nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    /// Sends the signed app transaction (recorded for the account; it grants nothing by itself) and answers what the
    /// account owns.
    public func submit(appTransaction: String) async throws(PurchaseFailure) -> Submission {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/purchases", body: PurchaseRequest(appTransaction: appTransaction), nonce: nonce)
        return try submission(status, data, nonce: nonce)
    }

    func submission(_ status: Int, _ data: Data, nonce: String?) throws(PurchaseFailure) -> Submission {
        switch status {
        case 200:
            let reply = try decode(PurchaseReply.self, data)
            let entitlements = try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
            return (reply.outcome ?? reply.transactions.first?.outcome) == .deliveredToOwner ? .deliveredToOwner(entitlements) : .granted(entitlements)
        case 202:
            return .held
        case 400..<500 where status != 401 && status != 408 && status != 429:
            let (code, message, refusal) = Self.refusal(status, data)
            return .rejected(code: code, message: message, refusal: refusal)
        default:
            throw failure(status, data, otherwise: .serverUnavailable, doing: "upload the purchase")
        }
    }

    /// An error body's code, message and class (`{"error": {"code", "message", "class"}}`); an old server's body
    /// without a class is classified by its code.
    static func refusal(_ status: Int, _ data: Data) -> (code: ErrorCode, message: String, refusal: RefusalClass) {
        guard let detail = (try? Self.decoder.decode(ErrorBody.self, from: data))?.error else { return (ErrorCode(rawValue: "HTTP \(status)"), "", .operator) }
        return (detail.code, detail.message, detail.class ?? .of(code: detail.code, status: status))
    }

    /// The failure an answer of `status` stands for: the server's refusal typed by its code and told in its message
    /// (never its raw body, which goes to the debug log), 401 as not signed in, 5xx / 408 / 429 as unavailable.
    func failure(_ status: Int, _ data: Data, otherwise: PurchaseFailure.Code, doing what: String) -> PurchaseFailure {
        log("could not \(what): HTTP \(status) \(String(decoding: data.prefix(600), as: UTF8.self))")
        switch status {
        case 401: return PurchaseFailure(.tokenRejected, "the server did not accept the sign-in token: refresh it, or sign in again")
        // No HTTP answer, a redirect (a captive portal, a proxy's page), overload or an outage: nothing was refused.
        case ..<200, 300..<400, 408, 429, 500...:
            return PurchaseFailure(.serverUnavailable, "the purchase server cannot answer now (HTTP \(status)); try again later")
        default: break
        }
        guard let detail = (try? Self.decoder.decode(ErrorBody.self, from: data))?.error else {
            return PurchaseFailure(otherwise, "the purchase server refused to \(what) (HTTP \(status))")
        }
        let code: PurchaseFailure.Code = switch detail.code {
        case .unknownProduct, .productRetired: .unknownProduct
        case .accountMismatch: .accountMismatch
        case .unauthorized: .tokenRejected
        case .deviceIntegrity: .deviceRefused
        default: otherwise
        }
        return PurchaseFailure(code, detail.message.isEmpty ? "the purchase server refused to \(what) (\(detail.code))" : detail.message)
    }

    /// The entitlements to believe: with a configured key, only those the reply's signature covers for this nonce.
    func trusted(_ unsigned: Entitlements, _ signature: String?, nonce: String?) throws(PurchaseFailure) -> Entitlements {
        guard let verifier, let nonce else { return unsigned }
        guard let jws = signature else {
            throw PurchaseFailure(.untrustedAnswer, "the answer is not signed, and this client only believes signed entitlements")
        }
        let entitlements = try verifier.verifiedAnswer(jws, nonce: nonce).entitlements
        signedAnswers.keep(CachedEntitlements(entitlements: entitlements, signedEntitlements: jws, nonce: nonce, cachedAt: Date()))
        return entitlements
    }

    /// The latest verified answer per account (one each): its signature goes into the offline copy with it.
    final class SignedAnswers: @unchecked Sendable {
        private let lock = NSLock()
        private var latest: [String: CachedEntitlements] = [:]

        func keep(_ answer: CachedEntitlements) {
            lock.lock()
            latest[answer.entitlements.accountId] = answer
            lock.unlock()
        }

        /// The signed answer for exactly `entitlements`, if it is the latest one verified for their account.
        func signed(_ entitlements: Entitlements) -> CachedEntitlements? {
            lock.lock()
            defer { lock.unlock() }
            return latest[entitlements.accountId].flatMap { $0.entitlements == entitlements ? $0 : nil }
        }
    }

    /// What the account owns now.
    public func entitlements() async throws(PurchaseFailure) -> Entitlements {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("GET", "v1/entitlements", body: nil, nonce: nonce)
        guard status == 200 else { throw failure(status, data, otherwise: .rejectedByServer, doing: "say what the account owns") }
        let reply = try decode(EntitlementsReply.self, data)
        return try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
    }

    /// Spends `amount` of a consumable currency once per `idempotencyKey` (retrying with the same key is safe).
    /// Returns the balance after it.
    public func spend(currency: String, amount: Int64, idempotencyKey: String) async throws(PurchaseFailure) -> Int64 {
        let path = "v1/consumables/\(currency.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? currency)/spend"
        let (status, data) = try await send("POST", path, body: SpendRequest(amount: amount, idempotencyKey: idempotencyKey))
        guard status == 200 else { throw failure(status, data, otherwise: .rejectedByServer, doing: "spend \(amount) \(currency)") }
        return try decode(SpendReply.self, data).balance
    }

    /// Asks the server to sign what a purchase redeems (`POST /v1/offers/sign`): a promotional offer the customer may have,
    /// or the server's introductory-offer eligibility. Throws ``PurchaseFailure`` `offerRefused` when it will not.
    /// `appTransaction`: the device's signed app transaction, so that the signatures name this Apple ID's customer.
    /// Where the server would allow the introductory offer it signs nothing, and StoreKit judges as it always does.
    public func signOffers(productId: String, promotionalOffer: String?, introductoryOfferEligibility: Bool,
                           appTransaction: String? = nil) async throws(PurchaseFailure) -> SignedOffers {
        var offers = SignedOffers()
        if let promotionalOffer {
            let (status, data) = try await send("POST", "v1/offers/sign", body: OfferSignRequest(kind: .promotionalOffer, productId: productId,
                                                                                                  offerIdentifier: promotionalOffer, appTransaction: appTransaction))
            guard status == 200, let jws = try decode(OfferSignReply.self, data).signature else {
                throw failure(status, data, otherwise: .offerRefused, doing: "sign offer \(promotionalOffer)")
            }
            offers.promotionalOfferId = promotionalOffer
            offers.promotionalOfferJWS = jws
        }
        if introductoryOfferEligibility {
            let (status, data) = try await send("POST", "v1/offers/sign", body: OfferSignRequest(kind: .introductoryOfferEligibility, productId: productId,
                                                                                                  appTransaction: appTransaction))
            guard status == 200 else { throw failure(status, data, otherwise: .offerRefused, doing: "sign the introductory offer's eligibility") }
            offers.introductoryOfferEligibilityJWS = try decode(OfferSignReply.self, data).signature
        }
        return offers
    }

    /// Records whether the signed-in customer agrees to have their consumption data sent to Apple when they ask for a
    /// refund (ask them in plain words; they may withdraw it at any time). Returns what the server now holds.
    @discardableResult
    public func setConsumptionConsent(_ consented: Bool) async throws(PurchaseFailure) -> Bool {
        let (status, data) = try await send("PUT", "v1/consumption-consent", body: ConsentRequest(consented: consented))
        guard status == 200 else { throw failure(status, data, otherwise: .rejectedByServer, doing: "record the consumption consent") }
        return try decode(ConsentReply.self, data).consented
    }

    /// Server restore: binds what the store restored and answers everything the account owns.
    /// `signedRenewalInfos`: the store's renewal info of the restored auto-renewable series, applied by the server.
    public func restore(signedTransactions: [String], signedRenewalInfos: [String]? = nil) async throws(PurchaseFailure) -> Entitlements {
        let nonce = verifier.map { _ in EntitlementsVerifier.nonce() }
        let (status, data) = try await send("POST", "v1/restore", body: RestoreRequest(signedTransactions: signedTransactions,
                                                                                       signedRenewalInfos: signedRenewalInfos), nonce: nonce)
        guard status == 200 else { throw failure(status, data, otherwise: .rejectedByServer, doing: "restore") }
        let reply = try decode(RestoreReply.self, data)
        return try trusted(reply.entitlements, reply.signedEntitlements, nonce: nonce)
    }

    /// The public key the server signs entitlement answers with (PEM), for an app that pins it at build time.
    public func entitlementsKey() async throws(PurchaseFailure) -> String {
        let (status, data) = try await send("GET", "v1/keys/entitlements", body: nil)
        guard status == 200, let pem = String(data: data, encoding: .utf8) else {
            throw failure(status, data, otherwise: .rejectedByServer, doing: "give its entitlements key")
        }
        return pem
    }

    func send(_ method: String, _ path: String, body: (any Encodable & Sendable)?, nonce: String? = nil) async throws(PurchaseFailure) -> (Int, Data) {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(try await token())", forHTTPHeaderField: "Authorization")
        if let nonce { request.setValue(nonce, forHTTPHeaderField: "X-Entitlements-Nonce") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            do { request.httpBody = try APIJSON.encoder(sortedKeys: false).encode(body) } catch {
                throw PurchaseFailure(.orderFailed, "the request could not be encoded")
            }
        }
        do {
            let (data, response) = try await transport(request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        } catch let failure as PurchaseFailure {
            throw failure
        } catch {
            log("\(method) \(path): \(error)")
            throw PurchaseFailure(.networkUnreachable, "the purchase server could not be reached")
        }
    }

    /// An answer of the expected shape, or the server is not one this SDK can talk to now (a proxy's page, a newer
    /// incompatible server): unavailable, retried later.
    func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws(PurchaseFailure) -> T {
        do { return try Self.decoder.decode(type, from: data) } catch {
            log("an answer of another shape (\(T.self)): \(error)")
            throw PurchaseFailure(.serverUnavailable, "the purchase server answered in a shape this app does not read")
        }
    }

    static let decoder = APIJSON.decoder()
}
