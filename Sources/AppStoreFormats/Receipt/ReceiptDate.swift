import Foundation

/// Parsing and printing of the few fixed date shapes Apple uses, done arithmetically.
///
/// Foundation's `ISO8601DateFormatter` costs ~26 µs a date here, and a large receipt holds hundreds of dates;
/// these shapes are fixed, so a direct parse is both faster and stricter.
public enum ReceiptDate {
    /// Parses an app-receipt date: `YYYY-MM-DDTHH:MM:SS` with optional fractional seconds, then `Z`, `±HHMM` or
    /// `±HH:MM` (old Xcode receipts use offsets). Returns `nil` for anything else, including the empty string.
    public static func parse<Bytes: Collection<UInt8>>(rfc3339 bytes: Bytes) -> Date? {
        var reader = DigitReader(Array(bytes))
        guard let (days, secondsOfDay) = reader.readDateTime(separator: UInt8(ascii: "T")) else { return nil }
        let fraction = reader.readFraction()
        guard let offset = reader.readZoneOffset(), reader.atEnd else { return nil }
        // An offset (or a leap second) can carry year 0000 or 9999 out of the four-digit range; such a date could not
        // be written back in this shape, so it is refused rather than accepted one way only.
        let seconds = days * 86_400 + secondsOfDay - offset
        guard (firstRepresentableSecond...lastRepresentableSecond).contains(seconds) else { return nil }
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the instants this four-digit shape can hold in UTC.
    static let firstRepresentableSecond = days(year: 0, month: 1, day: 1) * 86_400
    static let lastRepresentableSecond = days(year: 10_000, month: 1, day: 1) * 86_400 - 1

    /// Parses a string form of ``parse(rfc3339:)``.
    public static func parse(rfc3339 string: String) -> Date? { parse(rfc3339: Array(string.utf8)) }

    /// Parses verifyReceipt's `YYYY-MM-DD HH:MM:SS Etc/GMT`. Other zone names are refused: Apple only sends GMT in
    /// the plain field, and the `_ms` companion is the authoritative value anyway.
    public static func parse(legacyGMT string: String) -> Date? {
        var reader = DigitReader(Array(string.utf8))
        guard let (days, secondsOfDay) = reader.readDateTime(separator: UInt8(ascii: " ")),
              reader.readLiteral(" Etc/GMT"), reader.atEnd else { return nil }
        return Date(timeIntervalSince1970: Double(days * 86_400 + secondsOfDay))
    }

    /// Formats `2020-07-22T17:39:08Z` (whole seconds, UTC): the app-receipt shape.
    public static func rfc3339(_ date: Date) -> String {
        let (day, time) = split(date, offset: 0)
        return "\(day)T\(time)Z"
    }

    /// Formats verifyReceipt's `2020-07-22 17:39:08 Etc/GMT`.
    public static func legacyGMT(_ date: Date) -> String {
        let (day, time) = split(date, offset: 0)
        return "\(day) \(time) Etc/GMT"
    }

    /// Formats verifyReceipt's `2020-07-22 10:39:08 America/Los_Angeles`, honouring daylight saving time.
    public static func legacyPacific(_ date: Date) -> String {
        // The offset of the date as written: a hostile date beyond the clamp is written as the clamp, and the offset
        // of the original (in or out of daylight saving time) would make the text name another instant.
        let written = Date(timeIntervalSince1970: Double(milliseconds(date)) / 1000)
        let offset = pacific?.secondsFromGMT(for: written) ?? -8 * 3600
        let (day, time) = split(date, offset: offset)
        return "\(day) \(time) America/Los_Angeles"
    }

    /// Milliseconds since 1970, truncated like Apple's `_ms` fields.
    /// Dates beyond ±10¹⁵ ms (year ~33,000) are clamped: they only come from hostile input, and must not trap.
    public static func milliseconds(_ date: Date, rounding: FloatingPointRoundingRule = .down) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded(rounding)
        guard value.isFinite else { return 0 }
        return Int64(max(-1e15, min(1e15, value)))
    }

    private static let pacific = TimeZone(identifier: "America/Los_Angeles")

    private static func split(_ date: Date, offset: Int) -> (String, String) {
        let ms = milliseconds(date)
        let seconds = (ms >= 0 ? ms / 1000 : (ms - 999) / 1000) + Int64(offset)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondsOfDay = seconds - days * 86_400
        let (y, m, d) = civil(fromDays: days)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return ("\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))",
                "\(pad(secondsOfDay / 3600, 2)):\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2))")
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}

/// A cursor over ASCII bytes that reads fixed-width decimal fields.
private struct DigitReader {
    let bytes: [UInt8]
    var index = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func digits(_ count: Int) -> Int64? {
        guard index + count <= bytes.count else { return nil }
        var value: Int64 = 0
        for byte in bytes[index..<index + count] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int64(byte - 0x30)
        }
        index += count
        return value
    }

    mutating func literal(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func readLiteral(_ text: String) -> Bool {
        for byte in text.utf8 where !literal(byte) { return false }
        return true
    }

    mutating func readDateTime(separator: UInt8) -> (days: Int64, secondsOfDay: Int64)? {
        guard let year = digits(4), literal(UInt8(ascii: "-")), let month = digits(2), literal(UInt8(ascii: "-")),
              let day = digits(2), literal(separator), let hour = digits(2), literal(UInt8(ascii: ":")),
              let minute = digits(2), literal(UInt8(ascii: ":")), let second = digits(2) else { return nil }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        return (ReceiptDate.days(year: year, month: month, day: day), hour * 3600 + minute * 60 + second)
    }

    mutating func readFraction() -> Double {
        guard literal(UInt8(ascii: ".")) else { return 0 }
        var fraction = 0.0
        var scale = 0.1
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            fraction += Double(bytes[index] - 0x30) * scale
            scale /= 10
            index += 1
        }
        return fraction
    }

    /// Seconds east of UTC, or `nil` when the zone is missing or malformed.
    mutating func readZoneOffset() -> Int64? {
        if literal(UInt8(ascii: "Z")) { return 0 }
        let sign: Int64
        if literal(UInt8(ascii: "+")) { sign = 1 } else if literal(UInt8(ascii: "-")) { sign = -1 } else { return nil }
        guard let hours = digits(2) else { return nil }
        _ = literal(UInt8(ascii: ":"))
        guard let minutes = digits(2), hours < 24, minutes < 60 else { return nil }
        return sign * (hours * 3600 + minutes * 60)
    }
}
