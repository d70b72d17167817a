import _CryptoExtras
import AppStoreFormats
import Crypto
import Foundation
import SwiftASN1
import X509

/// Mints what the App Store signs, with the simulator's certificate authority: ES256 JWS with a three-certificate
/// `x5c`, and PKCS#7 app receipts signed RSA-SHA256 in Apple's ASN.1 layout.
public struct Minter: Sendable {
    public let authority: CertificateAuthority
    private let jwsHeaderSegment: String
    private let receiptSignerIdentity: [UInt8]

    public init(authority: CertificateAuthority) throws {
        self.authority = authority
        // Apple's header: alg and x5c (standard base64 DER: leaf, intermediate, root). Built once; its bytes never
        // change, so verifiers that cache by header bytes hit every time.
        let chain = authority.jws
        let header = JWSHeader(alg: "ES256", x5c: [chain.leafDER, chain.intermediateDER, chain.rootDER].map(Base64.standardEncode))
        jwsHeaderSegment = Base64.urlEncode(try AppStoreJSON.encoder(sortedKeys: true).encode(header))
        var issuer = DER.Serializer()
        try issuer.serialize(authority.receipts.leaf.issuer)
        receiptSignerIdentity = ASN1Writer.tlv(0x30, issuer.serializedBytes + ASN1Writer.tlv(0x02, Self.integerContent(Array(authority.receipts.leaf.serialNumber.bytes))))
    }

    /// Signs `payload` as a compact JWS.
    public func sign(_ payload: some Encodable) throws -> String {
        let input = jwsHeaderSegment + "." + Base64.urlEncode(try AppStoreJSON.encoder(sortedKeys: true).encode(payload))
        let signature = try authority.jws.leafKey.signature(for: Array(input.utf8))
        return input + "." + Base64.urlEncode(signature.rawRepresentation)
    }

    static let sha256: [UInt8] = ASN1Writer.tlv(0x30, ASN1Writer.tlv(0x06, [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]) + [0x05, 0x00])
    static let rsaEncryption: [UInt8] = ASN1Writer.tlv(0x30, ASN1Writer.tlv(0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]) + [0x05, 0x00])
    static let dataOID: [UInt8] = ASN1Writer.tlv(0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01])
    static let signedDataOID: [UInt8] = ASN1Writer.tlv(0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02])

    /// An app receipt: PKCS#7 SignedData over the receipt's payload, no signed attributes (as Apple's), embedding
    /// leaf, intermediate and root.
    public func receipt(_ receipt: AppReceipt) throws -> [UInt8] {
        let payload = receipt.payloadDER()
        let signature = try authority.receipts.leafKey.signature(for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5)
        let chain = authority.receipts
        let signerInfo = ASN1Writer.tlv(0x30,
            ASN1Writer.integer(1) + receiptSignerIdentity + Self.sha256 + Self.rsaEncryption
                + ASN1Writer.tlv(0x04, Array(signature.rawRepresentation)))
        let signedData = ASN1Writer.tlv(0x30,
            ASN1Writer.integer(1)
                + ASN1Writer.tlv(0x31, Self.sha256)
                + ASN1Writer.tlv(0x30, Self.dataOID + ASN1Writer.tlv(0xA0, ASN1Writer.tlv(0x04, payload)))
                + ASN1Writer.tlv(0xA0, chain.leafDER + chain.intermediateDER + chain.rootDER)
                + ASN1Writer.tlv(0x31, signerInfo))
        return ASN1Writer.tlv(0x30, Self.signedDataOID + ASN1Writer.tlv(0xA0, signedData))
    }

    /// A serial number's bytes as positive INTEGER content.
    static func integerContent(_ bytes: [UInt8]) -> [UInt8] {
        guard let first = bytes.first else { return [0] }
        return first & 0x80 != 0 ? [0] + bytes : bytes
    }
}
