import Crypto
import Foundation
import X509

/// A root certificate IAPKit trusts, and what kind of trust it carries. Every verification result names one.
public struct TrustAnchor: Sendable, Hashable, CustomStringConvertible {
    /// Where trust in a root comes from.
    public enum Kind: String, Sendable, Hashable {
        /// One of Apple's roots, recognised by its SHA-256 fingerprint.
        case apple
        /// A root the operator added: a simulator's, a test CA. Grants under it are not Apple's word.
        case custom
        /// Xcode's StoreKit Testing certificate: signs Xcode receipts only, proves nothing about a payment.
        case xcodeStoreKit
        /// The self-signed certificate inside an Xcode-signed JWS, accepted only when Xcode payloads are allowed.
        case xcodeSelfSigned
    }

    public let kind: Kind
    /// The root's subject, as a distinguished name string.
    public let subject: String
    /// SHA-256 of the root's DER, uppercase hex.
    public let sha256Fingerprint: String
    /// The certificate itself.
    public let certificate: Certificate

    init(kind: Kind, certificate: Certificate, der: [UInt8]) {
        self.kind = kind
        self.certificate = certificate
        subject = String(describing: certificate.subject)
        sha256Fingerprint = Self.fingerprint(der)
    }

    public var description: String { "\(kind.rawValue) root \(subject) (SHA-256 \(sha256Fingerprint))" }

    static func fingerprint(_ der: some DataProtocol) -> String {
        SHA256.hash(data: der).map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
