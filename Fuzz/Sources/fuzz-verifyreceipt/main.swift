import AppStoreFormats
import Foundation
import FuzzSupport

/// JSON bodies: verifyReceipt's (Apple's answer, and the request), Send Consumption Information's, the original
/// promotional-offer signature: never a trap; what decodes writes back to JSON that reads the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes(start, count))
    if let value = try? AppStoreJSON.decoder().decode(VerifyReceiptResponse.self, from: data) { roundTrip(value, "verifyReceipt response") }
    if let value = try? AppStoreJSON.decoder().decode(VerifyReceiptRequest.self, from: data) { roundTrip(value, "verifyReceipt request") }
    if let value = try? AppStoreJSON.decoder().decode(ConsumptionRequest.self, from: data) { roundTrip(value, "consumption request") }
    if let value = try? AppStoreJSON.decoder().decode(LegacyPromotionalOfferSignature.self, from: data) { roundTrip(value, "original offer signature") }
    return 0
}
