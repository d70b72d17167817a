import Foundation
import SwiftASN1

/// Small readers over swift-asn1 nodes that accept what Apple actually emits: BER indefinite lengths, constructed
/// OCTET STRINGs, and SET OF members out of DER order.
enum ASN1Reader {
    static func children(_ node: ASN1Node, _ what: @autoclosure () -> String) throws -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else { throw AppStoreError.malformed("\(what()) is not constructed") }
        return Array(nodes)
    }

    static func expect(_ node: ASN1Node, _ identifier: ASN1Identifier, _ what: @autoclosure () -> String) throws {
        guard node.identifier == identifier else {
            throw AppStoreError.malformed("\(what()): expected \(identifier), found \(node.identifier)")
        }
    }

    /// The content of an OCTET STRING, concatenating the chunks of a constructed (BER) one.
    static func octets(_ node: ASN1Node, _ what: @autoclosure () -> String) throws -> [UInt8] {
        try expect(node, .octetString, what())
        switch node.content {
        case .primitive(let bytes):
            return Array(bytes)
        case .constructed(let chunks):
            var result: [UInt8] = []
            for chunk in chunks { result += try octets(chunk, what()) }
            return result
        }
    }

    static func primitive(_ node: ASN1Node, _ what: @autoclosure () -> String) throws -> ArraySlice<UInt8> {
        guard case .primitive(let bytes) = node.content else { throw AppStoreError.malformed("\(what()) is not primitive") }
        return bytes
    }

    /// A two's-complement INTEGER that fits 64 bits.
    static func integer(_ node: ASN1Node, _ what: @autoclosure () -> String) throws -> Int64 {
        try expect(node, .integer, what())
        return try integer(content: primitive(node, what()), what())
    }

    static func integer(content bytes: ArraySlice<UInt8>, _ what: @autoclosure () -> String) throws -> Int64 {
        guard !bytes.isEmpty, bytes.count <= 8 else { throw AppStoreError.malformed("\(what()) is not a 64-bit integer") }
        var value: Int64 = (bytes.first! & 0x80) != 0 ? -1 : 0
        for byte in bytes { value = (value << 8) | Int64(byte) }
        return value
    }

    static func objectIdentifier(_ node: ASN1Node, _ what: @autoclosure () -> String) throws -> ASN1ObjectIdentifier {
        do { return try ASN1ObjectIdentifier(derEncoded: node) } catch {
            throw AppStoreError.malformed("\(what()) is not an object identifier")
        }
    }

    static func parse(_ bytes: ArraySlice<UInt8>, _ what: @autoclosure () -> String) throws -> ASN1Node {
        do { return try BER.parse(bytes) } catch {
            throw AppStoreError.malformed("\(what()) is not valid DER/BER: \(error)")
        }
    }
}

/// One definite-length TLV inside a receipt attribute's value: tag byte and content.
///
/// Attribute values are tiny and numerous (a large receipt has thousands); reading them directly avoids building a
/// node tree per value.
struct InnerValue {
    let tag: UInt8
    let content: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) throws {
        var index = bytes.startIndex
        guard index < bytes.endIndex else { throw AppStoreError.malformed("empty attribute value") }
        tag = bytes[index]
        index += 1
        guard index < bytes.endIndex else { throw AppStoreError.malformed("attribute value has no length") }
        let first = bytes[index]
        index += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 4, bytes.endIndex - index >= count else {
                throw AppStoreError.malformed("attribute value has an unsupported length")
            }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index == length else { throw AppStoreError.malformed("attribute value length mismatch") }
        content = bytes[index...]
    }

    static let utf8String: UInt8 = 0x0C
    static let ia5String: UInt8 = 0x16
    static let integer: UInt8 = 0x02
    static let set: UInt8 = 0x31

    func string(_ what: @autoclosure () -> String) throws -> String {
        // Apple uses UTF8String for most and IA5String for dates and a few others; accept the printable string
        // types interchangeably since the content is UTF-8 either way.
        guard [Self.utf8String, Self.ia5String, 0x13, 0x1A].contains(tag) else {
            throw AppStoreError.malformed("\(what()) is not a string (tag \(tag))")
        }
        guard let string = String(validating: content, as: UTF8.self) else {
            throw AppStoreError.malformed("\(what()) is not valid UTF-8")
        }
        return string
    }

    func optionalString(_ what: @autoclosure () -> String) throws -> String? {
        let value = try string(what())
        return value.isEmpty ? nil : value
    }

    func integer(_ what: @autoclosure () -> String) throws -> Int64 {
        guard tag == Self.integer else { throw AppStoreError.malformed("\(what()) is not an integer (tag \(tag))") }
        return try ASN1Reader.integer(content: content, what())
    }

    /// An empty string means the date is absent; anything else must parse.
    func date(_ what: @autoclosure () -> String) throws -> Date? {
        let text = try string(what())
        if text.isEmpty { return nil }
        guard let date = ReceiptDate.parse(rfc3339: content) else { throw AppStoreError.malformed("\(what()) is not a date: \(text)") }
        return date
    }
}

/// Minimal DER writing for values IAPKit itself creates.
public enum ASN1Writer {
    /// DER length octets.
    public static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// A complete TLV with the given tag.
    public static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }

    /// A DER UTF8String.
    public static func utf8String(_ string: String) -> [UInt8] { tlv(0x0C, Array(string.utf8)) }
}
