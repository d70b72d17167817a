import AppStoreFormats
import FuzzSupport

/// A PKCS#7 app receipt, and an app receipt's payload alone: never a trap; a payload that decodes writes back (DER) to
/// bytes that decode to the same receipt.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = bytes(start, count)
    if let container = try? PKCS7SignedData(berEncoded: input), let receipt = try? AppReceipt(payload: container.content) {
        check(receipt)
    }
    if let receipt = try? AppReceipt(payload: input) { check(receipt) }
    return 0
}

func check(_ receipt: AppReceipt) {
    let written = receipt.payloadDER()
    guard let again = try? AppReceipt(payload: written) else { fatalError("a decoded receipt writes back to bytes that do not decode") }
    guard again.payloadDER() == written else { fatalError("a receipt written back and decoded again writes differently") }
}
