/// A no-copy walker over BER/DER TLVs, for the receipt payload.
///
/// A receipt payload is thousands of tiny `SEQUENCE { INTEGER, INTEGER, OCTET STRING }` triples; building a node tree
/// for each (as a general ASN.1 parser does) costs an allocation per node. This walker hands out index ranges into
/// the one payload buffer instead. It accepts definite and indefinite lengths and constructed OCTET STRINGs, refuses
/// high tag numbers (no receipt uses them), and limits nesting.
struct TLVWalker {
    let bytes: ArraySlice<UInt8>

    /// One element: its identifier octet and where its content lies.
    struct Element {
        let tag: UInt8
        /// Content bytes; for an indefinite length, the children without the end-of-contents octets.
        let content: Range<Int>
        /// Index just past the element (after end-of-contents for an indefinite length).
        let end: Int

        var isConstructed: Bool { tag & 0x20 != 0 }
    }

    static let maxDepth = 16
    static let sequence: UInt8 = 0x30
    static let set: UInt8 = 0x31
    static let integer: UInt8 = 0x02
    static let octetString: UInt8 = 0x04
    static let constructedOctetString: UInt8 = 0x24

    /// The single element spanning all of `bytes`.
    func root() throws -> Element {
        let element = try element(at: bytes.startIndex, depth: 0)
        guard element.end == bytes.endIndex else { throw AppStoreError.malformed("trailing bytes after the receipt payload") }
        return element
    }

    /// Calls `body` for each child of a constructed element, in order.
    func forEachChild(of parent: Element, depth: Int = 1, _ body: (Element) throws -> Void) throws {
        guard parent.isConstructed else { throw AppStoreError.malformed("expected a constructed element (tag \(parent.tag))") }
        var index = parent.content.lowerBound
        while index < parent.content.upperBound {
            let child = try element(at: index, depth: depth)
            guard child.end <= parent.content.upperBound else { throw AppStoreError.malformed("element overruns its parent") }
            try body(child)
            index = child.end
        }
    }

    /// The bytes of an OCTET STRING: a slice for a primitive one, the joined chunks for a constructed one.
    func octets(_ element: Element, depth: Int = 1) throws -> ArraySlice<UInt8> {
        switch element.tag {
        case Self.octetString:
            return bytes[element.content]
        case Self.constructedOctetString:
            var joined: [UInt8] = []
            try forEachChild(of: element, depth: depth + 1) { chunk in joined += try octets(chunk, depth: depth + 1) }
            return joined[...]
        default:
            throw AppStoreError.malformed("expected an OCTET STRING (tag \(element.tag))")
        }
    }

    /// A two's-complement INTEGER that fits 64 bits.
    func integer(_ element: Element) throws -> Int64 {
        guard element.tag == Self.integer else { throw AppStoreError.malformed("expected an INTEGER (tag \(element.tag))") }
        return try ASN1Reader.integer(content: bytes[element.content], "INTEGER")
    }

    private func element(at start: Int, depth: Int) throws -> Element {
        guard depth <= Self.maxDepth else { throw AppStoreError.malformed("receipt payload nests deeper than \(Self.maxDepth)") }
        var index = start
        guard index < bytes.endIndex else { throw AppStoreError.malformed("truncated element") }
        let tag = bytes[index]
        guard tag & 0x1F != 0x1F else { throw AppStoreError.malformed("high tag numbers do not occur in receipts") }
        index += 1
        guard index < bytes.endIndex else { throw AppStoreError.malformed("element has no length") }
        let first = bytes[index]
        index += 1
        if first == 0x80 {
            guard tag & 0x20 != 0 else { throw AppStoreError.malformed("indefinite length on a primitive element") }
            var cursor = index
            while true {
                guard cursor + 1 < bytes.endIndex else { throw AppStoreError.malformed("indefinite length without end-of-contents") }
                if bytes[cursor] == 0, bytes[cursor + 1] == 0 { return Element(tag: tag, content: index..<cursor, end: cursor + 2) }
                cursor = try element(at: cursor, depth: depth + 1).end
            }
        }
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count <= 4, bytes.endIndex - index >= count else { throw AppStoreError.malformed("unsupported length encoding") }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index >= length else { throw AppStoreError.malformed("element is longer than its input") }
        return Element(tag: tag, content: index..<(index + length), end: index + length)
    }
}
