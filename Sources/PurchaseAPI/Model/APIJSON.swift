import Foundation

/// The API's JSON conventions, the same as Apple's APIs that the server relays: dates in whole milliseconds since 1970.
public enum APIJSON {
    public static func encoder(sortedKeys: Bool = true) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Int64((date.timeIntervalSince1970 * 1000).rounded()))
        }
        // As AppStoreJSON writes Apple's bodies, so that one server answers in one spelling.
        encoder.outputFormatting = sortedKeys ? [.withoutEscapingSlashes, .sortedKeys] : [.withoutEscapingSlashes]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}

extension UUID {
    /// As Apple writes an `appAccountToken`, and as the API answers it: lower case. (AppStoreFormats has the public
    /// one; this module depends on Foundation alone.)
    var lowercased: String { uuidString.lowercased() }
}
