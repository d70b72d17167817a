import AppStoreFormats
import Foundation
import Testing

@Suite("Base64 and compact JWS splitting on bytes")
struct Base64AndJWSTests {
    @Test("Round trips against Foundation for every length up to 70, and for JWS-sized inputs")
    func roundTrips() {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...70) + [1_023, 4_096, 8_191, 65_537] {
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

    @Test("A foreign character anywhere in a long input is refused: in a full group, at each place in a group, in a two-character tail")
    func refusesForeignCharacterAnywhere() {
        let text = Array(Base64.urlEncode((0..<3_001).map { UInt8(truncatingIfNeeded: $0 &* 7) }).utf8)
        #expect(Base64.decode(text) != nil)
        for position in [0, 1, 2, 3, 1_500, 1_501, 1_502, 1_503, text.count - 3, text.count - 2, text.count - 1] {
            for foreign in [UInt8(ascii: "="), UInt8(ascii: "."), UInt8(ascii: " "), 0x80, 0xFF] {
                var spoiled = text
                spoiled[position] = foreign
                #expect(Base64.decode(spoiled) == nil, "\(foreign) at \(position)")
            }
        }
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

@Suite("PNG headers for Upload Image: dimensions and transparency, never a trap")
struct PNGImageHeaderTests {
    @Test("An opaque RGB PNG reads its dimensions; an alpha channel or a tRNS chunk is transparency")
    func reads() throws {
        let opaque = try #require(PNGImageHeader.parse(PNGImageHeader.blankOpaque(width: 3840, height: 2160)))
        #expect(opaque.width == 3840 && opaque.height == 2160 && opaque.colorType == 2 && !opaque.hasTransparency)
        var alpha = PNGImageHeader.blankOpaque(width: 1024, height: 1024)
        alpha[25] = 6  // RGBA: the CRC no longer matches, so the header is refused…
        #expect(PNGImageHeader.parse(alpha) == nil)
        // …and with its CRC recomputed it reads as transparent.
        let crc = PNGImageHeader.crc32(alpha[12..<29])
        alpha.replaceSubrange(29..<33, with: [UInt8(crc >> 24 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
        #expect(PNGImageHeader.parse(alpha)?.hasTransparency == true)
        // A tRNS chunk before the image data.
        var withTRNS = PNGImageHeader.blankOpaque(width: 1024, height: 1024)
        let trns: [UInt8] = [0, 0, 0, 6] + Array("tRNS".utf8) + [0, 0, 0, 0, 0, 0] + [0, 0, 0, 0]
        withTRNS.insert(contentsOf: trns, at: 33)
        #expect(PNGImageHeader.parse(withTRNS)?.hasTransparency == true)
    }

    @Test("Truncated, misnamed, zero-sized or lying chunks are refused, not trapped on")
    func refuses() {
        let good = PNGImageHeader.blankOpaque(width: 3840, height: 400)
        for count in [0, 7, 8, 20, 32, 33, 40] { #expect(PNGImageHeader.parse(good.prefix(count)) == nil, "\(count) bytes") }
        var wrongName = good
        wrongName[12] = UInt8(ascii: "X")
        #expect(PNGImageHeader.parse(wrongName) == nil)
        #expect(PNGImageHeader.parse(PNGImageHeader.blankOpaque(width: 0, height: 10)) == nil)
        var huge = good
        huge.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xF0] + Array("tEXt".utf8), at: 33)
        #expect(PNGImageHeader.parse(huge) == nil, "a chunk longer than the file")
        #expect(PNGImageHeader.parse(Array("GIF89a-not-a-png-at-all-but-long-enough-to-read".utf8)) == nil)
    }
}
