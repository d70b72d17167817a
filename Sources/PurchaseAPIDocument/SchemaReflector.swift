import Foundation
import PurchaseAPI

/// JSON Schemas read from the contract types' own `init(from:)`: each type is decoded once from a decoder that answers
/// every question with a placeholder and writes down what was asked. A key read with `decode` is required, one read
/// with `decodeIfPresent` (or after `contains`/`decodeNil`) is not, unless the type says the server always sends it
/// (``APISchemaHints``). So a custom `init(from:)` (a flattened body, a lenient field) is described as it really reads,
/// and the document cannot drift from the types.
final class SchemaReflector {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `components/schemas`: every keyed type met, under ``name(of:)``.
    private(set) var components: [String: JSONValue] = [:]
    /// The type each of ``components`` was read from.
    private(set) var types: [String: any Decodable.Type] = [:]
    private var depth = 0

    /// The schema of `type` where it is used (a `$ref` for a keyed type, the schema itself otherwise).
    func schema(of type: any Decodable.Type) throws -> JSONValue {
        try reflect(type, at: []).schema
    }

    /// The schema of `type` where it is used, and a placeholder value of it for the decoder that asked.
    func reflect<T: Decodable>(_ type: T.Type, at path: [any CodingKey]) throws -> (schema: JSONValue, value: T) {
        if let (schema, value) = Self.primitive(type) { return (schema, value as! T) }
        if let closed = type as? any (CaseIterable & RawRepresentable).Type {
            let (schema, value) = try Self.closedEnum(closed)
            return (schema, value as! T)
        }
        depth += 1
        defer { depth -= 1 }
        // A type that contains itself would be read forever; none of the contract's does.
        guard depth < 32 else { throw Failure(description: "\(String(reflecting: type)) nests too deep: is it recursive?") }
        let recorder = Recorder()
        let value: T
        do {
            value = try T(from: ReflectingDecoder(reflector: self, recorder: recorder, codingPath: path))
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "\(String(reflecting: type)) could not be read for its schema at \(path.map(\.stringValue)): \(error) "
                + "(a String enum must be CaseIterable to be described)")
        }
        switch recorder.shape {
        case .single(let schema):
            return (schema, value)
        case .array(let items):
            return (["type": "array", "items": items ?? [:]], value)
        case .object where recorder.isMap:
            return (["type": "object", "additionalProperties": recorder.mapValue ?? [:]], value)
        case .object:
            let name = try Self.name(of: type)
            if let known = types[name] {
                guard known == type else { throw Failure(description: "\(String(reflecting: known)) and \(String(reflecting: type)) are both named \(name)") }
            } else {
                components[name] = try Self.objectSchema(recorder, hints: (type as? any APISchemaHints.Type)?.alwaysSent ?? [], of: type)
                types[name] = type
            }
            return (["$ref": .string("#/components/schemas/\(name)")], value)
        case nil:
            throw Failure(description: "\(String(reflecting: type)) decodes nothing")
        }
    }

    private static func objectSchema(_ recorder: Recorder, hints: Set<String>, of type: Any.Type) throws -> JSONValue {
        let unknown = hints.subtracting(recorder.properties.keys)
        guard unknown.isEmpty else {
            throw Failure(description: "\(String(reflecting: type)) says it always sends \(unknown.sorted()), which it does not decode")
        }
        var schema: [String: JSONValue] = ["type": "object", "properties": .object(recorder.properties)]
        let required = recorder.required.union(hints)
        if !required.isEmpty { schema["required"] = .array(required.sorted().map(JSONValue.string)) }
        return .object(schema)
    }

    /// The type's name without its module, nested types joined by dots (`Entitlements.Item`): stable as long as the
    /// type keeps its name, and a valid component name.
    static func name(of type: Any.Type) throws -> String {
        let qualified = String(reflecting: type)
        let name = qualified.split(separator: ".", maxSplits: 1).dropFirst().first.map(String.init) ?? qualified
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_") }) else {
            throw Failure(description: "\(qualified) has no name a schema can be stored under (a generic or local type?)")
        }
        return name
    }

    private static func primitive(_ type: Any.Type) -> (JSONValue, Any)? {
        let integer: JSONValue = ["type": "integer"]
        switch type {
        case is String.Type: return (["type": "string"], "")
        case is Bool.Type: return (["type": "boolean"], false)
        case is Int.Type: return (integer, 0)
        case is Int64.Type: return (integer, Int64(0))
        case is Int32.Type: return (integer, Int32(0))
        case is Int16.Type: return (integer, Int16(0))
        case is Int8.Type: return (integer, Int8(0))
        case is UInt.Type: return (integer, UInt(0))
        case is UInt64.Type: return (integer, UInt64(0))
        case is UInt32.Type: return (integer, UInt32(0))
        case is UInt16.Type: return (integer, UInt16(0))
        case is UInt8.Type: return (integer, UInt8(0))
        case is Double.Type: return (["type": "number"], 0.0)
        case is Float.Type: return (["type": "number"], Float(0))
        // APIJSON's convention, the same as Apple's: whole milliseconds since 1970.
        case is Date.Type: return (["type": "integer", "description": "milliseconds since 1970"], Date(timeIntervalSince1970: 0))
        case is UUID.Type: return (["type": "string", "format": "uuid"], UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        default: return nil
        }
    }

    /// A closed enumeration: exactly its raw values. (Open ones, structs over a raw string, decode a string and are
    /// described as one: a value they do not know yet is still theirs.)
    private static func closedEnum<E: CaseIterable & RawRepresentable>(_ type: E.Type) throws -> (JSONValue, Any) {
        guard let words = type.allCases.map(\.rawValue) as? [String], let first = type.allCases.first else {
            throw Failure(description: "\(String(reflecting: type)) is not an enumeration of strings")
        }
        return (["type": "string", "enum": .array(words.map(JSONValue.string))], first)
    }
}

/// What one value's decoding asked for.
final class Recorder {
    enum Shape {
        case object
        case array(JSONValue?)
        case single(JSONValue)
    }

    var shape: Shape?
    var properties: [String: JSONValue] = [:]
    var required: Set<String> = []
    /// Keys asked about before being read: optional whatever reads them next.
    var probed: Set<String> = []
    /// Whether the keys were asked for: a dictionary, described by its values' schema.
    var isMap = false
    var mapValue: JSONValue?

    func become(_ shape: Shape, _ path: [any CodingKey]) throws {
        switch (self.shape, shape) {
        case (nil, _), (.object?, .object): self.shape = shape
        default: throw SchemaReflector.Failure(description: "at \(path.map(\.stringValue)): a value read as two kinds of JSON")
        }
    }
}

struct ReflectingDecoder: Decoder {
    let reflector: SchemaReflector
    let recorder: Recorder
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        // Every keyed container of one decoder describes the same object: a body that flattens another type's fields
        // into its own (EntitlementsReply) gets both sets.
        try recorder.become(.object, codingPath)
        return KeyedDecodingContainer(KeyedReflector<Key>(reflector: reflector, recorder: recorder, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try recorder.become(.array(nil), codingPath)
        return UnkeyedReflector(reflector: reflector, recorder: recorder, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleReflector(reflector: reflector, recorder: recorder, codingPath: codingPath)
    }
}

/// What the reflector does not describe: the contract's types have no use for it.
private func unsupported(_ what: String, _ path: [any CodingKey]) -> SchemaReflector.Failure {
    SchemaReflector.Failure(description: "at \(path.map(\.stringValue)): \(what) is not described by the schema reflector")
}

struct KeyedReflector<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let reflector: SchemaReflector
    let recorder: Recorder
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
        recorder.isMap = true
        return [Key(stringValue: "key")].compactMap { $0 }
    }

    func contains(_ key: Key) -> Bool {
        recorder.probed.insert(key.stringValue)
        return true
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        recorder.probed.insert(key.stringValue)
        return false
    }

    private func field<T: Decodable>(_ type: T.Type, _ key: Key, required: Bool) throws -> T {
        let (schema, value) = try reflector.reflect(type, at: codingPath + [key])
        if recorder.isMap {
            recorder.mapValue = schema
        } else {
            recorder.properties[key.stringValue] = schema
            if required, !recorder.probed.contains(key.stringValue) { recorder.required.insert(key.stringValue) }
        }
        return value
    }

    /// Absent, as from an old server: the schema is written down, and the type goes on as it would without the field.
    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        _ = try field(type, key, required: false)
        return nil
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try field(type, key, required: true) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try field(type, key, required: true) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try field(type, key, required: true) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try field(type, key, required: true) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try field(type, key, required: true) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try field(type, key, required: true) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try field(type, key, required: true) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try field(type, key, required: true) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try field(type, key, required: true) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try field(type, key, required: true) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try field(type, key, required: true) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try field(type, key, required: true) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try field(type, key, required: true) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try field(type, key, required: true) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try field(type, key, required: true) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try optional(type, key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional(type, key) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw unsupported("a nested keyed container", codingPath + [key])
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw unsupported("a nested unkeyed container", codingPath + [key])
    }

    func superDecoder() throws -> any Decoder { throw unsupported("a super decoder", codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw unsupported("a super decoder", codingPath + [key]) }
}

/// An array of exactly one element: its schema is the items'.
struct UnkeyedReflector: UnkeyedDecodingContainer {
    struct Index: CodingKey {
        var stringValue: String { String(intValue ?? 0) }
        var intValue: Int?
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    let reflector: SchemaReflector
    let recorder: Recorder
    let codingPath: [any CodingKey]
    var count: Int? { 1 }
    var isAtEnd: Bool { currentIndex >= 1 }
    private(set) var currentIndex = 0

    init(reflector: SchemaReflector, recorder: Recorder, codingPath: [any CodingKey]) {
        self.reflector = reflector
        self.recorder = recorder
        self.codingPath = codingPath
    }

    mutating func decodeNil() throws -> Bool { false }

    private mutating func element<T: Decodable>(_ type: T.Type) throws -> T {
        let (schema, value) = try reflector.reflect(type, at: codingPath + [Index(intValue: currentIndex)])
        recorder.shape = .array(schema)
        currentIndex += 1
        return value
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try element(type) }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try element(type) }
    mutating func decode(_ type: String.Type) throws -> String { try element(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try element(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try element(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try element(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try element(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try element(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try element(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try element(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try element(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try element(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try element(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try element(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try element(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        throw unsupported("a nested keyed container", codingPath)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw unsupported("a nested unkeyed container", codingPath) }
    mutating func superDecoder() throws -> any Decoder { throw unsupported("a super decoder", codingPath) }
}

struct SingleReflector: SingleValueDecodingContainer {
    let reflector: SchemaReflector
    let recorder: Recorder
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { false }

    private func value<T: Decodable>(_ type: T.Type) throws -> T {
        let (schema, value) = try reflector.reflect(type, at: codingPath)
        try recorder.become(.single(schema), codingPath)
        return value
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(type) }
    func decode(_ type: Bool.Type) throws -> Bool { try value(type) }
    func decode(_ type: String.Type) throws -> String { try value(type) }
    func decode(_ type: Double.Type) throws -> Double { try value(type) }
    func decode(_ type: Float.Type) throws -> Float { try value(type) }
    func decode(_ type: Int.Type) throws -> Int { try value(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try value(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try value(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try value(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try value(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try value(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value(type) }
}
