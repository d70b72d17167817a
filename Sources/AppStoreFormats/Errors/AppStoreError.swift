/// The one error IAPKit's App Store code throws: a stable ``Code`` to branch on and a message for people.
///
/// Two errors are equal when their codes are equal, so tests and callers compare codes, never messages.
public struct AppStoreError: CodedError {
    /// A stable, machine-readable reason. New codes may be added; existing ones never change meaning.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The bytes are not what the format requires (bad base64, bad DER/BER, bad JSON, wrong structure).
        public static let malformed = Code(rawValue: "malformed")
        /// The input is larger than the configured limit; nothing was parsed.
        public static let tooLarge = Code(rawValue: "too_large")
        /// The JWS `alg` is not ES256, or a receipt uses a digest or signature algorithm IAPKit does not accept.
        public static let unsupportedAlgorithm = Code(rawValue: "unsupported_algorithm")
        /// The JWS `x5c` or the receipt's certificates are not the expected leaf, intermediate, root shape.
        public static let invalidChainLength = Code(rawValue: "invalid_chain_length")
        /// The certificates do not chain to any trusted root.
        public static let untrustedChain = Code(rawValue: "untrusted_chain")
        /// The chain reaches a trusted root but lacks Apple's intermediate (…6.2.1) or leaf (…6.11.1) marker.
        public static let missingAppleMarker = Code(rawValue: "missing_apple_marker")
        /// A certificate in the chain was not valid at the validation time (the signing date, or now).
        public static let expiredAtSigningTime = Code(rawValue: "expired_at_signing_time")
        /// The signature does not match the signed bytes and the signer's key.
        public static let badSignature = Code(rawValue: "bad_signature")
        /// The payload names another bundle id than expected.
        public static let wrongBundle = Code(rawValue: "wrong_bundle")
        /// The payload names another app Apple id than expected.
        public static let wrongAppAppleId = Code(rawValue: "wrong_app_apple_id")
        /// The payload's environment is not one this verifier accepts.
        public static let wrongEnvironment = Code(rawValue: "wrong_environment")
        /// The receipt's app version is not the expected one.
        public static let wrongAppVersion = Code(rawValue: "wrong_app_version")
        /// The receipt's device hash does not match the given device identifier.
        public static let wrongDeviceHash = Code(rawValue: "wrong_device_hash")
        /// An Xcode or LocalTesting payload was presented to a verifier that was not told to accept them.
        public static let testEnvironmentNotAllowed = Code(rawValue: "test_environment_not_allowed")
        /// A configured trust root is unusable: unreadable, or claiming to be Apple's without Apple's fingerprint.
        public static let invalidTrustRoot = Code(rawValue: "invalid_trust_root")
    }

    /// Why it failed, stable across versions.
    public let code: Code
    /// What failed, for a person reading a log line.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

}

extension AppStoreError {
    static func malformed(_ message: String) -> AppStoreError { AppStoreError(.malformed, message) }
}
