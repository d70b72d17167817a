/// An iOS 6-style transaction receipt (`SKPaymentTransaction.transactionReceipt`): base64 of an old-style property
/// list `{ "purchase-info" = "<base64>"; "signature" = "<base64>"; … }` whose `purchase-info` is itself such a list.
///
/// Only Apple's verifyReceipt can check these (the signature format is undocumented); IAPKit decodes them so the
/// server can find the transaction id and ask Apple.
public struct TransactionReceipt: Sendable, Hashable {
    /// The outer dictionary (`purchase-info`, `signature`, `pod`, `signing-status`, …).
    public let fields: [String: String]
    /// The decoded `purchase-info` dictionary (`transaction-id`, `product-id`, `bid`, …).
    public let purchaseInfo: [String: String]

    /// Largest transaction receipt accepted; real ones are a few kilobytes.
    public static let maxBytes = 64 << 10

    /// Decodes the base64 text of a transaction receipt.
    public init(base64 text: some Collection<UInt8>) throws {
        guard text.count <= Self.maxBytes else { throw AppStoreError(.tooLarge, "transaction receipt is larger than \(Self.maxBytes) bytes") }
        let trimmed = text.filter { $0 != 0x0A && $0 != 0x0D && $0 != 0x20 }
        guard let plist = Base64.decode(trimmed) else { throw AppStoreError.malformed("transaction receipt is not base64") }
        fields = try Self.dictionary(plist)
        guard let info = fields["purchase-info"], let infoPlist = Base64.decode(info.utf8) else {
            throw AppStoreError.malformed("transaction receipt has no base64 purchase-info")
        }
        purchaseInfo = try Self.dictionary(infoPlist)
    }

    /// `transaction-id` from the purchase info.
    public var transactionId: String? { purchaseInfo["transaction-id"] }
    /// `original-transaction-id` from the purchase info.
    public var originalTransactionId: String? { purchaseInfo["original-transaction-id"] }
    /// `product-id` from the purchase info.
    public var productId: String? { purchaseInfo["product-id"] }
    /// `bid` (bundle id) from the purchase info.
    public var bundleId: String? { purchaseInfo["bid"] }

    /// Parses `{ "key" = "value"; … }` with backslash escapes inside the quotes, and nothing else.
    static func dictionary(_ bytes: [UInt8]) throws -> [String: String] {
        var index = 0
        func skipSpace() { while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 } }
        func expect(_ byte: UInt8) throws {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else {
                throw AppStoreError.malformed("transaction receipt: expected '\(Character(UnicodeScalar(byte)))' at offset \(index)")
            }
            index += 1
        }
        func quoted() throws -> String {
            try expect(UInt8(ascii: "\""))
            var value: [UInt8] = []
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                guard index < bytes.count else { break }
                value.append(bytes[index])
                index += 1
            }
            try expect(UInt8(ascii: "\""))
            guard let string = String(validating: value, as: UTF8.self) else { throw AppStoreError.malformed("transaction receipt: invalid UTF-8") }
            return string
        }
        var result: [String: String] = [:]
        try expect(UInt8(ascii: "{"))
        while true {
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; break }
            let key = try quoted()
            try expect(UInt8(ascii: "="))
            result[key] = try quoted()
            try expect(UInt8(ascii: ";"))
        }
        skipSpace()
        guard index == bytes.count else { throw AppStoreError.malformed("transaction receipt: trailing bytes") }
        return result
    }
}
