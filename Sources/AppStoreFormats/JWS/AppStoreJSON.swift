import Foundation

/// JSON coding as Apple's JWS payloads and Server API bodies use it: dates are (possibly fractional) milliseconds
/// since 1970, absent fields are omitted.
public enum AppStoreJSON {
    /// A decoder for JWS payloads and Server API bodies. Cheap to create; decoders are not shared across tasks.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let milliseconds = try container.decode(Double.self)
            // Years 0001 (Xcode's "no date") to 9999; anything else is not a date Apple sends.
            guard milliseconds.isFinite, abs(milliseconds) <= maxMilliseconds else {
                throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath, debugDescription: "\(milliseconds) ms is not a plausible date"))
            }
            return Date(timeIntervalSince1970: milliseconds / 1000)
        }
        return decoder
    }

    static let maxMilliseconds = 253_402_300_800_000.0

    /// An encoder that writes dates as whole milliseconds, as the App Store does.
    public static func encoder(sortedKeys: Bool = false, pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ReceiptDate.milliseconds(date, rounding: .toNearestOrAwayFromZero))
        }
        var formatting: JSONEncoder.OutputFormatting = [.withoutEscapingSlashes]
        if sortedKeys { formatting.insert(.sortedKeys) }
        if pretty { formatting.insert(.prettyPrinted) }
        encoder.outputFormatting = formatting
        return encoder
    }

    /// Decodes `type` from JSON bytes, turning any decoding failure into ``AppStoreError/Code/malformed``.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>, what: String) throws -> T {
        do {
            return try decoder().decode(type, from: Data(bytes))
        } catch {
            throw AppStoreError(.malformed, "\(what) is not valid JSON of the expected shape: \(describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
             DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }
}

// Apple writes UUIDs (`appAccountToken`, `deviceVerificationNonce`) in lower case; Foundation's `UUID` encodes itself in
// upper case. More specific than the generic methods, these are what the synthesized `Encodable` conformances of this
// module call, so every payload the simulator signs spells a UUID as Apple does. Decoding takes either case.
extension KeyedEncodingContainer {
    mutating func encode(_ value: UUID, forKey key: Key) throws {
        try encode(value.lowercasedString, forKey: key)
    }

    mutating func encodeIfPresent(_ value: UUID?, forKey key: Key) throws {
        guard let value else { return }
        try encode(value, forKey: key)
    }
}

extension UUID {
    /// As Apple writes a UUID (an `appAccountToken`, a notification's UUID): lower case. Foundation's `uuidString` is
    /// upper case.
    public var lowercasedString: String { uuidString.lowercased() }
}
