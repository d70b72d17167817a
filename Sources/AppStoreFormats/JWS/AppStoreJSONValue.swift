import Foundation

/// A JSON value kept as Apple sent it: for objects whose every field IAPKit does not model yet (Advanced Commerce
/// `advancedCommerceInfo`, the commitment info of API 1.21), so that a payload read and written back loses nothing.
public indirect enum AppStoreJSONValue: Codable, Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([AppStoreJSONValue])
    case object([String: AppStoreJSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([AppStoreJSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: AppStoreJSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object.
    public subscript(key: String) -> AppStoreJSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }
}
