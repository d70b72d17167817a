import Foundation

extension APIJSON {
    /// `value` as the API writes it: the bytes `encoder()` writes on Linux (sorted keys, slashes as they are, dates in
    /// whole milliseconds), without Foundation's `JSONEncoder`.
    ///
    /// Every answer of the server goes through here, the purchase's among them: Foundation's encoder builds a tree of
    /// a reference per value and a dictionary per object, and took ~5 % of the server's CPU on a purchase whose reply
    /// is 200 bytes. This one writes each scalar once into a scratch buffer and keeps one small array per object or
    /// array. `APIJSONWriterTests` holds the two equal byte for byte over every type of the contract.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        let scratch = JSONScratch()
        let root = try scratch.node(for: value, at: [])
        guard let root else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(type(of: value)) did not encode any values."))
        }
        var output: [UInt8] = []
        output.reserveCapacity(scratch.bytes.count + 64)
        scratch.write(root, to: &output)
        return output
    }
}

/// A value being written: a scalar already in the scratch buffer, or a container still being filled.
enum JSONNode {
    case scalar(Range<Int>)
    case object(JSONObjectBox)
    case array(JSONArrayBox)
    /// What an encoder handed out (`superEncoder`, a nested value) becomes; read when the whole value is written.
    case deferred(JSONNodeEncoder)
}

final class JSONObjectBox {
    var fields: [(key: String, value: JSONNode)] = []
}

final class JSONArrayBox {
    var items: [JSONNode] = []
}

/// The bytes of every scalar of one value, in the order they were encoded; objects and arrays point into it.
final class JSONScratch {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(256) }

    /// `value`'s node: a scalar the API spells its own way (a date, a string), or what its `encode(to:)` wrote.
    func node<T: Encodable>(for value: T, at codingPath: [any CodingKey]) throws -> JSONNode? {
        if T.self == String.self { return string(value as! String) }
        if T.self == Date.self { return date(value as! Date) }
        if T.self == Int64.self { return integer(value as! Int64) }
        if T.self == Int.self { return integer(value as! Int) }
        if T.self == Bool.self { return literal((value as! Bool) ? "true" : "false") }
        // As `JSONEncoder` spells them rather than by their own `encode(to:)`. Compared as types, not cast: a dynamic
        // cast for each nested value of every answer costs more, and these are structs (no subclass to miss); an
        // optional one arrives here unwrapped, through `Optional`'s own `encode(to:)`.
        if T.self == URL.self { return string((value as! URL).absoluteString) }
        if T.self == Decimal.self { return literal((value as! Decimal).description) }
        if T.self == Data.self { return string((value as! Data).base64EncodedString()) }
        let encoder = JSONNodeEncoder(scratch: self, codingPath: codingPath)
        try value.encode(to: encoder)
        return encoder.node
    }

    func literal(_ text: StaticString) -> JSONNode {
        let start = bytes.count
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
        return .scalar(start..<bytes.count)
    }

    func literal(_ text: String) -> JSONNode {
        let start = bytes.count
        bytes.append(contentsOf: text.utf8)
        return .scalar(start..<bytes.count)
    }

    func integer(_ value: some FixedWidthInteger) -> JSONNode {
        let start = bytes.count
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
        } else {
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            let digitsStart = bytes.count
            var rest = value.magnitude
            while rest > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10))
                rest /= 10
            }
            bytes[digitsStart...].reverse()
        }
        return .scalar(start..<bytes.count)
    }

    /// Whole milliseconds since 1970, rounded, as ``APIJSON/encoder(sortedKeys:)`` writes a date.
    func date(_ date: Date) -> JSONNode {
        integer(Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }

    /// As `JSONEncoder` writes a floating-point number: the shortest form that reads back, without a trailing `.0`.
    func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F, at codingPath: [any CodingKey]) throws -> JSONNode {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "Unable to encode \(F.self).\(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return literal(text)
    }

    func string(_ text: String) -> JSONNode {
        let start = bytes.count
        Self.appendString(text, to: &bytes)
        return .scalar(start..<bytes.count)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// `text` quoted, escaped as `JSONEncoder` escapes it (`"`, `\`, control characters; not `/`).
    static func appendString(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var plainFrom = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainFrom..<index]))
                plainFrom = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainFrom...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `node` as JSON at the end of `output`. An object's keys in the order of their UTF-8 bytes (swift-foundation's
    /// `sortedKeys` outside Apple's platforms; not `String`'s order, which compares a decomposed "é" as the composed
    /// one), and a value encoded twice under one key written once, the last — as `JSONEncoder`'s dictionary of an
    /// object keeps it. (Nested containers asked twice for one key, or a `superEncoder` still written to after its key
    /// was encoded again, are not merged as Foundation merges them; no type of the contract does either.)
    func write(_ node: JSONNode, to output: inout [UInt8]) {
        switch node {
        case .scalar(let range):
            output.append(contentsOf: bytes[range])
        case .deferred(let encoder):
            if let inner = encoder.node { write(inner, to: &output) } else { output.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")]) }
        case .array(let box):
            output.append(UInt8(ascii: "["))
            for (index, item) in box.items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(item, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let box):
            output.append(UInt8(ascii: "{"))
            let fields = box.fields
            // Sorted by key, then by the order of encoding: the last of equal keys is the one kept.
            let order = fields.indices.sorted { left, right in
                let (a, b) = (fields[left].key.utf8, fields[right].key.utf8)
                return a.elementsEqual(b) ? left < right : a.lexicographicallyPrecedes(b)
            }
            var first = true
            for (position, index) in order.enumerated() {
                if position + 1 < order.count, fields[order[position + 1]].key.utf8.elementsEqual(fields[index].key.utf8) { continue }
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                Self.appendString(fields[index].key, to: &output)
                output.append(UInt8(ascii: ":"))
                write(fields[index].value, to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }
}

/// The `Encoder` a value's `encode(to:)` is handed: it becomes one node.
final class JSONNodeEncoder: Encoder {
    let scratch: JSONScratch
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    fileprivate(set) var node: JSONNode?

    init(scratch: JSONScratch, codingPath: [any CodingKey]) {
        self.scratch = scratch
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Asked again (a flattened body: the entitlements' fields, then `signedEntitlements`), the same object.
        if case .object(let box)? = node { return KeyedEncodingContainer(JSONKeyedWriter<Key>(scratch: scratch, box: box, codingPath: codingPath)) }
        let box = JSONObjectBox()
        node = .object(box)
        return KeyedEncodingContainer(JSONKeyedWriter<Key>(scratch: scratch, box: box, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array(let box)? = node { return JSONUnkeyedWriter(scratch: scratch, box: box, codingPath: codingPath) }
        let box = JSONArrayBox()
        node = .array(box)
        return JSONUnkeyedWriter(scratch: scratch, box: box, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        JSONSingleValueWriter(encoder: self)
    }

    fileprivate func set(_ value: JSONNode?) { node = value }
}

struct JSONIndexKey: CodingKey {
    var stringValue: String { "Index \(index)" }
    var intValue: Int? { index }
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { index = intValue }
}

struct JSONKeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let scratch: JSONScratch
    let box: JSONObjectBox
    let codingPath: [any CodingKey]

    private func put(_ node: JSONNode?, _ key: Key) {
        box.fields.append((key.stringValue, node ?? .object(JSONObjectBox())))
    }

    mutating func encodeNil(forKey key: Key) throws { put(scratch.literal("null"), key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(scratch.literal(value ? "true" : "false"), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(scratch.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try scratch.floatingPoint(value, at: codingPath + [key]), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try scratch.floatingPoint(value, at: codingPath + [key]), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(scratch.integer(value), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { put(try scratch.node(for: value, at: codingPath + [key]), key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONObjectBox()
        put(.object(nested), key)
        return KeyedEncodingContainer(JSONKeyedWriter<NestedKey>(scratch: scratch, box: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = JSONArrayBox()
        put(.array(nested), key)
        return JSONUnkeyedWriter(scratch: scratch, box: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: "super") }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue) }

    private func superEncoder(named name: String) -> any Encoder {
        let encoder = JSONNodeEncoder(scratch: scratch, codingPath: codingPath)
        box.fields.append((name, .deferred(encoder)))
        return encoder
    }
}

struct JSONUnkeyedWriter: UnkeyedEncodingContainer {
    let scratch: JSONScratch
    let box: JSONArrayBox
    let codingPath: [any CodingKey]
    var count: Int { box.items.count }

    private var nextPath: [any CodingKey] { codingPath + [JSONIndexKey(box.items.count)] }

    mutating func encodeNil() throws { box.items.append(scratch.literal("null")) }
    mutating func encode(_ value: Bool) throws { box.items.append(scratch.literal(value ? "true" : "false")) }
    mutating func encode(_ value: String) throws { box.items.append(scratch.string(value)) }
    mutating func encode(_ value: Double) throws { box.items.append(try scratch.floatingPoint(value, at: nextPath)) }
    mutating func encode(_ value: Float) throws { box.items.append(try scratch.floatingPoint(value, at: nextPath)) }
    mutating func encode(_ value: Int) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: Int8) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: Int16) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: Int32) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: Int64) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: UInt) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: UInt8) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: UInt16) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: UInt32) throws { box.items.append(scratch.integer(value)) }
    mutating func encode(_ value: UInt64) throws { box.items.append(scratch.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        box.items.append(try scratch.node(for: value, at: nextPath) ?? .object(JSONObjectBox()))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = JSONObjectBox()
        let path = nextPath
        box.items.append(.object(nested))
        return KeyedEncodingContainer(JSONKeyedWriter<NestedKey>(scratch: scratch, box: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = JSONArrayBox()
        let path = nextPath
        box.items.append(.array(nested))
        return JSONUnkeyedWriter(scratch: scratch, box: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = JSONNodeEncoder(scratch: scratch, codingPath: nextPath)
        box.items.append(.deferred(encoder))
        return encoder
    }
}

struct JSONSingleValueWriter: SingleValueEncodingContainer {
    let encoder: JSONNodeEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    private var scratch: JSONScratch { encoder.scratch }

    mutating func encodeNil() throws { encoder.set(scratch.literal("null")) }
    mutating func encode(_ value: Bool) throws { encoder.set(scratch.literal(value ? "true" : "false")) }
    mutating func encode(_ value: String) throws { encoder.set(scratch.string(value)) }
    mutating func encode(_ value: Double) throws { encoder.set(try scratch.floatingPoint(value, at: codingPath)) }
    mutating func encode(_ value: Float) throws { encoder.set(try scratch.floatingPoint(value, at: codingPath)) }
    mutating func encode(_ value: Int) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: Int8) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: Int16) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: Int32) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: Int64) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: UInt) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: UInt8) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: UInt16) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: UInt32) throws { encoder.set(scratch.integer(value)) }
    mutating func encode(_ value: UInt64) throws { encoder.set(scratch.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { encoder.set(try scratch.node(for: value, at: codingPath)) }
}
