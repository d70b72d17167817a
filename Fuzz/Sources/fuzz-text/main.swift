import AppStoreFormats
import Foundation
import FuzzSupport

/// The small text formats: receipt dates (RFC 3339, as receipts and verifyReceipt write them), prices in milliunits,
/// base64 and base64url. Each parsed value writes back to text that parses to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = bytes(start, count)
    if let date = ReceiptDate.parse(rfc3339: input) {
        // Written back as receipts write dates (whole seconds, UTC), it must parse, and write the same again.
        let text = ReceiptDate.rfc3339(date)
        guard let again = ReceiptDate.parse(rfc3339: text) else { fatalError("\(date) writes as \(text), which does not parse") }
        guard ReceiptDate.rfc3339(again) == text else { fatalError("\(text) parses to a date that writes otherwise") }
    }
    let text = String(decoding: input, as: UTF8.self)
    if let price = Milliunits.parse(text) {
        guard price >= 0 else { fatalError("a negative price from \(text)") }
        let written = "\(price / 1000).\(String(repeating: "0", count: 3 - String(price % 1000).count))\(price % 1000)"
        guard Milliunits.parse(written) == price else { fatalError("\(price) writes as \(written), which parses otherwise") }
    }
    if let decoded = Base64.decode(input) {
        guard Base64.decode(Array(Base64.standardEncode(decoded).utf8)) == decoded else { fatalError("base64 does not round-trip") }
    }
    return 0
}
