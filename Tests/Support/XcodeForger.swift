import AppStoreFormats
import Crypto
import Foundation
import SwiftASN1
import X509

/// What anyone can make: a payload in Xcode's layout, signed with a self-signed certificate of their own.
public struct XcodeForger: Sendable {
    let key = P256.Signing.PrivateKey()
    let certificate: [UInt8]

    public init() throws {
        let name = try DistinguishedName { CommonName("StoreKit Testing in Xcode") }
        let now = Date()
        let made = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: now - 86_400,
                                   notValidAfter: now + 365 * 86_400, issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: Certificate.Extensions {}, issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(made)
        certificate = serializer.serializedBytes
    }

    public func sign(_ payload: some Encodable) throws -> String {
        let header = #"{"alg":"ES256","x5c":["\#(Data(certificate).base64EncodedString())"]}"#
        let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(try AppStoreJSON.encoder().encode(payload)))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64.urlEncode(Array(signature.rawRepresentation))
    }
}
