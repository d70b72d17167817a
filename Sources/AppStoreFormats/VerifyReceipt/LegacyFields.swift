import Foundation

/// Any string as a coding key: verifyReceipt's keys (`is-retryable`, `purchase_date_ms`) are read by name.
struct AnyKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Reads verifyReceipt fields as Apple sends them: numbers and booleans as strings or as JSON values, dates as
/// `X` / `X_ms` / `X_pst` triples of which `X_ms` is authoritative.
struct LegacyReader {
    let container: KeyedDecodingContainer<AnyKey>

    init(_ decoder: any Decoder) throws { container = try decoder.container(keyedBy: AnyKey.self) }

    func string(_ key: String) throws -> String? {
        let key = AnyKey(key)
        guard container.contains(key), try !container.decodeNil(forKey: key) else { return nil }
        if let string = try? container.decode(String.self, forKey: key) { return string }
        if let number = try? container.decode(Int64.self, forKey: key) { return String(number) }
        if let bool = try? container.decode(Bool.self, forKey: key) { return bool ? "true" : "false" }
        throw DecodingError.typeMismatch(String.self, .init(codingPath: container.codingPath + [key], debugDescription: "expected a string"))
    }

    func int(_ key: String) throws -> Int64? {
        guard let text = try string(key), !text.isEmpty else { return nil }
        guard let value = Int64(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + [AnyKey(key)], debugDescription: "\(text) is not an integer"))
        }
        return value
    }

    func bool(_ key: String) throws -> Bool? {
        switch try string(key)?.lowercased() {
        case nil, "": return nil
        case "true", "1": return true
        case "false", "0": return false
        case let other?:
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + [AnyKey(key)], debugDescription: "\(other) is not a boolean"))
        }
    }

    func date(_ key: String) throws -> Date? {
        if let ms = try int(key + "_ms") { return Date(timeIntervalSince1970: Double(ms) / 1000) }
        guard let text = try string(key), !text.isEmpty else { return nil }
        guard let date = ReceiptDate.parse(legacyGMT: text) ?? ReceiptDate.parse(rfc3339: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + [AnyKey(key)], debugDescription: "\(text) is not a date"))
        }
        return date
    }

    func decode<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? {
        try container.decodeIfPresent(type, forKey: AnyKey(key))
    }
}

/// Writes verifyReceipt fields the way Apple does.
struct LegacyWriter {
    var container: KeyedEncodingContainer<AnyKey>

    init(_ encoder: any Encoder) { container = encoder.container(keyedBy: AnyKey.self) }

    mutating func string(_ key: String, _ value: String?) throws {
        try container.encodeIfPresent(value, forKey: AnyKey(key))
    }

    /// An integer inside `receipt`/`in_app`: Apple sends it as a string.
    mutating func stringInt(_ key: String, _ value: Int64?) throws {
        try container.encodeIfPresent(value.map(String.init), forKey: AnyKey(key))
    }

    /// One of the few integers Apple sends as a JSON number (`adam_id`, `app_item_id`, …).
    mutating func number(_ key: String, _ value: Int64?) throws {
        try container.encodeIfPresent(value, forKey: AnyKey(key))
    }

    mutating func stringBool(_ key: String, _ value: Bool?) throws {
        try container.encodeIfPresent(value.map { $0 ? "true" : "false" }, forKey: AnyKey(key))
    }

    mutating func date(_ key: String, _ value: Date?) throws {
        guard let value else { return }
        try container.encode(ReceiptDate.legacyGMT(value), forKey: AnyKey(key))
        // To the nearest millisecond: a date read from `_ms` is that many milliseconds give or take a rounding error,
        // and rounding down wrote some of them back one millisecond early (found by the fuzzer's write-back check).
        try container.encode(String(ReceiptDate.milliseconds(value, rounding: .toNearestOrAwayFromZero)), forKey: AnyKey(key + "_ms"))
        try container.encode(ReceiptDate.legacyPacific(value), forKey: AnyKey(key + "_pst"))
    }

    mutating func encode<T: Encodable>(_ key: String, _ value: T?) throws {
        try container.encodeIfPresent(value, forKey: AnyKey(key))
    }
}
