import SwiftASN1

/// The PKCS#7 (CMS) `SignedData` container of an app receipt, taken apart without judging it.
///
/// Parsed from swift-asn1 BER nodes rather than a strict DER decoder: App Store receipts carry SET OF members out of
/// DER order and Xcode receipts use indefinite lengths and constructed OCTET STRINGs.
public struct PKCS7SignedData: Sendable {
    /// The signed content: the receipt payload (a DER `SET OF ReceiptAttribute`).
    public var content: [UInt8]
    /// Each embedded certificate's DER bytes, in container order.
    public var certificates: [[UInt8]]
    /// The signers (App Store receipts have exactly one).
    public var signerInfos: [SignerInfo]
    /// Whether the outer container used BER indefinite lengths (Xcode receipts do).
    public var usesIndefiniteLength: Bool

    /// One `SignerInfo`: who signed, with which algorithms, and the signature.
    public struct SignerInfo: Sendable {
        /// DER of the signer certificate's issuer `Name`.
        public var issuer: [UInt8]
        /// Content bytes of the signer certificate's serial number INTEGER.
        public var serialNumber: [UInt8]
        /// The digest algorithm, e.g. SHA-1 `1.3.14.3.2.26` or SHA-256 `2.16.840.1.101.3.4.2.1`.
        public var digestAlgorithm: ASN1ObjectIdentifier
        /// The signed attributes re-tagged as a DER `SET` (what the signature covers when present).
        public var signedAttributes: [UInt8]?
        /// The `messageDigest` signed attribute, when signed attributes are present.
        public var messageDigest: [UInt8]?
        /// The signature algorithm, e.g. `rsaEncryption` or `sha256WithRSAEncryption`.
        public var signatureAlgorithm: ASN1ObjectIdentifier
        /// The raw signature bytes.
        public var signature: [UInt8]
    }

    static let signedDataOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 2]
    static let dataOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 1]
    static let messageDigestOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 4]

    /// Takes apart a DER or BER `ContentInfo` holding `SignedData`.
    public init(berEncoded bytes: [UInt8], limits: InputLimits = .default) throws {
        guard bytes.count <= limits.maxReceiptBytes else {
            throw AppStoreError(.tooLarge, "receipt is \(bytes.count) bytes; the limit is \(limits.maxReceiptBytes)")
        }
        let root = try ASN1Reader.parse(bytes[...], "receipt container")
        usesIndefiniteLength = bytes.count > 1 && bytes[1] == 0x80
        try ASN1Reader.expect(root, .sequence, "ContentInfo")
        let contentInfo = try ASN1Reader.children(root, "ContentInfo")
        guard contentInfo.count == 2 else { throw AppStoreError.malformed("ContentInfo has \(contentInfo.count) fields") }
        guard try ASN1Reader.objectIdentifier(contentInfo[0], "contentType") == Self.signedDataOID else {
            throw AppStoreError.malformed("container is not PKCS#7 signedData")
        }
        let explicit = try ASN1Reader.children(contentInfo[1], "[0] content")
        guard contentInfo[1].identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific), explicit.count == 1 else {
            throw AppStoreError.malformed("signedData is not wrapped in [0]")
        }
        try ASN1Reader.expect(explicit[0], .sequence, "SignedData")
        var fields = try ASN1Reader.children(explicit[0], "SignedData")[...]
        guard fields.count >= 4 else { throw AppStoreError.malformed("SignedData has \(fields.count) fields") }
        _ = try ASN1Reader.integer(fields.removeFirst(), "SignedData.version")
        try ASN1Reader.expect(fields.removeFirst(), .set, "digestAlgorithms")

        let encapsulated = try ASN1Reader.children(fields.removeFirst(), "encapContentInfo")
        guard encapsulated.count == 2, try ASN1Reader.objectIdentifier(encapsulated[0], "eContentType") == Self.dataOID else {
            throw AppStoreError.malformed("encapsulated content is not PKCS#7 data")
        }
        let eContent = try ASN1Reader.children(encapsulated[1], "[0] eContent")
        guard eContent.count == 1 else { throw AppStoreError.malformed("eContent is not one OCTET STRING") }
        content = try ASN1Reader.octets(eContent[0], "eContent")

        certificates = []
        signerInfos = []
        while let field = fields.first, field.identifier.tagClass == .contextSpecific {
            fields.removeFirst()
            if field.identifier.tagNumber == 0 {
                for certificate in try ASN1Reader.children(field, "certificates") {
                    certificates.append(Array(certificate.encodedBytes))
                    guard certificates.count <= limits.maxCertificates else {
                        throw AppStoreError(.tooLarge, "receipt embeds more than \(limits.maxCertificates) certificates")
                    }
                }
            }
        }
        guard let signerSet = fields.first, fields.count == 1 else { throw AppStoreError.malformed("SignedData has no signerInfos") }
        try ASN1Reader.expect(signerSet, .set, "signerInfos")
        for signer in try ASN1Reader.children(signerSet, "signerInfos") {
            signerInfos.append(try SignerInfo(node: signer))
            guard signerInfos.count <= limits.maxCertificates else { throw AppStoreError(.tooLarge, "too many signers") }
        }
    }
}

extension PKCS7SignedData.SignerInfo {
    init(node: ASN1Node) throws {
        try ASN1Reader.expect(node, .sequence, "SignerInfo")
        var fields = try ASN1Reader.children(node, "SignerInfo")[...]
        guard fields.count >= 5 else { throw AppStoreError.malformed("SignerInfo has \(fields.count) fields") }
        _ = try ASN1Reader.integer(fields.removeFirst(), "SignerInfo.version")
        let sid = try ASN1Reader.children(fields.removeFirst(), "issuerAndSerialNumber")
        guard sid.count == 2 else { throw AppStoreError.malformed("signer is not identified by issuer and serial number") }
        issuer = Array(sid[0].encodedBytes)
        try ASN1Reader.expect(sid[1], .integer, "serialNumber")
        serialNumber = Array(try ASN1Reader.primitive(sid[1], "serialNumber"))
        digestAlgorithm = try Self.algorithm(fields.removeFirst(), "digestAlgorithm")

        signedAttributes = nil
        messageDigest = nil
        if let attributes = fields.first, attributes.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            fields.removeFirst()
            // The signature covers the attributes as a universal SET, not as the [0] they are stored under.
            var encoded = Array(attributes.encodedBytes)
            encoded[0] = 0x31
            signedAttributes = encoded
            for attribute in try ASN1Reader.children(attributes, "signedAttrs") {
                let parts = try ASN1Reader.children(attribute, "Attribute")
                guard parts.count == 2 else { throw AppStoreError.malformed("signed attribute has \(parts.count) fields") }
                if try ASN1Reader.objectIdentifier(parts[0], "attrType") == PKCS7SignedData.messageDigestOID {
                    let values = try ASN1Reader.children(parts[1], "messageDigest values")
                    guard values.count == 1 else { throw AppStoreError.malformed("messageDigest must have one value") }
                    messageDigest = try ASN1Reader.octets(values[0], "messageDigest")
                }
            }
        }
        guard fields.count >= 2 else { throw AppStoreError.malformed("SignerInfo lacks its signature") }
        signatureAlgorithm = try Self.algorithm(fields.removeFirst(), "signatureAlgorithm")
        signature = try ASN1Reader.octets(fields.removeFirst(), "signature")
    }

    private static func algorithm(_ node: ASN1Node, _ what: String) throws -> ASN1ObjectIdentifier {
        try ASN1Reader.expect(node, .sequence, what)
        let parts = try ASN1Reader.children(node, what)
        guard let first = parts.first else { throw AppStoreError.malformed("\(what) is empty") }
        return try ASN1Reader.objectIdentifier(first, what)
    }
}
