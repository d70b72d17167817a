import AppStoreFormats
import Foundation

/// Reads a command's input file (`-` for stdin) with a size limit checked while reading.
enum InputFile {
    /// A path the command cannot open: not the App Store's bytes being malformed, so not an `AppStoreError`.
    struct Unreadable: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "cannot open \(path): \(reason)" }
    }

    static func read(_ path: String, limit: Int) throws -> [UInt8] {
        let handle: FileHandle
        if path == "-" {
            handle = .standardInput
        } else {
            guard let opened = FileHandle(forReadingAtPath: path) else {
                throw Unreadable(path: path, reason: String(cString: strerror(errno)))
            }
            handle = opened
        }
        defer { if path != "-" { try? handle.close() } }
        var bytes: [UInt8] = []
        while let chunk = try handle.read(upToCount: 64 << 10), !chunk.isEmpty {
            bytes += chunk
            guard bytes.count <= limit else { throw AppStoreError(.tooLarge, "\(path) is larger than \(limit) bytes") }
        }
        return bytes
    }

    /// Receipt bytes from DER or from base64 text (line breaks allowed).
    static func receipt(_ path: String, limits: InputLimits) throws -> [UInt8] {
        let raw = try read(path, limit: limits.maxReceiptBytes * 4 / 3 + 64 << 10)
        if raw.first == 0x30 { return raw }
        let text = raw.filter { !($0 == 0x0A || $0 == 0x0D || $0 == 0x20 || $0 == 0x09) }
        guard let der = Base64.decode(text) else {
            throw AppStoreError(.malformed, "\(path) is neither DER (starting 0x30) nor base64")
        }
        return der
    }

    /// JWS bytes, trimmed of surrounding white space; a `{"signedPayload": …}` notification body is unwrapped.
    static func jws(_ path: String, limits: InputLimits) throws -> [UInt8] {
        var raw = try read(path, limit: limits.maxJWSBytes + 4 << 10)
        while let last = raw.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { raw.removeLast() }
        while let first = raw.first, first == 0x0A || first == 0x0D || first == 0x20 || first == 0x09 { raw.removeFirst() }
        if raw.first == UInt8(ascii: "{") {
            let body = try AppStoreJSON.decode(ResponseBodyV2.self, from: raw, what: "notification body")
            return Array(body.signedPayload.utf8)
        }
        return raw
    }
}
