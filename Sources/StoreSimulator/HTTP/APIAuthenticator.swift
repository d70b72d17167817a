import AppStoreFormats
import Crypto
import Foundation

/// Checks a Server API `Authorization: Bearer <JWT>` as Apple does: ES256 signed by the configured key (`kid`),
/// `aud` = `appstoreconnect-v1`, `bid` = the app's bundle id, and an `exp` in the future and at most 60 minutes
/// after `iat` (or after now, when the client sends no `iat`, as Apple's Python library does not).
public struct APIAuthenticator: Sendable {
    public let keyId: String
    public let issuerId: String?
    public let publicKey: P256.Signing.PublicKey
    public let bundleId: String

    public init(keyId: String, issuerId: String? = nil, publicKey: P256.Signing.PublicKey, bundleId: String) {
        self.keyId = keyId
        self.issuerId = issuerId
        self.publicKey = publicKey
        self.bundleId = bundleId
    }

    struct Claims: Decodable {
        var iss: String?
        var iat: Double?
        var exp: Double?
        var aud: String?
        var bid: String?
    }

    /// Whether the header carries a valid token at real time `now` (tokens live in real time, not simulated time).
    public func isAuthorized(_ authorization: String?, now: Date = Date()) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer "), authorization.utf8.count <= 8 << 10,
              let jws = try? CompactJWS(String(authorization.dropFirst(7))),
              let header = try? jws.header(), header.alg == "ES256", header.kid == keyId,
              let raw = try? jws.signature(), let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw),
              publicKey.isValidSignature(signature, for: SHA256.hash(data: jws.signingInput)),
              let claims = try? JSONDecoder().decode(Claims.self, from: Data(jws.payload())) else { return false }
        let seconds = now.timeIntervalSince1970
        guard claims.aud == "appstoreconnect-v1", claims.bid == bundleId, let exp = claims.exp, exp > seconds else { return false }
        if let issuerId, claims.iss != issuerId { return false }
        if let iat = claims.iat {
            guard iat <= seconds + 60, exp - iat <= 3600 else { return false }
        } else {
            guard exp <= seconds + 3600 + 60 else { return false }
        }
        return true
    }
}
