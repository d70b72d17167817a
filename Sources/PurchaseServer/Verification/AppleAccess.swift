import AppStoreClient
import AppStoreFormats
import Crypto
import Foundation

/// The clients for Apple's APIs that the configuration turns on.
public struct AppleAccess: Sendable {
    public var serverAPI: ServerAPIClient?
    public var verifyReceipt: VerifyReceiptClient?
    /// How often app requests may make the server call them, and Apple's "not found" remembered.
    public var limits: AppleLookupLimits

    public init(serverAPI: ServerAPIClient? = nil, verifyReceipt: VerifyReceiptClient? = nil, limits: AppleLookupLimits = AppleLookupLimits()) {
        self.serverAPI = serverAPI
        self.verifyReceipt = verifyReceipt
        self.limits = limits
    }

    /// Builds what `configuration` names; an API whose settings are incomplete stays off.
    public init(_ configuration: ServerConfiguration) throws {
        let apple = configuration.appStore
        limits = AppleLookupLimits(apple.lookupLimits ?? .init())
        var policy = RetryPolicy()
        if let attempts = apple.attempts { policy.attempts = max(1, min(attempts, 10)) }
        if let timeout = apple.timeoutSeconds { policy.timeout = .milliseconds(Int64(max(0.1, min(timeout, 120)) * 1000)) }
        if let base = apple.serverAPIBaseURL {
            guard let keyId = apple.keyId, let issuerId = apple.issuerId, let file = apple.privateKeyFile else {
                throw ConfigurationError("appStore.serverAPIBaseURL needs keyId, issuerId and privateKeyFile")
            }
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else { throw ConfigurationError("cannot read the API key \(file)") }
            let key: P256.Signing.PrivateKey
            do { key = try P256.Signing.PrivateKey(pemRepresentation: pem) } catch { throw ConfigurationError("\(file) is not a P-256 private key in PEM") }
            serverAPI = ServerAPIClient(baseURL: base, credentials: .init(keyId: keyId, issuerId: issuerId, bundleId: configuration.bundleId, privateKey: key),
                                        policy: policy)
        }
        if let production = apple.verifyReceiptURL {
            verifyReceipt = VerifyReceiptClient(productionURL: production, sandboxURL: apple.verifyReceiptSandboxURL ?? VerifyReceiptClient.sandboxURL,
                                                sharedSecret: apple.sharedSecret, policy: policy)
        }
    }
}
