import AppStoreFormats
import Foundation
import Testing

@Suite("Receipt dates, parsed without a formatter")
struct ReceiptDateTests {
    @Test("UTC, offsets with and without a colon, fractions")
    func shapes() {
        #expect(ReceiptDate.parse(rfc3339: "2020-07-22T17:39:08Z") == Date(timeIntervalSince1970: 1_595_439_548))
        #expect(ReceiptDate.parse(rfc3339: "2020-10-16T14:29:30+0300") == ReceiptDate.parse(rfc3339: "2020-10-16T11:29:30Z"))
        #expect(ReceiptDate.parse(rfc3339: "2020-10-16T14:29:30-02:00") == ReceiptDate.parse(rfc3339: "2020-10-16T16:29:30Z"))
        #expect(ReceiptDate.parse(rfc3339: "2023-10-19T01:45:36.500Z")?.timeIntervalSince1970 == 1_697_679_936.5)
        #expect(ReceiptDate.parse(rfc3339: "4001-01-01T00:00:00Z") == ISO8601DateFormatter().date(from: "4001-01-01T00:00:00Z"))
        #expect(ReceiptDate.parse(rfc3339: "1969-12-31T23:59:59Z") == Date(timeIntervalSince1970: -1))
        #expect(ReceiptDate.rfc3339(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59Z")
        #expect(ReceiptDate.rfc3339(Date(timeIntervalSince1970: .infinity)) == ReceiptDate.rfc3339(Date(timeIntervalSince1970: 0)))
    }

    @Test("Anything else is nil, including the empty string", arguments: ["", "2020-07-22", "2020-13-01T00:00:00Z", "2020-07-22T17:39:08", "2020-07-22T17:39:08Zjunk", "2020-07-22 17:39:08Z", "２０２０-07-22T17:39:08Z"])
    func rejects(text: String) {
        #expect(ReceiptDate.parse(rfc3339: text) == nil)
    }

    @Test("The first and last instants of the four-digit range are kept; an offset or a leap second that carries a date out of it is refused, so whatever parses writes back",
          arguments: ["0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00-01:00", "9999-12-31T23:59:59.999-00:00"])
    func edgesOfTheRange(text: String) throws {
        let date = try #require(ReceiptDate.parse(rfc3339: text))
        #expect(ReceiptDate.parse(rfc3339: ReceiptDate.rfc3339(date)) == date.addingTimeInterval(-date.timeIntervalSince1970.truncatingRemainder(dividingBy: 1)))
    }

    @Test("Found by fuzzing: dates moved outside years 0000–9999 by their offset are refused",
          arguments: ["0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "9999-12-31T23:59:60Z", "0000-01-01T00:30:00+23:59"])
    func outsideTheRange(text: String) {
        #expect(ReceiptDate.parse(rfc3339: text) == nil)
    }

    @Test("Agrees with Foundation on every day of four centuries")
    func agreesWithFoundation() {
        let formatter = ISO8601DateFormatter()
        var day = Date(timeIntervalSince1970: -5_000_000_000)
        for _ in 0..<1_500 {
            let text = formatter.string(from: day)
            #expect(ReceiptDate.parse(rfc3339: text) == day, "\(text)")
            #expect(ReceiptDate.rfc3339(day) == text)
            day += 86_400 * 97 + 3_671
        }
    }

    @Test("verifyReceipt's GMT and Pacific forms, daylight saving included")
    func legacyForms() {
        let winter = Date(timeIntervalSince1970: 1_375_340_400)  // 2013-08-01 07:00:00 GMT (summer in California)
        #expect(ReceiptDate.legacyGMT(winter) == "2013-08-01 07:00:00 Etc/GMT")
        #expect(ReceiptDate.legacyPacific(winter) == "2013-08-01 00:00:00 America/Los_Angeles")
        let january = Date(timeIntervalSince1970: 1_577_880_000)  // 2020-01-01 12:00:00 GMT
        #expect(ReceiptDate.legacyPacific(january) == "2020-01-01 04:00:00 America/Los_Angeles")
        #expect(ReceiptDate.parse(legacyGMT: "2013-08-01 07:00:00 Etc/GMT") == winter)
        #expect(ReceiptDate.parse(legacyGMT: "2013-08-01 07:00:00 America/Los_Angeles") == nil)
    }
}
