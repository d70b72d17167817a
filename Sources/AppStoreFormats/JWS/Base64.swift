/// Base64 decoding over bytes, for JWS segments and `x5c` certificates.
///
/// Accepts both alphabets (`+/` and `-_`) and optional trailing padding, and nothing else: no whitespace, no
/// characters after padding, no non-zero trailing bits. Working on bytes avoids Foundation's `String` round trips,
/// which dominate the cost of verifying a JWS in other libraries.
public enum Base64 {
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        return table
    }()

    /// Decodes base64 or base64url text; `nil` when it is not exactly that.
    public static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        // Over a buffer with an index loop: the same code specialised or not (debug builds iterate a generic
        // collection through the runtime, byte by byte).
        if let decoded = text.withContiguousStorageIfAvailable({ decode(buffer: $0) }) { return decoded }
        return Array(text).withUnsafeBufferPointer { decode(buffer: $0) }
    }

    private static func decode(buffer text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var end = text.count
        var padding = 0
        while end > 0, padding < 2 {
            guard text[end - 1] == UInt8(ascii: "=") else { break }
            end -= 1
            padding += 1
        }
        let count = end
        if padding > 0, (count + padding) % 4 != 0 { return nil }
        if count % 4 == 1 { return nil }
        var output = [UInt8]()
        output.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var index = 0
        while index < count {
            let byte = text[index]
            index += 1
            let value = table[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, so each byte string has exactly one accepted encoding.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    /// Encodes as base64url without padding (JWS segments).
    public static func urlEncode(_ bytes: some Collection<UInt8>) -> String {
        encode(bytes, alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8), pad: false)
    }

    /// Encodes as standard base64 with padding (`x5c` entries, receipts).
    public static func standardEncode(_ bytes: some Collection<UInt8>) -> String {
        encode(bytes, alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8), pad: true)
    }

    private static func encode(_ bytes: some Collection<UInt8>, alphabet: [UInt8], pad: Bool) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(group >> 18 & 63)])
            output.append(alphabet[Int(group >> 12 & 63)])
            if second != nil { output.append(alphabet[Int(group >> 6 & 63)]) } else if pad { output.append(UInt8(ascii: "=")) }
            if third != nil { output.append(alphabet[Int(group & 63)]) } else if pad { output.append(UInt8(ascii: "=")) }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
