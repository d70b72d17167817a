@testable import AppStoreClient
import AppStoreFormats
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import Testing

/// A stand-in for Apple's endpoints that answers from a script and counts calls.
final class ScriptedApple: Sendable {
    let calls = NIOLockedValueBox<[String]>([])

    func application(_ answer: @escaping @Sendable (String, Int) -> Response) -> some ApplicationProtocol {
        let router = Router()
        router.on("**", method: .post) { request, _ in self.record(request.uri.path, answer) }
        router.on("**", method: .get) { request, _ in self.record(request.uri.path, answer) }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    private func record(_ path: String, _ answer: @Sendable (String, Int) -> Response) -> Response {
        let count = calls.withLockedValue { $0.append(path); return $0.filter { $0 == path }.count }
        return answer(path, count)
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

@Suite("Calling Apple: retries, Retry-After, verifyReceipt's environment hops, Server API tokens")
struct AppStoreClientTests {
    @Test("Retry-After is read as seconds or as an HTTP date")
    func retryAfterParsing() {
        #expect(RetryPolicy.retryAfter("3") == .seconds(3))
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryPolicy.retryAfter("Tue, 14 Nov 2023 22:13:25 GMT", now: now) == .seconds(5))
        #expect(RetryPolicy.retryAfter("soon") == nil)
        #expect(RetryPolicy(maxDelay: .seconds(2)).delay(after: 1, retryAfter: .seconds(30)) == .seconds(2), "capped")
    }

    @Test("A purchase is looked up at its environment's Server API: sandbox purchases (App Review, TestFlight) at the sandbox URL, whichever of Apple's URLs is configured; any other URL serves every environment",
          arguments: [(ServerAPIClient.productionURL, AppStoreEnvironment.sandbox, ServerAPIClient.sandboxURL),
                      ("https://api.storekit.itunes.apple.com", .sandbox, ServerAPIClient.sandboxURL),
                      (ServerAPIClient.productionURL, .production, ServerAPIClient.productionURL),
                      (ServerAPIClient.sandboxURL, .production, ServerAPIClient.productionURL),
                      ("https://api.storekit-sandbox.itunes.apple.com", .sandbox, "https://api.storekit-sandbox.itunes.apple.com"),
                      ("http://127.0.0.1:8123", .production, "http://127.0.0.1:8123"),
                      ("http://127.0.0.1:8123", .sandbox, "http://127.0.0.1:8123")])
    func environmentURL(configured: String, environment: AppStoreEnvironment, expected: String) {
        let api = ServerAPIClient(baseURL: configured, credentials: .init(keyId: "K", issuerId: "I", bundleId: "com.example", privateKey: P256.Signing.PrivateKey()))
        #expect(api.serving(environment).baseURL == expected)
        #expect(api.serving(nil).baseURL == api.baseURL)
    }

    @Test("A 503 with Retry-After is waited out, then the answer is used")
    func honoursRetryAfter() async throws {
        let apple = ScriptedApple()
        try await apple.application { _, count in
            count == 1 ? ScriptedApple.json(#"{"errorCode":5000000,"errorMessage":"busy"}"#, status: .serviceUnavailable, headers: [.retryAfter: "1"])
                : ScriptedApple.json(#"{"signedTransactionInfo":"a.b.c"}"#)
        }.test(.live) { client in
            let api = ServerAPIClient(baseURL: "http://127.0.0.1:\(client.port!)",
                                      credentials: .init(keyId: "K", issuerId: "I", bundleId: "com.example", privateKey: P256.Signing.PrivateKey()),
                                      policy: RetryPolicy(attempts: 3, baseDelay: .milliseconds(10)))
            let start = ContinuousClock.now
            let info = try await api.transactionInfo("2000000000000001")
            #expect(info == "a.b.c")
            #expect(ContinuousClock.now - start >= .seconds(1))
            #expect(apple.calls.withLockedValue { $0.count } == 2)
        }
    }

    @Test("Apple's 4xx error body becomes a rejection with Apple's code; 401 is the key refused; exhausted 5xx is unavailable")
    func errors() async throws {
        let apple = ScriptedApple()
        try await apple.application { path, _ in
            if path.hasSuffix("/404") { return ScriptedApple.json(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#, status: .notFound) }
            if path.hasSuffix("/401") { return Response(status: .unauthorized) }
            return Response(status: .badGateway)
        }.test(.live) { client in
            let api = ServerAPIClient(baseURL: "http://127.0.0.1:\(client.port!)",
                                      credentials: .init(keyId: "K", issuerId: "I", bundleId: "com.example", privateKey: P256.Signing.PrivateKey()),
                                      policy: RetryPolicy(attempts: 2, baseDelay: .milliseconds(1)))
            await #expect(throws: AppStoreClientError(.rejected, "")) { try await api.transactionInfo("404") }
            do { _ = try await api.transactionInfo("404") } catch let error as AppStoreClientError { #expect(error.apiErrorCode?.rawValue == 4_040_010) }
            await #expect(throws: AppStoreClientError(.unauthorized, "")) { try await api.transactionInfo("401") }
            await #expect(throws: AppStoreClientError(.unavailable, "")) { try await api.transactionInfo("500") }
        }
    }

    @Test("verifyReceipt: production first, 21007 → sandbox; 21008 → back to production; 21005 retried then unavailable")
    func environmentHops() async throws {
        let apple = ScriptedApple()
        try await apple.application { path, count in
            switch path {
            case "/verifyReceipt": ScriptedApple.json(#"{"status":21007}"#)
            case "/sandbox/verifyReceipt": ScriptedApple.json(#"{"status":0,"environment":"Sandbox","receipt":{"bundle_id":"com.example","in_app":[]}}"#)
            case "/busy/verifyReceipt": ScriptedApple.json(#"{"status":21005}"#)
            default: ScriptedApple.json(#"{"status":21008}"#)
            }
        }.test(.live) { client in
            let base = "http://127.0.0.1:\(client.port!)"
            let hopping = VerifyReceiptClient(productionURL: base + "/verifyReceipt", sandboxURL: base + "/sandbox/verifyReceipt", sharedSecret: nil)
            let response = try await hopping.verify(receiptData: "AAAA")
            #expect(response.environment == .sandbox)
            #expect(apple.calls.withLockedValue { $0 } == ["/verifyReceipt", "/sandbox/verifyReceipt"])
            let backAndForth = VerifyReceiptClient(productionURL: base + "/verifyReceipt", sandboxURL: base + "/wrong/verifyReceipt", sharedSecret: nil)
            await #expect(throws: AppStoreClientError(.rejected, "")) { try await backAndForth.verify(receiptData: "AAAA") }
            let busy = VerifyReceiptClient(productionURL: base + "/busy/verifyReceipt", sandboxURL: base + "/busy/verifyReceipt", sharedSecret: nil,
                                           policy: RetryPolicy(attempts: 3, baseDelay: .milliseconds(1)))
            await #expect(throws: AppStoreClientError(.unavailable, "")) { try await busy.verify(receiptData: "AAAA") }
            #expect(apple.calls.withLockedValue { $0.filter { $0 == "/busy/verifyReceipt" }.count } == 3)
        }
    }

    @Test("The Server API token carries Apple's header and claims and verifies with the key")
    func token() throws {
        let key = P256.Signing.PrivateKey()
        let api = ServerAPIClient(baseURL: "http://127.0.0.1:1", credentials: .init(keyId: "ABC123DEFG", issuerId: "issuer-1", bundleId: "com.example.app", privateKey: key))
        let token = try api.token(now: Date(timeIntervalSince1970: 1_800_000_000))
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        struct Header: Decodable { var alg: String; var kid: String }
        struct Claims: Decodable { var aud: String; var bid: String; var iss: String; var iat: Int; var exp: Int }
        let header = try JSONDecoder().decode(Header.self, from: Data(Base64.decode(parts[0].utf8)!))
        let claims = try JSONDecoder().decode(Claims.self, from: Data(Base64.decode(parts[1].utf8)!))
        #expect(header.alg == "ES256")
        #expect(header.kid == "ABC123DEFG")
        #expect(claims.aud == "appstoreconnect-v1")
        #expect(claims.bid == "com.example.app")
        #expect(claims.iss == "issuer-1")
        #expect(claims.exp - claims.iat == 300)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Base64.decode(parts[2].utf8)!)
        #expect(key.publicKey.isValidSignature(signature, for: Array((parts[0] + "." + parts[1]).utf8)))
    }
}
