import Foundation

/// Text the ledger stores the same on SQLite and PostgreSQL. PostgreSQL's `text` and `jsonb` cannot hold U+0000 (a
/// statement carrying one fails, and its transaction with it); SQLite would store it. So the ledger refuses a NUL
/// before any statement runs, and the server refuses it in what a request brings before it reaches the ledger.
public enum StorableText {
    /// Whether `text` holds a NUL.
    public static func holdsNUL(_ text: some StringProtocol) -> Bool {
        text.utf8.contains(0)
    }

    /// Whether JSON text carries a NUL: as a raw byte (not JSON, but refused all the same) or as the escape `\u0000`,
    /// the only spelling a JSON string has for it. Outside strings a backslash is not JSON either, so following each
    /// escape from its backslash is enough.
    ///
    /// Bytes held in one piece (a request's buffer, a native string) are scanned in place: called generically across
    /// modules, this walked a purchase's body one witness call a byte, a tenth of the server's time per purchase
    /// (BENCHMARKS.md, issue 35's profile of 2026-11-29).
    public static func jsonCarriesNUL(_ bytes: some Sequence<UInt8>) -> Bool {
        if let carries = bytes.withContiguousStorageIfAvailable({ jsonCarriesNUL(inPlace: $0) }) { return carries }
        return Array(bytes).withUnsafeBufferPointer { jsonCarriesNUL(inPlace: $0) }
    }

    static func jsonCarriesNUL(inPlace bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Most bodies hold neither a NUL nor a backslash (a JWS is base64url): two vectorised scans answer them.
        guard let start = bytes.baseAddress, !bytes.isEmpty else { return false }
        if memchr(start, 0, bytes.count) == nil, memchr(start, Int32(UInt8(ascii: "\\")), bytes.count) == nil { return false }
        // 0: plain text; 1: after a backslash; 2…5: after `\u` and that many zeros minus two.
        var state = 0
        for byte in bytes {
            if byte == 0 { return true }
            switch state {
            case 0:
                if byte == UInt8(ascii: "\\") { state = 1 }
            case 1:
                state = byte == UInt8(ascii: "u") ? 2 : 0
            default:
                if byte == UInt8(ascii: "0") {
                    if state == 5 { return true }
                    state += 1
                } else {
                    state = byte == UInt8(ascii: "\\") ? 1 : 0
                }
            }
        }
        return false
    }
}
