import Foundation
import JWTKit

/// Checks the bearer token an app call carries: a JWT issued by the app's own sign-in, whose `sub` is the account id.
public struct AccountAuthenticator: Sendable {
    private let keys: JWTKeyCollection
    /// The one algorithm tokens are signed with: a token whose header names another is refused, whatever its signature.
    private let algorithm: String
    private let audience: String?
    private let issuer: String?
    /// An app sends the same token with every call of a session: once verified, a token is known until its expiry
    /// without decoding its JSON again. Only tokens that verified are kept, by their exact text.
    private let verified = VerifiedTokens(capacity: 20_000)
    /// How far the sign-in's clock may run ahead of this server's: a token it issued just now carries an `nbf` a
    /// little in this server's future, and refusing it would sign the app out for nothing.
    static let notBeforeLeeway: TimeInterval = 60

    /// Claims the server reads: the account (`sub`) and the expiry, which is required; `nbf`, `aud` and `iss` when
    /// present (`aud` and `iss` are required when configured, by ``AccountAuthenticator/account(fromAuthorization:)``).
    struct AccountClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var nbf: NotBeforeClaim?
        var aud: AudienceClaim?
        var iss: IssuerClaim?
        init(sub: SubjectClaim, exp: ExpirationClaim, nbf: NotBeforeClaim? = nil, aud: AudienceClaim? = nil, iss: IssuerClaim? = nil) {
            (self.sub, self.exp, self.nbf, self.aud, self.iss) = (sub, exp, nbf, aud, iss)
        }
        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
            try nbf?.verifyNotBefore(currentDate: Date().addingTimeInterval(AccountAuthenticator.notBeforeLeeway))
        }
    }

    /// The header's fields the server reads.
    private struct Header: Decodable { var alg: String? }

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
            algorithm = configuration.algorithm ?? ""
        } else {
            let secret = configuration.hs256Secret ?? UUID().uuidString + UUID().uuidString
            guard secret.utf8.count >= 32 else { throw ConfigurationError("auth.hs256Secret must be at least 32 bytes") }
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            algorithm = "HS256"
        }
        self.keys = keys
        audience = configuration.audience.flatMap { $0.isEmpty ? nil : $0 }
        issuer = configuration.issuer.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The account id a token proves, or nil when it proves nothing.
    public func account(fromAuthorization header: String?) async -> String? {
        guard let header, header.hasPrefix("Bearer "), header.utf8.count <= 8192 else { return nil }
        let token = String(header.dropFirst("Bearer ".count))
        if let account = verified.account(for: token, now: Date()) { return account }
        // JWTKit verifies with the configured key whatever the header names: the header must name that key's algorithm.
        guard headerAlgorithm(of: token) == algorithm, let claims = try? await keys.verify(token, as: AccountClaims.self) else { return nil }
        if let audience, claims.aud?.value.contains(audience) != true { return nil }
        if let issuer, claims.iss?.value != issuer { return nil }
        let account = claims.sub.value
        guard !account.isEmpty, account.utf8.count <= 128,
              !account.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return nil }
        verified.keep(token, account: account, expires: claims.exp.value)
        return account
    }

    /// The `alg` of a compact JWS's header; nil when the header is not base64url JSON.
    private func headerAlgorithm(of token: String) -> String? {
        guard let encoded = token.split(separator: ".", maxSplits: 1).first, encoded.utf8.count <= 2048 else { return nil }
        var base64 = encoded.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64) else { return nil }
        return (try? JSONDecoder().decode(Header.self, from: data))?.alg
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
    /// `audience` and `issuer` become `aud` and `iss`, for servers that check them (`auth.audience`, `auth.issuer`).
    public static func issueToken(account: String, secret: String, lifetime: TimeInterval = 3600, notBefore: Date? = nil,
                                  audience: String? = nil, issuer: String? = nil) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(AccountClaims(sub: .init(value: account), exp: .init(value: Date().addingTimeInterval(lifetime)),
                                                 nbf: notBefore.map(NotBeforeClaim.init(value:)), aud: audience.map { AudienceClaim(value: [$0]) },
                                                 iss: issuer.map(IssuerClaim.init(value:))))
    }

    /// The HS256 secret kept in `directory` (made on first use, 64 hex characters, readable by its owner only), for
    /// servers started without configured auth; another secret of the same kind under `name` (`iap dev`'s admin key).
    public static func loadOrCreateSecret(in directory: URL, named name: String = "auth-hs256-secret") throws -> String {
        let file = directory.appendingPathComponent(name)
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
