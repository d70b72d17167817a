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
        let groups = count / 4
        let rest = count % 4
        if rest == 1 { return nil }
        let outputCount = groups * 3 + (rest == 0 ? 0 : rest - 1)
        // Four characters to three bytes at a time, into storage written once: a byte-at-a-time `append` with the
        // table read through its lazy global cost ~3 % of a notification's CPU (two or three JWS of 2–8 KB each).
        return table.withUnsafeBufferPointer { table -> [UInt8]? in
            var valid = true
            let output = [UInt8](unsafeUninitializedCapacity: outputCount) { output, initialized in
                initialized = 0
                var input = 0
                var written = 0
                for _ in 0..<groups {
                    let a = table[Int(text[input])], b = table[Int(text[input + 1])]
                    let c = table[Int(text[input + 2])], d = table[Int(text[input + 3])]
                    // Every valid entry is below 64; 0xFF marks a foreign character.
                    guard (a | b | c | d) & 0xC0 == 0 else { valid = false; return }
                    let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[written] = UInt8(truncatingIfNeeded: group >> 16)
                    output[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    output[written + 2] = UInt8(truncatingIfNeeded: group)
                    input += 4
                    written += 3
                }
                // Leftover bits must be zero, so each byte string has exactly one accepted encoding.
                if rest == 2 {
                    let a = table[Int(text[input])], b = table[Int(text[input + 1])]
                    guard (a | b) & 0xC0 == 0, b & 0x0F == 0 else { valid = false; return }
                    output[written] = a << 2 | b >> 4
                } else if rest == 3 {
                    let a = table[Int(text[input])], b = table[Int(text[input + 1])], c = table[Int(text[input + 2])]
                    guard (a | b | c) & 0xC0 == 0, c & 0x03 == 0 else { valid = false; return }
                    output[written] = a << 2 | b >> 4
                    output[written + 1] = b << 4 | c >> 2
                }
                initialized = outputCount
            }
            return valid ? output : nil
        }
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
