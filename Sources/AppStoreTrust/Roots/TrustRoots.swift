import AppStoreFormats
import Foundation
import SwiftASN1
import X509

/// The set of roots a verifier trusts: certificate files the operator names, or Apple's own (``apple()``).
///
/// IAPKit ships Apple's two roots, checked against the SHA-256 fingerprints pinned here whenever they are loaded. The
/// same fingerprints make any file of Apple's root recognised as such, and a file that calls itself Apple's but is not
/// refused. Apple publishes its roots at https://www.apple.com/certificateauthority/ ("Apple Root CA - G3 Root" for
/// JWS, "Apple Inc. Root" for receipts).
public struct TrustRoots: Sendable {
    /// The roots, in the order added.
    public private(set) var anchors: [TrustAnchor] = []

    /// SHA-256 fingerprints of Apple's roots IAPKit recognises.
    public static let appleRootFingerprints: [String: String] = [
        "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179": "Apple Root CA - G3",
        "B0B1730ECBC7FF4505142C49F1295E6EDA6BCAED7E2C68C5BE91B5A11001F024": "Apple Root CA",
    ]

    /// SHA-256 of Xcode's StoreKit Testing certificate (`CN=StoreKit`), which signs Xcode receipts.
    public static let storeKitTestFingerprint = "FF0BA36E721D2DB741D2AA11E6112EF78BF7131B46C7F035B00891D045C864FE"

    public init() {}

    /// Trusts the certificates in `data` (DER, or PEM with one or more certificates).
    /// - Throws: ``AppStoreError/Code/invalidTrustRoot`` when a certificate cannot be read, or claims to be an Apple
    ///   root without having an Apple root's fingerprint.
    public mutating func add(certificateData data: [UInt8], source: String = "certificate") throws {
        for der in try Self.certificates(in: data, source: source) {
            let certificate: Certificate
            do { certificate = try Certificate(derEncoded: der) } catch {
                throw AppStoreError(.invalidTrustRoot, "\(source) is not an X.509 certificate: \(error)")
            }
            let fingerprint = TrustAnchor.fingerprint(der)
            let kind: TrustAnchor.Kind
            if Self.appleRootFingerprints[fingerprint] != nil {
                kind = .apple
            } else if Self.claimsToBeApple(certificate) {
                throw AppStoreError(.invalidTrustRoot, "\(source) names Apple (\(certificate.subject)) but is not one of Apple's roots (SHA-256 \(fingerprint))")
            } else if fingerprint == Self.storeKitTestFingerprint {
                kind = .xcodeStoreKit
            } else {
                kind = .custom
            }
            let anchor = TrustAnchor(kind: kind, certificate: certificate, der: der)
            if !anchors.contains(anchor) { anchors.append(anchor) }
        }
    }

    /// Trusts the certificate files at `paths`.
    public mutating func add(contentsOf paths: [String]) throws {
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw AppStoreError(.invalidTrustRoot, "cannot read trust root \(path)")
            }
            guard data.count <= 1 << 20 else { throw AppStoreError(.invalidTrustRoot, "\(path) is larger than 1 MiB") }
            try add(certificateData: Array(data), source: path)
        }
    }

    /// Trust roots read from files.
    public static func load(_ paths: [String]) throws -> TrustRoots {
        var roots = TrustRoots()
        try roots.add(contentsOf: paths)
        return roots
    }

    /// Whether any of Apple's own roots is trusted. A production deployment without one cannot verify anything real.
    public var trustsApple: Bool { anchors.contains { $0.kind == .apple } }

    /// What an operator should be told at start: missing Apple roots, test roots in use.
    public var warnings: [String] {
        var warnings: [String] = []
        if !trustsApple {
            warnings.append("no Apple root is trusted: nothing signed by the real App Store will verify (Apple's roots, which IAPKit ships, are trusted only when no root is named and they are not turned off; or name them: https://www.apple.com/certificateauthority/)")
        }
        for anchor in anchors where anchor.kind != .apple {
            warnings.append("trusting a non-Apple root: \(anchor)")
        }
        return warnings
    }

    /// The anchors usable as chain roots (Xcode's StoreKit certificate is matched separately, never chained to).
    var chainAnchors: [TrustAnchor] { anchors.filter { $0.kind == .apple || $0.kind == .custom } }

    func anchor(for certificate: Certificate) -> TrustAnchor? { anchors.first { $0.certificate == certificate } }

    private static func claimsToBeApple(_ certificate: Certificate) -> Bool {
        let subject = String(describing: certificate.subject).lowercased()
        return subject.contains("o=apple inc") || subject.contains("cn=apple root ca")
    }

    private static func certificates(in data: [UInt8], source: String) throws -> [[UInt8]] {
        guard let text = String(validating: data, as: UTF8.self), text.contains("-----BEGIN") else { return [data] }
        do {
            let documents = try PEMDocument.parseMultiple(pemString: text)
            let certificates = documents.filter { $0.discriminator == "CERTIFICATE" }.map(\.derBytes)
            guard !certificates.isEmpty else { throw AppStoreError(.invalidTrustRoot, "\(source) holds no CERTIFICATE block") }
            return certificates
        } catch let error as AppStoreError {
            throw error
        } catch {
            throw AppStoreError(.invalidTrustRoot, "\(source) is not valid PEM: \(error)")
        }
    }
}
