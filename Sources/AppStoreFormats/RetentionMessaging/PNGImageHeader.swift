/// What Upload Image needs to know of a PNG: its dimensions, and whether it can be transparent. Apple takes PNG without
/// transparency: 3840 px wide and 160–2160 px high for `FULL_SIZE`, 1024 × 1024 for `BULLET_POINT`.
///
/// Reads the signature, the `IHDR` chunk (which PNG requires first) and the chunk headers after it up to `IDAT`,
/// looking for `tRNS`. Pixel data is not decoded.
public struct PNGImageHeader: Hashable, Sendable {
    public var width: UInt32
    public var height: UInt32
    public var bitDepth: UInt8
    /// 0 grey, 2 RGB, 3 palette, 4 grey + alpha, 6 RGB + alpha.
    public var colorType: UInt8
    /// An alpha channel, or a `tRNS` chunk.
    public var hasTransparency: Bool

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// The header of `bytes`, or nil when they are not a well-formed PNG start. Never traps.
    public static func parse(_ bytes: some Collection<UInt8>) -> PNGImageHeader? {
        let bytes = Array(bytes)
        guard bytes.count >= 33, Array(bytes[0..<8]) == signature else { return nil }
        func uint32(_ at: Int) -> UInt32 {
            bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        // IHDR: length 13, then width, height, bit depth, colour type, compression, filter, interlace, CRC.
        guard uint32(8) == 13, Array(bytes[12..<16]) == Array("IHDR".utf8) else { return nil }
        let width = uint32(16), height = uint32(20)
        let bitDepth = bytes[24], colorType = bytes[25]
        // PNG's own limits: dimensions 1…2³¹−1, and the depths each colour type allows.
        guard width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF else { return nil }
        let depths: [UInt8: Set<UInt8>] = [0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]]
        guard depths[colorType]?.contains(bitDepth) == true, bytes[26] == 0, bytes[27] == 0, bytes[28] <= 1 else { return nil }
        guard crc32(bytes[12..<29]) == uint32(29) else { return nil }
        var header = PNGImageHeader(width: width, height: height, bitDepth: bitDepth, colorType: colorType, hasTransparency: colorType == 4 || colorType == 6)
        // Chunks after IHDR, up to the image data: tRNS makes a colour or palette entry transparent.
        let (tRNS, IDAT, IEND): (UInt32, UInt32, UInt32) = (0x7452_4E53, 0x4944_4154, 0x4945_4E44)
        var offset = 33
        while offset + 8 <= bytes.count {
            let length = Int(uint32(offset))
            let type = uint32(offset + 4)
            if type == tRNS { header.hasTransparency = true }
            if type == IDAT || type == IEND { return header }
            // length + type + data + CRC; a length past the end is a truncated file.
            guard length <= bytes.count - offset - 12 else { return nil }
            offset += 12 + length
        }
        return nil
    }

    /// CRC-32 (ISO 3309) as PNG computes it over a chunk's type and data.
    public static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    /// A minimal PNG of this header's dimensions (opaque RGB, one `IDAT` of stored zlib blocks): for tests and the demo.
    /// The pixel data is all black; only the header is meant to be read.
    public static func blankOpaque(width: UInt32, height: UInt32) -> [UInt8] {
        func be(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return be(UInt32(data.count)) + body + be(crc32(body[...]))
        }
        let ihdr = be(width) + be(height) + [8, 2, 0, 0, 0]
        // A zlib stream of an empty stored block: enough for a header reader; not a decodable image of these dimensions.
        let idat: [UInt8] = [0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01]
        return signature + chunk("IHDR", ihdr) + chunk("IDAT", idat) + chunk("IEND", [])
    }
}
