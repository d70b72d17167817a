import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import Testing

@Suite("JWS rules, each broken on purpose with a test CA")
struct JWSNegativeTests {
    let ca: TestCA
    let verifier: SignedDataVerifier

    init() throws {
        ca = try TestCA()
        verifier = SignedDataVerifier(.init(roots: try ca.roots, bundleId: "com.example.app"))
    }

    func code(_ jws: String, verifier: SignedDataVerifier? = nil) async -> AppStoreError.Code? {
        await appStoreError { _ = try await (verifier ?? self.verifier).verifyTransaction(jws) }?.code
    }

    @Test("A well-formed JWS from the test CA verifies and names the custom root")
    func accepted() async throws {
        let verified = try await verifier.verifyTransaction(ca.sign(payload: TestCA.transaction()))
        #expect(verified.anchor.kind == .custom)
        #expect(verified.payload.productId == "com.example.app.coins")
    }

    @Test("alg other than ES256 is refused", arguments: ["none", "HS256", "RS256", "ES384", "es256"])
    func algorithms(alg: String) async throws {
        let jws = try ca.sign(payload: TestCA.transaction(), header: JWSHeader(alg: alg, x5c: ca.x5c))
        #expect(await code(jws) == .unsupportedAlgorithm)
    }

    @Test("A header without alg is refused")
    func missingAlg() async throws {
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(alg: nil, x5c: ca.x5c))) == .unsupportedAlgorithm)
    }

    @Test("Missing, short or extra x5c chains are refused")
    func chainShapes() async throws {
        let x5c = try ca.x5c
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: nil))) == .invalidChainLength)
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: []))) == .invalidChainLength)
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: Array(x5c.prefix(2))))) == .invalidChainLength)
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: [x5c[0]]))) == .invalidChainLength)
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: x5c + [x5c[2]]))) == .invalidChainLength)
    }

    @Test("A chain whose x5c root is not the trusted root is refused")
    func strayRoot() async throws {
        let other = try TestCA()
        var x5c = try ca.x5c
        x5c[2] = try other.x5c[2]
        #expect(await code(try ca.sign(payload: TestCA.transaction(), header: JWSHeader(x5c: x5c))) == .untrustedChain)
    }

    @Test("Missing Apple markers on the leaf or the intermediate are refused")
    func markers() async throws {
        for options in [TestCA.Options(intermediateMarker: false), TestCA.Options(leafMarker: false)] {
            let broken = try TestCA(options)
            let verifier = SignedDataVerifier(.init(roots: try broken.roots))
            #expect(await code(try broken.sign(payload: TestCA.transaction()), verifier: verifier) == .missingAppleMarker)
        }
    }

    @Test("A leaf not valid at the signing date is refused, before and after its validity")
    func expiredAtSigningTime() async throws {
        let verifier = SignedDataVerifier(.init(roots: try ca.roots))
        let early = TestCA.transaction(signedDate: Date(timeIntervalSince1970: 1_550_000_000))
        let late = TestCA.transaction(signedDate: Date(timeIntervalSince1970: 2_050_000_000))
        #expect(await code(try ca.sign(payload: early), verifier: verifier) == .expiredAtSigningTime)
        #expect(await code(try ca.sign(payload: late), verifier: verifier) == .expiredAtSigningTime)
        // The same chain, once cached by a valid JWS, still refuses a signing date outside its window.
        _ = try await verifier.verifyTransaction(ca.sign(payload: TestCA.transaction()))
        #expect(verifier.cachedChainCount == 1)
        #expect(await code(try ca.sign(payload: late), verifier: verifier) == .expiredAtSigningTime)
    }

    @Test("A signature by another key, or over other bytes, is refused — cached chain or not")
    func signatures() async throws {
        let stranger = P256.Signing.PrivateKey()
        #expect(await code(try ca.sign(payload: TestCA.transaction(), key: stranger)) == .badSignature)
        _ = try await verifier.verifyTransaction(ca.sign(payload: TestCA.transaction()))
        #expect(verifier.cachedChainCount == 1)
        #expect(await code(try ca.sign(payload: TestCA.transaction(), key: stranger)) == .badSignature)
        let valid = try ca.sign(payload: TestCA.transaction())
        let shortSignature = valid[..<valid.lastIndex(of: ".")!] + "." + Base64.urlEncode([UInt8](repeating: 7, count: 63))
        #expect(await code(String(shortSignature)) == .badSignature)
        let nonBase64 = valid[..<valid.lastIndex(of: ".")!] + ".!!!!"
        #expect(await code(String(nonBase64)) == .malformed)
    }

    @Test("Wrong bundle id and wrong environment are refused")
    func claims() async throws {
        #expect(await code(try ca.sign(payload: TestCA.transaction(bundleId: "com.example.other"))) == .wrongBundle)
        let productionOnly = SignedDataVerifier(.init(roots: try ca.roots, environments: [.production]))
        #expect(await code(try ca.sign(payload: TestCA.transaction(environment: .sandbox)), verifier: productionOnly) == .wrongEnvironment)
        var noEnvironment = TestCA.transaction()
        noEnvironment.environment = nil
        #expect(await code(try ca.sign(payload: noEnvironment)) == .wrongEnvironment)
        #expect(await code(try ca.sign(payload: TestCA.transaction(environment: .localTesting))) == .testEnvironmentNotAllowed)
    }

    @Test("The app Apple id is checked on production notifications")
    func appAppleId() async throws {
        let verifier = SignedDataVerifier(.init(roots: try ca.roots, bundleId: "com.example.app", appAppleId: 42, environments: [.production]))
        var notification = ResponseBodyV2DecodedPayload()
        notification.notificationType = .test
        notification.notificationUUID = UUID().uuidString
        notification.signedDate = Date(timeIntervalSince1970: 1_700_000_000)
        notification.data = NotificationData()
        notification.data?.environment = .production
        notification.data?.bundleId = "com.example.app"
        notification.data?.appAppleId = 42
        #expect(try await verifier.verifyNotification(ca.sign(payload: notification)).payload.notificationType == .test)
        notification.data?.appAppleId = 43
        #expect(await appStoreError { _ = try await verifier.verifyNotification(ca.sign(payload: notification)) }?.code == .wrongAppAppleId)
    }

    /// A notification from the test CA carrying `transaction`, signed as given.
    func notification(carrying transaction: String) throws -> String {
        var notification = ResponseBodyV2DecodedPayload()
        notification.notificationType = .oneTimeCharge
        notification.notificationUUID = UUID().uuidString
        notification.signedDate = Date(timeIntervalSince1970: 1_700_000_000)
        notification.data = NotificationData()
        notification.data?.environment = .sandbox
        notification.data?.bundleId = "com.example.app"
        notification.data?.signedTransactionInfo = transaction
        return try ca.sign(payload: notification)
    }

    @Test("Signed data inside a notification: covered by the notification's signature under its header, verified in full under any other")
    func enclosedSignatures() async throws {
        let stranger = P256.Signing.PrivateKey()
        // Under the notification's own header, the nested signature is not what authenticates the bytes: the
        // notification's signature over them is.
        let covered = try ca.sign(payload: TestCA.transaction(), key: stranger)
        let outer = try await verifier.verifyNotification(notification(carrying: covered))
        #expect(try await verifier.verifyEnclosed(in: outer).transaction?.payload.transactionId == "2000000000000001")
        // The same chain under other header bytes, or another chain: the nested JWS stands alone.
        let otherHeader = try ca.sign(payload: TestCA.transaction(), header: JWSHeader(alg: "ES256", kid: "other", x5c: ca.x5c), key: stranger)
        let second = try await verifier.verifyNotification(notification(carrying: otherHeader))
        #expect(await appStoreError { _ = try await verifier.verifyEnclosed(in: second) }?.code == .badSignature)
        let foreign = try TestCA()
        let third = try await verifier.verifyNotification(notification(carrying: foreign.sign(payload: TestCA.transaction())))
        #expect(await appStoreError { _ = try await verifier.verifyEnclosed(in: third) }?.code == .untrustedChain)
        // A renewal info signed properly under another header verifies.
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.environment = .sandbox
        renewal.signedDate = Date(timeIntervalSince1970: 1_700_000_000)
        var payload = try await verifier.verifyNotification(notification(carrying: covered)).payload
        payload.data?.signedRenewalInfo = try ca.sign(payload: renewal, header: JWSHeader(alg: "ES256", kid: "renewal", x5c: ca.x5c))
        let fourth = try await verifier.verifyNotification(ca.sign(payload: payload))
        #expect(try await verifier.verifyEnclosed(in: fourth).renewal?.payload.environment == .sandbox)
    }

    @Test("Signed data inside a notification is held to every rule but its covered signature: chain at its own date, environment, bundle")
    func enclosedClaims() async throws {
        let late = TestCA.transaction(signedDate: Date(timeIntervalSince1970: 2_050_000_000))
        let wrongBundle = TestCA.transaction(bundleId: "com.example.other")
        let localTesting = TestCA.transaction(environment: .localTesting)
        let productionOnly = SignedDataVerifier(.init(roots: try ca.roots, bundleId: "com.example.app", environments: [.production, .sandbox]))
        for (nested, expected) in [(late, AppStoreError.Code.expiredAtSigningTime), (wrongBundle, .wrongBundle), (localTesting, .testEnvironmentNotAllowed)] {
            let outer = try await productionOnly.verifyNotification(notification(carrying: ca.sign(payload: nested)))
            #expect(await appStoreError { _ = try await productionOnly.verifyEnclosed(in: outer) }?.code == expected)
        }
    }

    @Test("Oversized input is refused before any parsing")
    func oversized() async throws {
        let small = SignedDataVerifier(.init(roots: try ca.roots, limits: InputLimits(maxJWSBytes: 1_000)))
        #expect(await code(try ca.sign(payload: TestCA.transaction()), verifier: small) == .tooLarge)
    }
}
