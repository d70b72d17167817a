import AppStoreFormats
import Foundation
#if canImport(CryptoKit)
import CryptoKit
#else
import Crypto
#endif

/// Checks the server's signed entitlement answers (`signedEntitlements`, a compact ES256 JWS) with the public key
/// the app ships with, so that a proxy on the device (or a tampered network path) cannot grant itself anything: the
/// signature covers the account, the entitlements and the nonce this request sent, so an old answer replayed, or
/// another account's, fails too.
///
/// CryptoKit on Apple platforms; swift-crypto (the same API) where CryptoKit does not exist.
public struct EntitlementsVerifier: Sendable {
    let key: P256.Signing.PublicKey

    /// The server's key as served at `GET /v1/keys/entitlements` (PEM).
    public init(publicKeyPEM: String) throws {
        do { key = try P256.Signing.PublicKey(pemRepresentation: publicKeyPEM) } catch {
            throw PurchaseFailure(.untrustedAnswer, "the configured entitlements key is not a P-256 public key in PEM: \(error)")
        }
    }

    /// A fresh nonce for one request: 32 random bytes, base64url (43 characters).
    public static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64.urlEncode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    struct Payload: Decodable {
        var accountId: String
        var nonce: String
        var issuedAt: Int64
        var entitlements: Entitlements
    }

    /// The entitlements the JWS signs, once its signature, algorithm, nonce and account agree; a typed
    /// ``PurchaseFailure/Code/untrustedAnswer`` otherwise.
    public func verify(_ jws: String, nonce: String) throws -> Entitlements {
        try verifiedAnswer(jws, nonce: nonce).entitlements
    }

    /// As ``verify(_:nonce:)``, with when the server issued the answer (its signed `issuedAt`, by the server's clock).
    func verifiedAnswer(_ jws: String, nonce: String) throws(PurchaseFailure) -> (entitlements: Entitlements, issuedAt: Date) {
        func refuse(_ why: String) -> PurchaseFailure { PurchaseFailure(.untrustedAnswer, "signed entitlements refused: \(why)") }
        let parsed: CompactJWS
        do { parsed = try CompactJWS(jws) } catch { throw refuse("not a compact JWS") }
        guard (try? parsed.header())?.alg == "ES256" else { throw refuse("the algorithm is not ES256") }
        guard let raw = try? parsed.signature(), raw.count == 64,
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw),
              key.isValidSignature(signature, for: Data(parsed.signingInput)) else {
            throw refuse("the signature does not verify with the configured key")
        }
        let payload: Payload
        do { payload = try PurchaseServerClient.decoder.decode(Payload.self, from: Data(try parsed.payload())) } catch {
            throw refuse("the payload is not the expected shape")
        }
        guard payload.nonce == nonce else { throw refuse("it answers another request (nonce)") }
        guard payload.entitlements.accountId == payload.accountId else { throw refuse("the entitlements name another account") }
        return (payload.entitlements, Date(timeIntervalSince1970: Double(payload.issuedAt) / 1000))
    }
}
