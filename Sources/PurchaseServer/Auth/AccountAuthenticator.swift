import Foundation
import JWTKit

/// Checks the bearer token an app call carries: a JWT issued by the app's own sign-in, whose `sub` is the account id.
public struct AccountAuthenticator: Sendable {
    private let keys: JWTKeyCollection
    /// An app sends the same token with every call of a session: once verified, a token is known until its expiry
    /// without decoding its JSON again. Only tokens that verified are kept, by their exact text.
    private let verified = VerifiedTokens(capacity: 20_000)

    /// Claims the server reads: the account (`sub`) and the expiry, which is required.
    struct AccountClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws { try exp.verifyNotExpired() }
    }

    /// Builds the checker the configuration names; with none, tokens signed by a random secret nobody knows — that is,
    /// every app call is refused until auth is configured.
    public init(_ configuration: ServerConfiguration.AuthConfiguration) async throws {
        let keys = JWTKeyCollection()
        if let file = configuration.publicKeyPEMFile {
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else { throw ConfigurationError("cannot read auth key \(file)") }
            switch configuration.algorithm {
            case "ES256": await keys.add(ecdsa: try ES256PublicKey(pem: pem))
            case "RS256": await keys.add(rsa: try Insecure.RSA.PublicKey(pem: pem), digestAlgorithm: .sha256)
            default: throw ConfigurationError("auth.algorithm must be ES256 or RS256")
            }
        } else {
            let secret = configuration.hs256Secret ?? UUID().uuidString + UUID().uuidString
            guard secret.utf8.count >= 32 else { throw ConfigurationError("auth.hs256Secret must be at least 32 bytes") }
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        }
        self.keys = keys
    }

    /// The account id a token proves, or nil when it proves nothing.
    public func account(fromAuthorization header: String?) async -> String? {
        guard let header, header.hasPrefix("Bearer "), header.utf8.count <= 8192 else { return nil }
        let token = String(header.dropFirst("Bearer ".count))
        if let account = verified.account(for: token, now: Date()) { return account }
        guard let claims = try? await keys.verify(token, as: AccountClaims.self) else { return nil }
        let account = claims.sub.value
        guard !account.isEmpty, account.utf8.count <= 128,
              !account.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return nil }
        verified.keep(token, account: account, expires: claims.exp.value)
        return account
    }
}

/// Tokens that verified, with their account and expiry. When full it starts again empty: a miss only costs one
/// verification.
final class VerifiedTokens: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String: (account: String, expires: Date)] = [:]
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func account(for token: String, now: Date) -> String? {
        lock.withLock {
            guard let entry = entries[token] else { return nil }
            guard entry.expires > now else {
                entries[token] = nil
                return nil
            }
            return entry.account
        }
    }

    func keep(_ token: String, account: String, expires: Date) {
        lock.withLock {
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = (account, expires)
        }
    }
}

extension AccountAuthenticator {
    /// Signs a token for `account` with an HS256 secret, as an app's sign-in would: for development, demos and tests.
    public static func issueToken(account: String, secret: String, lifetime: TimeInterval = 3600) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(AccountClaims(sub: .init(value: account), exp: .init(value: Date().addingTimeInterval(lifetime))))
    }

    /// The HS256 secret kept in `directory` (made on first use, readable by its owner only), for servers started
    /// without configured auth.
    public static func loadOrCreateSecret(in directory: URL) throws -> String {
        let file = directory.appendingPathComponent("auth-hs256-secret")
        if let data = FileManager.default.contents(atPath: file.path) {
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        try Data(secret.utf8).write(to: file, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return secret
    }
}
