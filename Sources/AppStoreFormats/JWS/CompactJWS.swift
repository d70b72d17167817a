/// A compact JWS (`header.payload.signature`) split on its bytes, decoding nothing until asked.
///
/// Keeping the header segment as raw bytes lets a verifier recognise a header (and so a certificate chain) it has
/// already verified without decoding its JSON or base64 again.
public struct CompactJWS: Sendable {
    /// The whole compact serialization.
    public let bytes: [UInt8]
    /// The index of the first `.` and of the second.
    private let firstDot: Int
    private let secondDot: Int

    /// Splits `bytes` into exactly three non-empty segments.
    public init(_ bytes: [UInt8], limits: InputLimits = .default) throws {
        guard bytes.count <= limits.maxJWSBytes else {
            throw AppStoreError(.tooLarge, "JWS is \(bytes.count) bytes; the limit is \(limits.maxJWSBytes)")
        }
        var dots: [Int] = []
        // An index loop, not `enumerated()`: unspecialized (debug builds), the tuple iterator costs more than the
        // signature check on a 5 KB JWS.
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ".") {
                dots.append(index)
                guard dots.count <= 2 else { throw AppStoreError.malformed("JWS has more than three segments") }
            }
            index += 1
        }
        guard dots.count == 2 else { throw AppStoreError.malformed("JWS must have three segments, found \(dots.count + 1)") }
        guard dots[0] > 0, dots[1] > dots[0] + 1, dots[1] < bytes.count - 1 else {
            throw AppStoreError.malformed("JWS has an empty segment")
        }
        self.bytes = bytes
        firstDot = dots[0]
        secondDot = dots[1]
    }

    /// Splits a string form.
    public init(_ string: String, limits: InputLimits = .default) throws {
        try self.init(Array(string.utf8), limits: limits)
    }

    /// The base64url header segment, as sent.
    public var headerSegment: ArraySlice<UInt8> { bytes[..<firstDot] }
    /// The base64url payload segment, as sent.
    public var payloadSegment: ArraySlice<UInt8> { bytes[(firstDot + 1)..<secondDot] }
    /// The bytes the signature covers: `header.payload`.
    public var signingInput: ArraySlice<UInt8> { bytes[..<secondDot] }
    /// The base64url signature segment, as sent.
    public var signatureSegment: ArraySlice<UInt8> { bytes[(secondDot + 1)...] }

    /// Decodes the protected header.
    public func header() throws -> JWSHeader {
        guard let json = Base64.decode(headerSegment) else { throw AppStoreError.malformed("JWS header is not base64url") }
        return try AppStoreJSON.decode(JWSHeader.self, from: json, what: "JWS header")
    }

    /// The payload's JSON bytes.
    public func payload() throws -> [UInt8] {
        guard let json = Base64.decode(payloadSegment) else { throw AppStoreError.malformed("JWS payload is not base64url") }
        return json
    }

    /// Decodes the payload as `T` without verifying anything.
    public func unverifiedPayload<T: Decodable>(as type: T.Type) throws -> T {
        try AppStoreJSON.decode(type, from: payload(), what: "JWS payload")
    }

    /// The raw signature bytes (for ES256, `r ‖ s`, 64 bytes).
    public func signature() throws -> [UInt8] {
        guard let signature = Base64.decode(signatureSegment) else { throw AppStoreError.malformed("JWS signature is not base64url") }
        return signature
    }
}

/// The protected header of an App Store JWS.
public struct JWSHeader: Codable, Hashable, Sendable {
    /// Must be `ES256` for anything the App Store signs.
    public var alg: String?
    /// `Apple_Xcode_Key` on Xcode-signed payloads; ignored otherwise.
    public var kid: String?
    public var typ: String?
    /// Standard-base64 DER certificates: leaf, intermediate, root.
    public var x5c: [String]?

    public init(alg: String? = "ES256", kid: String? = nil, typ: String? = nil, x5c: [String]? = nil) {
        self.alg = alg
        self.kid = kid
        self.typ = typ
        self.x5c = x5c
    }

    /// The `x5c` certificates as DER bytes.
    public func certificateChain(limits: InputLimits = .default) throws -> [[UInt8]] {
        guard let x5c, !x5c.isEmpty else { throw AppStoreError(.invalidChainLength, "JWS header has no x5c certificates") }
        guard x5c.count <= limits.maxCertificates else {
            throw AppStoreError(.tooLarge, "JWS header carries \(x5c.count) certificates")
        }
        return try x5c.enumerated().map { index, entry in
            guard let der = Base64.decode(entry.utf8) else { throw AppStoreError.malformed("x5c[\(index)] is not base64") }
            return der
        }
    }
}
