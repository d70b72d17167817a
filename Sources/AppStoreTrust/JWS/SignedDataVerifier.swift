import AppStoreFormats
import Crypto
import Foundation
import X509

/// Verifies what the App Store signs as JWS: transactions, renewal info, app transactions and notifications.
///
/// Checks, in order: size; three segments; `alg` is ES256; `x5c` is exactly leaf, intermediate, root; the payload
/// decodes; the chain reaches a trusted root under Apple's chain policy at the payload's signing date (or now);
/// the ES256 signature; then environment, bundle id and app Apple id. Xcode payloads, whose single self-signed
/// certificate proves nothing, pass only when ``Configuration/environments`` includes `Xcode`.
public final class SignedDataVerifier: Sendable {
    /// What a verifier accepts.
    public struct Configuration: Sendable {
        /// The roots chains must end in.
        public var roots: TrustRoots
        /// The bundle id payloads must name; `nil` accepts any (a decoding tool, not a server).
        public var bundleId: String?
        /// The app Apple id production payloads must name, when they name one.
        public var appAppleId: Int64?
        /// The environments accepted. Add `.xcode` to accept Xcode-signed payloads explicitly.
        public var environments: Set<AppStoreEnvironment>
        /// Which time the chain is checked at.
        public var validationTime: ValidationTime
        /// Input size limits.
        public var limits: InputLimits

        public init(roots: TrustRoots, bundleId: String? = nil, appAppleId: Int64? = nil,
                    environments: Set<AppStoreEnvironment> = [.production, .sandbox],
                    validationTime: ValidationTime = .signingDate, limits: InputLimits = .default) {
            self.roots = roots
            self.bundleId = bundleId
            self.appAppleId = appAppleId
            self.environments = environments
            self.validationTime = validationTime
            self.limits = limits
        }
    }

    public let configuration: Configuration
    private let chains: ChainValidator
    private let cache = VerifiedChainCache<CachedChain>()

    struct CachedChain: Sendable {
        let leafKey: P256.Signing.PublicKey
        let chain: ChainValidator.Result
    }

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        chains = ChainValidator(roots: configuration.roots)
    }

    /// Verifies a signed transaction (`signedTransactionInfo`).
    public func verifyTransaction(_ jws: some StringProtocol) async throws -> Verified<JWSTransactionDecodedPayload> {
        try await verify(Array(jws.utf8), as: JWSTransactionDecodedPayload.self) {
            ($0.signedDate, $0.environment, $0.bundleId, nil)
        }
    }

    /// Verifies signed renewal info (`signedRenewalInfo`); it names no bundle id, so only its environment is checked.
    public func verifyRenewalInfo(_ jws: some StringProtocol) async throws -> Verified<JWSRenewalInfoDecodedPayload> {
        try await verify(Array(jws.utf8), as: JWSRenewalInfoDecodedPayload.self) {
            ($0.signedDate, $0.environment, nil, nil)
        }
    }

    /// Verifies a signed app transaction; its `receiptCreationDate` serves as the signing date.
    public func verifyAppTransaction(_ jws: some StringProtocol) async throws -> Verified<AppTransactionDecodedPayload> {
        try await verify(Array(jws.utf8), as: AppTransactionDecodedPayload.self) {
            ($0.receiptCreationDate, $0.receiptType, $0.bundleId, $0.appAppleId)
        }
    }

    /// Verifies a notification's `signedPayload`. Its nested `signedTransactionInfo` and `signedRenewalInfo` are
    /// separate JWS: verify them with ``verifyTransaction(_:)`` and ``verifyRenewalInfo(_:)``.
    public func verifyNotification(_ jws: some StringProtocol) async throws -> Verified<ResponseBodyV2DecodedPayload> {
        try await verify(Array(jws.utf8), as: ResponseBodyV2DecodedPayload.self) {
            ($0.signedDate, $0.environment, $0.bundleId, $0.appAppleId)
        }
    }

    /// Verifies the `signedPayload` of a Get Retention Message request (Retention Messaging): it names no bundle id, so
    /// its environment and, in production, its app Apple id are what tie it to the app.
    public func verifyRealtimeRequest(_ jws: some StringProtocol) async throws -> Verified<DecodedRealtimeRequestBody> {
        try await verify(Array(jws.utf8), as: DecodedRealtimeRequestBody.self) {
            ($0.signedDate, $0.environment, nil, $0.appAppleId)
        }
    }

    /// The signed data a verified notification carries (`signedTransactionInfo`, `signedRenewalInfo`, and
    /// `signedAppTransactionInfo` of `appData`), verified as what they are: bytes inside the notification's own signed
    /// payload. The notification's signature already covers them, so when one is signed under the very header (the same
    /// `x5c` chain, hence the same key) its own signature proves nothing more and is not checked again: a third of the
    /// cost of a notification. Everything else is checked as ``verifyTransaction(_:)`` checks it — the chain at the
    /// nested payload's own signing date, its environment, bundle id and app Apple id. Nested data under any other
    /// header is verified in full.
    public func verifyEnclosed(in notification: Verified<ResponseBodyV2DecodedPayload>) async throws -> EnclosedData {
        let signer = notification.signerHeader
        var enclosed = EnclosedData()
        if let jws = notification.payload.data?.signedTransactionInfo {
            enclosed.transaction = try await verify(Array(jws.utf8), as: JWSTransactionDecodedPayload.self, enclosedBy: signer) {
                ($0.signedDate, $0.environment, $0.bundleId, nil)
            }
        }
        if let jws = notification.payload.data?.signedRenewalInfo {
            enclosed.renewal = try await verify(Array(jws.utf8), as: JWSRenewalInfoDecodedPayload.self, enclosedBy: signer) {
                ($0.signedDate, $0.environment, nil, nil)
            }
        }
        if let jws = notification.payload.appData?.signedAppTransactionInfo {
            enclosed.appTransaction = try await verify(Array(jws.utf8), as: AppTransactionDecodedPayload.self, enclosedBy: signer) {
                ($0.receiptCreationDate, $0.receiptType, $0.bundleId, $0.appAppleId)
            }
        }
        return enclosed
    }

    /// The signed data inside a notification, each verified.
    public struct EnclosedData: Sendable {
        public var transaction: Verified<JWSTransactionDecodedPayload>?
        public var renewal: Verified<JWSRenewalInfoDecodedPayload>?
        public var appTransaction: Verified<AppTransactionDecodedPayload>?
    }

    /// The signing date, environment, bundle id and app Apple id a payload states, for the checks.
    public typealias Claims = (signedDate: Date?, environment: AppStoreEnvironment?, bundleId: String?, appAppleId: Int64?)

    /// Verifies any App Store JWS whose payload decodes as `Payload`.
    public func verify<Payload: Decodable & Sendable>(
        _ bytes: [UInt8], as type: Payload.Type, claims: (Payload) -> Claims
    ) async throws -> Verified<Payload> {
        try await verify(bytes, as: type, enclosedBy: nil, claims: claims)
    }

    /// `enclosedBy`: the header of a verified JWS whose signed payload holds these bytes.
    private func verify<Payload: Decodable & Sendable>(
        _ bytes: [UInt8], as type: Payload.Type, enclosedBy signer: ArraySlice<UInt8>?, claims: (Payload) -> Claims
    ) async throws -> Verified<Payload> {
        let jws = try CompactJWS(bytes, limits: configuration.limits)
        let cached = cache.entry(for: jws.headerSegment)
        let header = cached == nil ? try jws.header() : nil
        if let header, header.alg != "ES256" {
            throw AppStoreError(.unsupportedAlgorithm, "JWS alg is \(header.alg ?? "missing"); App Store data is signed with ES256")
        }
        let payload = try jws.unverifiedPayload(as: Payload.self)
        let stated = claims(payload)
        let environment = stated.environment
        if let environment, environment.isTestEnvironment, !configuration.environments.contains(environment) {
            throw AppStoreError(.testEnvironmentNotAllowed, "\(environment) payloads are not signed by the App Store; this verifier does not accept them")
        }
        let certificates = try header.map { try $0.certificateChain(limits: configuration.limits) }
        if let certificates, certificates.count != 3, !(certificates.count == 1 && configuration.environments.contains(.xcode)) {
            throw AppStoreError(.invalidChainLength, "JWS x5c has \(certificates.count) certificates; App Store chains have exactly 3")
        }
        let time = configuration.validationTime.date(signed: stated.signedDate)

        let leafKey: P256.Signing.PublicKey
        let anchor: TrustAnchor
        if let cached {
            try cached.chain.validity.check(time)
            leafKey = cached.leafKey
            anchor = cached.chain.anchor
        } else if let certificates, certificates.count == 1 {
            (leafKey, anchor) = try xcodeSelfSigned(certificates[0], environment: environment, at: time)
        } else {
            // The header was decoded above whenever the cache missed.
            guard let certificates else { throw AppStoreError(.invalidChainLength, "JWS header has no x5c certificates") }
            let parsed = try certificates.enumerated().map { index, der in
                do { return try Certificate(derEncoded: der) } catch {
                    throw AppStoreError(.malformed, "x5c[\(index)] is not an X.509 certificate")
                }
            }
            let chain = try await chains.validate(leaf: parsed[0], intermediates: [parsed[1]], embedded: parsed, at: time)
            guard let key = P256.Signing.PublicKey(parsed[0].publicKey) else {
                throw AppStoreError(.unsupportedAlgorithm, "the leaf certificate's key is not P-256")
            }
            leafKey = key
            anchor = chain.anchor
            cache.store(.init(leafKey: key, chain: chain), for: jws.headerSegment)
        }

        // Only a chain that came from the cache was validated under this very header; an Xcode certificate never is.
        if cached == nil || signer.map(BytesKey.init) != BytesKey(jws.headerSegment) {
            try Self.checkSignature(jws, key: leafKey)
        }
        try checkClaims(stated)
        return Verified(payload: payload, anchor: anchor, environment: environment, validatedAt: time, signerHeader: jws.headerSegment)
    }

    static func checkSignature(_ jws: CompactJWS, key: P256.Signing.PublicKey) throws {
        let raw = try jws.signature()
        guard raw.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw) else {
            throw AppStoreError(.badSignature, "an ES256 signature is 64 bytes; this one is \(raw.count)")
        }
        guard key.isValidSignature(signature, for: SHA256.hash(data: jws.signingInput)) else {
            throw AppStoreError(.badSignature, "the ES256 signature does not match the payload and the leaf key")
        }
    }

    private func checkClaims(_ stated: Claims) throws {
        guard let environment = stated.environment else {
            throw AppStoreError(.wrongEnvironment, "the payload states no environment")
        }
        guard configuration.environments.contains(environment) else {
            throw AppStoreError(.wrongEnvironment, "payload environment is \(environment); accepted: \(configuration.environments.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        if let expected = configuration.bundleId, let bundleId = stated.bundleId, bundleId != expected {
            throw AppStoreError(.wrongBundle, "payload bundle id is \(bundleId); expected \(expected)")
        }
        if let expected = configuration.appAppleId, environment == .production, let appAppleId = stated.appAppleId, appAppleId != expected {
            throw AppStoreError(.wrongAppAppleId, "payload app Apple id is \(appAppleId); expected \(expected)")
        }
    }

    /// Xcode signs with one self-signed certificate made on the developer's Mac: the signature shows integrity only.
    private func xcodeSelfSigned(_ der: [UInt8], environment: AppStoreEnvironment?, at time: Date) throws -> (P256.Signing.PublicKey, TrustAnchor) {
        guard environment == .xcode else {
            throw AppStoreError(.invalidChainLength, "a single self-signed x5c certificate is only ever used by Xcode payloads")
        }
        let certificate: Certificate
        do { certificate = try Certificate(derEncoded: der) } catch {
            throw AppStoreError(.malformed, "x5c[0] is not an X.509 certificate")
        }
        guard let key = P256.Signing.PublicKey(certificate.publicKey) else {
            throw AppStoreError(.unsupportedAlgorithm, "the Xcode certificate's key is not P-256")
        }
        return (key, TrustAnchor(kind: .xcodeSelfSigned, certificate: certificate, der: der))
    }

    /// How many verified chains are cached (for tests and metrics).
    public var cachedChainCount: Int { cache.count }
}

/// Which time a signing chain is checked at.
public enum ValidationTime: Sendable, Hashable {
    /// The date the payload says it was signed (`signedDate`, `receiptCreationDate`), as Apple's own libraries do
    /// offline; "now" when the payload states none.
    case signingDate
    /// The current time.
    case now
    /// A fixed time.
    case fixed(Date)

    func date(signed: Date?) -> Date {
        switch self {
        case .signingDate: signed ?? Date()
        case .now: Date()
        case .fixed(let date): date
        }
    }
}

/// A payload that passed verification, with the root it chained to.
public struct Verified<Payload: Sendable>: Sendable {
    public let payload: Payload
    /// The trusted root the signature chains to; its ``TrustAnchor/kind`` says whether that is Apple.
    public let anchor: TrustAnchor
    public let environment: AppStoreEnvironment?
    /// The time the chain was checked at.
    public let validatedAt: Date
    /// The JWS header it was signed under (its `x5c` chain and `alg`).
    let signerHeader: ArraySlice<UInt8>
}
