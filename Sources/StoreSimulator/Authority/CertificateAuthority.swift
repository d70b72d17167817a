import _CryptoExtras
import AppStoreFormats
import Crypto
import Foundation
import SwiftASN1
import X509

/// The simulator's own certificate authority, shaped like Apple's: a root, an intermediate carrying Apple's WWDR
/// marker (1.2.840.113635.100.6.2.1) and a leaf carrying the receipt-signing marker (1.2.840.113635.100.6.11.1) —
/// P-256 for JWS, RSA-2048 for receipts. Every certificate has Subject and Authority Key Identifiers and Key Usage,
/// which OpenSSL's strict chain checks (used by Apple's Python library) require.
///
/// Created on first start and kept in the data directory, so a server that trusted the root once keeps trusting it.
public struct CertificateAuthority: Sendable {
    /// The EC chain that signs JWS.
    public let jws: Chain<P256.Signing.PrivateKey>
    /// The RSA chain that signs app receipts.
    public let receipts: Chain<_RSA.Signing.PrivateKey>

    /// Certificates of one chain and the leaf's signing key.
    public struct Chain<Key: Sendable>: Sendable {
        public let root: Certificate
        public let intermediate: Certificate
        public let leaf: Certificate
        public let leafKey: Key
        /// DER of root, intermediate and leaf.
        public let rootDER: [UInt8]
        public let intermediateDER: [UInt8]
        public let leafDER: [UInt8]
    }

    static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    /// Loads the authority from `directory`, creating and saving it there first if absent.
    public static func loadOrCreate(in directory: URL, now: Date = Date()) throws -> CertificateAuthority {
        let files = Files(directory: directory)
        if FileManager.default.fileExists(atPath: files.path("jws-leaf.key")) { return try load(files) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let authority = try create(now: now)
        try authority.save(files)
        return authority
    }

    /// A fresh authority valid from a year before `now` for twenty years.
    public static func create(now: Date = Date()) throws -> CertificateAuthority {
        let notBefore = now.addingTimeInterval(-365 * 86_400)
        let notAfter = now.addingTimeInterval(20 * 365 * 86_400)
        let ecRoot = P256.Signing.PrivateKey(), ecIntermediate = P256.Signing.PrivateKey(), ecLeaf = P256.Signing.PrivateKey()
        let jws = try makeChain(
            keys: (.init(ecRoot), .init(ecIntermediate), .init(ecLeaf)),
            publicKeys: (.init(ecRoot.publicKey), .init(ecIntermediate.publicKey), .init(ecLeaf.publicKey)),
            algorithm: .ecdsaWithSHA256, label: "ECC", notBefore: notBefore, notAfter: notAfter, leafKey: ecLeaf)
        let rsaRoot = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let rsaIntermediate = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let rsaLeaf = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let receipts = try makeChain(
            keys: (.init(rsaRoot), .init(rsaIntermediate), .init(rsaLeaf)),
            publicKeys: (.init(rsaRoot.publicKey), .init(rsaIntermediate.publicKey), .init(rsaLeaf.publicKey)),
            algorithm: .sha256WithRSAEncryption, label: "RSA", notBefore: notBefore, notAfter: notAfter, leafKey: rsaLeaf)
        return CertificateAuthority(jws: jws, receipts: receipts)
    }

    private static func makeChain<Key>(
        keys: (Certificate.PrivateKey, Certificate.PrivateKey, Certificate.PrivateKey),
        publicKeys: (Certificate.PublicKey, Certificate.PublicKey, Certificate.PublicKey),
        algorithm: Certificate.SignatureAlgorithm, label: String, notBefore: Date, notAfter: Date, leafKey: Key
    ) throws -> Chain<Key> {
        let rootName = try DistinguishedName {
            CountryName("US"); OrganizationName("IAPKit StoreSimulator"); CommonName("IAPKit Simulator Root CA (\(label))")
        }
        let intermediateName = try DistinguishedName {
            CountryName("US"); OrganizationName("IAPKit StoreSimulator"); OrganizationalUnitName("Simulated WWDR")
            CommonName("IAPKit Simulator Intermediate (\(label))")
        }
        let leafName = try DistinguishedName {
            CountryName("US"); OrganizationName("IAPKit StoreSimulator"); CommonName("IAPKit Simulator Store Signing (\(label))")
        }
        let rootKeyId = SubjectKeyIdentifier(hash: publicKeys.0)
        let intermediateKeyId = SubjectKeyIdentifier(hash: publicKeys.1)
        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKeys.0, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: rootName, subject: rootName, signatureAlgorithm: algorithm,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                rootKeyId
                AuthorityKeyIdentifier(keyIdentifier: rootKeyId.keyIdentifier)
            },
            issuerPrivateKey: keys.0)
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKeys.1, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: algorithm,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                intermediateKeyId
                AuthorityKeyIdentifier(keyIdentifier: rootKeyId.keyIdentifier)
                Certificate.Extension(oid: intermediateMarker, critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: keys.0)
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKeys.2, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: algorithm,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                SubjectKeyIdentifier(hash: publicKeys.2)
                AuthorityKeyIdentifier(keyIdentifier: intermediateKeyId.keyIdentifier)
                Certificate.Extension(oid: leafMarker, critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: keys.1)
        return Chain(root: root, intermediate: intermediate, leaf: leaf, leafKey: leafKey,
                     rootDER: try der(root), intermediateDER: try der(intermediate), leafDER: try der(leaf))
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    // MARK: Persistence

    struct Files {
        let directory: URL
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

        func write(_ name: String, _ text: String, secret: Bool = false) throws {
            try Data(text.utf8).write(to: directory.appendingPathComponent(name), options: .atomic)
            if secret { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path(name)) }
        }

        func read(_ name: String) throws -> String {
            guard let data = FileManager.default.contents(atPath: path(name)), data.count <= 1 << 20 else {
                throw SimulatorError.storage("cannot read \(path(name))")
            }
            return String(decoding: data, as: UTF8.self)
        }

        func certificate(_ name: String) throws -> (Certificate, [UInt8]) {
            let certificate = try Certificate(pemEncoded: try read(name))
            return (certificate, try CertificateAuthority.der(certificate))
        }
    }

    private func save(_ files: Files) throws {
        for (prefix, chain) in [("jws", (jws.root, jws.intermediate, jws.leaf)), ("receipt", (receipts.root, receipts.intermediate, receipts.leaf))] {
            try files.write("\(prefix)-root.pem", try chain.0.serializeAsPEM().pemString)
            try files.write("\(prefix)-intermediate.pem", try chain.1.serializeAsPEM().pemString)
            try files.write("\(prefix)-leaf.pem", try chain.2.serializeAsPEM().pemString)
        }
        try files.write("receipt-leaf.key", receipts.leafKey.pemRepresentation, secret: true)
        // Written last: its presence marks a complete authority.
        try files.write("jws-leaf.key", jws.leafKey.pemRepresentation, secret: true)
    }

    private static func load(_ files: Files) throws -> CertificateAuthority {
        func chain<Key>(_ prefix: String, key: Key) throws -> Chain<Key> {
            let (root, rootDER) = try files.certificate("\(prefix)-root.pem")
            let (intermediate, intermediateDER) = try files.certificate("\(prefix)-intermediate.pem")
            let (leaf, leafDER) = try files.certificate("\(prefix)-leaf.pem")
            return Chain(root: root, intermediate: intermediate, leaf: leaf, leafKey: key,
                         rootDER: rootDER, intermediateDER: intermediateDER, leafDER: leafDER)
        }
        return CertificateAuthority(
            jws: try chain("jws", key: try P256.Signing.PrivateKey(pemRepresentation: files.read("jws-leaf.key"))),
            receipts: try chain("receipt", key: try _RSA.Signing.PrivateKey(pemRepresentation: files.read("receipt-leaf.key"))))
    }
}
