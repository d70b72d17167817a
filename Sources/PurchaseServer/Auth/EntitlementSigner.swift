import AppStoreFormats
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PurchaseAPI
import PurchaseLedger
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Signs entitlement answers (ES256 compact JWS) so that the SDK, configured with the public key, believes only what
/// this server said — to this account, for this request (the nonce it sent). A proxy on the device can then no longer
/// grant itself anything by rewriting an answer (RevenueCat calls this "trusted entitlements").
public struct EntitlementSigner: Sendable {
    /// The request header carrying the SDK's nonce; only requests with it get a signature.
    public static let nonceHeader = "X-Entitlements-Nonce"
    /// The key's file in the server's data directory.
    public static let keyFileName = "entitlements-signing-key.pem"

    let key: P256.Signing.PrivateKey
    /// The key's id in the JWS header: the start of the public key's SHA-256, so a rotated key is told apart.
    public let keyId: String

    public init(key: P256.Signing.PrivateKey) {
        self.key = key
        keyId = SHA256.hash(data: key.publicKey.derRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The signing key kept in `directory`, made (readable by the owner only) on first start.
    public static func loadOrCreate(in directory: String) throws -> EntitlementSigner {
        let file = URL(fileURLWithPath: directory).appendingPathComponent(keyFileName)
        if let data = FileManager.default.contents(atPath: file.path) {
            guard let pem = String(data: data, encoding: .utf8), let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
                throw ConfigurationError("\(file.path) is not a P-256 private key in PEM")
            }
            return EntitlementSigner(key: key)
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        // Created with mode 0600 in one step (O_EXCL), so the key is never readable by others, even for a moment.
        let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw ConfigurationError("cannot create \(file.path): errno \(errno)") }
        defer { close(fd) }
        let bytes = Array(key.pemRepresentation.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else { throw ConfigurationError("cannot write \(file.path): errno \(errno)") }
        return EntitlementSigner(key: key)
    }

    /// The public key as served at `GET /v1/keys/entitlements`.
    public var publicKeyPEM: String { key.publicKey.pemRepresentation }

    /// Whether a nonce is acceptable: 16–128 base64url characters.
    public static func validNonce(_ nonce: String) -> Bool {
        (16...128).contains(nonce.utf8.count) && nonce.utf8.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    /// A compact JWS over `{"accountId", "nonce", "issuedAt" (ms), "entitlements"}`.
    public func sign(_ entitlements: Entitlements, nonce: String, now: Date = Date()) throws -> String {
        struct Header: Encodable { var alg = "ES256"; var kid: String; var typ = "JWT" }
        struct Payload: Encodable { var accountId: String; var nonce: String; var issuedAt: Date; var entitlements: Entitlements }
        let input = Base64.urlEncode(try APIJSON.encode(Header(kid: keyId))) + "."
            + Base64.urlEncode(try APIJSON.encode(Payload(accountId: entitlements.accountId, nonce: nonce, issuedAt: now, entitlements: entitlements)))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64.urlEncode(signature.rawRepresentation)
    }
}

extension PurchaseServices {
    /// Refuses a malformed nonce before anything is granted: a purchase must never be applied and then answered 400.
    func checkEntitlementsNonce(_ request: Request) throws {
        guard let nonce = request.headers[HTTPField.Name(EntitlementSigner.nonceHeader)!] else { return }
        guard EntitlementSigner.validNonce(nonce) else {
            throw APIError.badRequest("\(EntitlementSigner.nonceHeader) must be 16–128 base64url characters")
        }
    }

    /// The signature a reply carries when the request asked for one (a valid nonce header) and a signer is set.
    func signature(for entitlements: Entitlements, _ request: Request) throws -> String? {
        guard let signer = entitlementSigner, let nonce = request.headers[HTTPField.Name(EntitlementSigner.nonceHeader)!] else { return nil }
        guard EntitlementSigner.validNonce(nonce) else {
            throw APIError.badRequest("\(EntitlementSigner.nonceHeader) must be 16–128 base64url characters")
        }
        return try signer.sign(entitlements, nonce: nonce, now: now())
    }
}

/// `GET /v1/keys/entitlements`: the public key apps configure the SDK with.
struct EntitlementKeyRoutes<Context: PurchaseRequestContext> {
    let services: PurchaseServices

    func add(to router: some RouterMethods<Context>) {
        router.get("v1/keys/entitlements") { _, _ in
            guard let signer = services.entitlementSigner else {
                throw APIError(.notFound, code: .signingDisabled, "this server does not sign entitlement answers")
            }
            return Response(status: .ok, headers: [.contentType: "application/x-pem-file"],
                            body: .init(byteBuffer: ByteBuffer(string: signer.publicKeyPEM)))
        }
    }
}
