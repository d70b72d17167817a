import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import SwiftASN1
import X509

/// A throwaway certificate authority shaped like Apple's JWS chain (root → intermediate with …6.2.1 → leaf with
/// …6.11.1, P-256), with switches to break each rule, and a minter for JWS signed by it.
struct TestCA {
    struct Options {
        var intermediateMarker = true
        var leafMarker = true
        var leafValidity: ClosedRange<Date> = Date(timeIntervalSince1970: 1_600_000_000)...Date(timeIntervalSince1970: 2_000_000_000)
        var rootSubject = "IAPKit Test Root"
    }

    let rootKey = P256.Signing.PrivateKey()
    let intermediateKey = P256.Signing.PrivateKey()
    let leafKey = P256.Signing.PrivateKey()
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate

    init(_ options: Options = Options()) throws {
        let notBefore = Date(timeIntervalSince1970: 1_500_000_000)
        let notAfter = Date(timeIntervalSince1970: 2_100_000_000)
        let rootName = try DistinguishedName { CommonName(options.rootSubject); OrganizationName("IAPKit Tests") }
        let intermediateName = try DistinguishedName { CommonName("IAPKit Test Intermediate"); OrganizationName("IAPKit Tests") }
        let leafName = try DistinguishedName { CommonName("IAPKit Test Leaf"); OrganizationName("IAPKit Tests") }
        let rootPublic = Certificate.PublicKey(rootKey.publicKey)
        let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
        let leafPublic = Certificate.PublicKey(leafKey.publicKey)
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: rootPublic, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: rootPublic)
            },
            issuerPrivateKey: .init(rootKey))
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: intermediatePublic, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: intermediatePublic)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootPublic).keyIdentifier)
                if options.intermediateMarker {
                    Certificate.Extension(oid: AppStoreChainPolicy.intermediateMarker, critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(rootKey))
        leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: leafPublic,
            notValidBefore: options.leafValidity.lowerBound, notValidAfter: options.leafValidity.upperBound,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                SubjectKeyIdentifier(hash: leafPublic)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: intermediatePublic).keyIdentifier)
                if options.leafMarker {
                    Certificate.Extension(oid: AppStoreChainPolicy.leafMarker, critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(intermediateKey))
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    var roots: TrustRoots {
        get throws {
            var roots = TrustRoots()
            try roots.add(certificateData: Self.der(root), source: "test root")
            return roots
        }
    }

    var x5c: [String] { get throws { try [leaf, intermediate, root].map { Base64.standardEncode(try Self.der($0)) } } }

    /// A JWS over `payload` with a header of the caller's choosing, signed by the leaf key.
    func sign(payload: some Encodable, header: JWSHeader? = nil, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let header = try header ?? JWSHeader(alg: "ES256", x5c: x5c)
        let headerSegment = Base64.urlEncode(try AppStoreJSON.encoder(sortedKeys: true).encode(header))
        let payloadSegment = Base64.urlEncode(try AppStoreJSON.encoder().encode(payload))
        let input = "\(headerSegment).\(payloadSegment)"
        let signature = try (key ?? leafKey).signature(for: Array(input.utf8))
        return "\(input).\(Base64.urlEncode(signature.rawRepresentation))"
    }

    static func transaction(environment: AppStoreEnvironment = .sandbox, bundleId: String = "com.example.app",
                            signedDate: Date = Date(timeIntervalSince1970: 1_700_000_000)) -> JWSTransactionDecodedPayload {
        var transaction = JWSTransactionDecodedPayload()
        transaction.transactionId = "2000000000000001"
        transaction.originalTransactionId = "2000000000000001"
        transaction.bundleId = bundleId
        transaction.productId = "com.example.app.coins"
        transaction.type = .consumable
        transaction.quantity = 1
        transaction.purchaseDate = signedDate
        transaction.signedDate = signedDate
        transaction.environment = environment
        return transaction
    }
}
