import Foundation
import PurchaseAPI
@testable import PurchaseAPIDocument
import Testing

/// `APIJSON.encode` replaced Foundation's `JSONEncoder` on the server's answers; a client (and a signature over the
/// signed entitlements) sees the same bytes only while the two agree.
@Suite("The API's JSON writer: the bytes of APIJSON.encoder(), over every contract type and the values that escape")
struct APIJSONWriterTests {
    static func foundation(_ value: some Encodable) throws -> [UInt8] {
        [UInt8](try APIJSON.encoder().encode(value))
    }

    static func expectSame(_ value: some Encodable, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let written = try APIJSON.encode(value)
        let expected = try foundation(value)
        #expect(written == expected, "\(what): \(String(decoding: written, as: UTF8.self)) ≠ \(String(decoding: expected, as: UTF8.self))",
                sourceLocation: sourceLocation)
    }

    @Test("Every schema of the OpenAPI document, filled as the reflector reads it (each optional present), encodes as JSONEncoder does")
    func everyContractType() throws {
        let document = try OpenAPIDocument()
        var checked = 0
        for (name, type) in document.schemaTypes.sorted(by: { $0.key < $1.key }) {
            func check<T: Decodable>(_ type: T.Type) throws {
                let value = try SchemaReflector().reflect(type, at: []).value
                guard let encodable = value as? any Encodable else { return }
                try Self.expectSame(encodable, name)
                checked += 1
            }
            try check(type)
        }
        // The contract has dozens of replies: a reflector that found none would make this test vacuous.
        #expect(checked >= 40, "only \(checked) contract types were encoded")
    }

    @Test("A purchase's reply and the entitlements: nested objects, a flattened body, maps, dates, UUIDs, empty arrays")
    func purchaseReply() throws {
        let renewal = Entitlements.RenewalInfo(autoRenewStatus: 1, autoRenewProductId: "pro.yearly", expirationIntent: 2,
                                               gracePeriodExpiresDate: Date(timeIntervalSince1970: 1_795_986_332.0355),
                                               isInBillingRetryPeriod: true, priceIncreaseStatus: 0, signedDate: Date(timeIntervalSince1970: -1.5))
        let item = Entitlements.Item(name: "pro", productId: "com.example.pro.monthly", transactionId: "2000000001", originalTransactionId: "2000000000",
                                     appAccountToken: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"), expiresAt: Date(timeIntervalSince1970: 1e9),
                                     state: .active, environment: "Sandbox", renewalInfo: renewal)
        let entitlements = Entitlements(accountId: "alice/🍎 \"quoted\"", entitlements: [item, item],
                                        balances: ["coins": 100, "Gems": -3, "a10": 1, "a9": Int64.max, "é": Int64.min, "ä": 0,
                                                   "e\u{301}x": 5, "f": 6])
        try Self.expectSame(entitlements, "Entitlements")
        try Self.expectSame(EntitlementsReply(entitlements: entitlements, signedEntitlements: "a.b.c"), "EntitlementsReply")
        try Self.expectSame(EntitlementsReply(entitlements: Entitlements(accountId: ""), signedEntitlements: nil), "EntitlementsReply, empty")
    }

    @Test("Strings: quotes, backslashes, every control character, DEL, slashes, U+2028, astral characters")
    func strings() throws {
        var text = "a\"b\\c/d é ä 🍎 \u{7F} \u{2028} \u{2029} </script>"
        for scalar in 0..<0x20 { text.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        try Self.expectSame([text: text], "a string as a key and a value")
        try Self.expectSame(text, "a string at the top level")
        try Self.expectSame(["": "", "\u{0}": "\u{0}"], "empty and NUL")
        // Sorted by bytes: a decomposed "é" (e, U+0301) after "f", where String's order would put it before.
        try Self.expectSame(["e\u{301}": 1, "f": 2, "\u{E9}z": 3, "Z": 4], "keys sorted by their bytes")
    }

    @Test("Numbers and the other scalars JSONEncoder spells itself: integers at their limits, doubles, decimals, data, URLs, Bool, nil")
    func scalars() throws {
        try Self.expectSame([Int64.min, Int64.max, 0, -1, 10, 1_000_000], "Int64")
        try Self.expectSame([UInt64.max, 0], "UInt64")
        try Self.expectSame([Int8.min, Int8.max], "Int8")
        try Self.expectSame([1.5, 100.0, 0.1, 1e21, 1e-7, 123_456_789.123, -0.0, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude],
                            "Double")
        try Self.expectSame([Float(1.5), 100, 0.1, 3.4e38], "Float")
        try Self.expectSame([Decimal(string: "12.345")!, Decimal(0), Decimal(-7)], "Decimal")
        try Self.expectSame([Data([0, 1, 2, 254, 255]), Data()], "Data")
        try Self.expectSame([URL(string: "https://example.com/a?b=c&d=%20")!], "URL")
        try Self.expectSame([true, false], "Bool")
        try Self.expectSame([String?.none, "x"], "nil in an array")
        try Self.expectSame(["url": URL(string: "https://example.com/x")], "an optional URL")
        try Self.expectSame([Decimal?.none, Decimal(string: "0.5")], "an optional Decimal")
        try Self.expectSame(["data": Data([1, 2, 3]) as Data?], "an optional Data")
        try Self.expectSame([Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 0.0004), Date(timeIntervalSince1970: 0.0005),
                             Date(timeIntervalSince1970: -0.0005), Date(timeIntervalSince1970: 253_402_300_799.999)], "Date")
    }

    @Test("A non-finite number is refused, as JSONEncoder refuses it, and a value that wrote nothing is an error at the top")
    func refusals() throws {
        #expect(throws: EncodingError.self) { try APIJSON.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try APIJSON.encode(["x": Double.infinity]) }
        struct Silent: Encodable { func encode(to encoder: any Encoder) throws {} }
        #expect(throws: EncodingError.self) { try APIJSON.encode(Silent()) }
        try Self.expectSame([Silent()], "a value that wrote nothing, inside an array")
    }

    @Test("Hand-written encode(to:): a key written twice keeps its last value; nested and super encoders land where they were asked")
    func containers() throws {
        struct Twice: Encodable {
            enum Keys: String, CodingKey { case b, a, nested, list, base }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                try container.encode(1, forKey: .b)
                try container.encode("first", forKey: .a)
                try container.encode("second", forKey: .a)
                var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
                try nested.encode(true, forKey: .a)
                try nested.encodeNil(forKey: .b)
                var list = container.nestedUnkeyedContainer(forKey: .list)
                try list.encode(3)
                var inner = list.nestedContainer(keyedBy: Keys.self)
                try inner.encode("x", forKey: .a)
                var innerList = list.nestedUnkeyedContainer()
                try innerList.encode("y")
                try "z".encode(to: list.superEncoder())
                try [1, 2].encode(to: container.superEncoder(forKey: .base))
                try ["k": "v"].encode(to: container.superEncoder())
                var again = encoder.container(keyedBy: Keys.self)
                try again.encode(2, forKey: .b)
            }
        }
        try Self.expectSame(Twice(), "a hand-written encode(to:)")
        try Self.expectSame([Twice(), Twice()], "inside an array")
    }
}
