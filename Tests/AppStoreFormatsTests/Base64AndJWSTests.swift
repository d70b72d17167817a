import AppStoreFormats
import Foundation
import Testing

@Suite("Base64 and compact JWS splitting on bytes")
struct Base64AndJWSTests {
    @Test("Round trips against Foundation for every length up to 70")
    func roundTrips() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let standard = Data(bytes).base64EncodedString()
            #expect(Base64.standardEncode(bytes) == standard)
            #expect(Base64.decode(standard.utf8) == bytes)
            let url = Base64.urlEncode(bytes)
            #expect(!url.contains("=") && !url.contains("+") && !url.contains("/"))
            #expect(Base64.decode(url.utf8) == bytes)
        }
    }

    @Test("Rejects foreign characters, bad padding and non-canonical trailing bits", arguments: ["a", "ab c", "ab=c", "abc==", "a===", "ab\n", "YR==", "YWJ", "YWI"])
    func rejects(text: String) {
        // "YWI" is the one canonical unpadded spelling of "ab"; "YWJ" has a stray low bit.
        if text == "YWI" { #expect(Base64.decode(text.utf8) == Array("ab".utf8)); return }
        #expect(Base64.decode(text.utf8) == nil)
    }

    @Test("A compact JWS has exactly three non-empty segments", arguments: ["", "a.b", "a.b.c.d", ".b.c", "a..c", "a.b."])
    func segments(text: String) {
        #expect(throws: AppStoreError(.malformed, "")) { _ = try CompactJWS(text) }
    }

    @Test("Oversized JWS is refused before any parsing")
    func oversized() {
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: InputLimits.default.maxJWSBytes + 1)
        #expect(throws: AppStoreError(.tooLarge, "")) { _ = try CompactJWS(big) }
    }
}
