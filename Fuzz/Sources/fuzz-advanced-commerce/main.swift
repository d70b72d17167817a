import AppStoreFormats
import Foundation
import FuzzSupport

/// The Advanced Commerce API's inputs: the in-app request the app's server signs (read by the simulator from a JWS's
/// `request` claim) and the bodies of the server's requests, with Apple's checks over them. Never a trap; what
/// decodes survives encode → decode; a request the checks pass has prices whose sum cannot overflow.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes(start, count))
    let decoder = AppStoreJSON.decoder()
    if let request = try? decoder.decode(AdvancedCommerceInAppRequest.self, from: data) {
        roundTrip(request, "in-app request")
        _ = AdvancedCommerceCheck.check(request.requestInfo)
        if let descriptors = request.descriptors { _ = AdvancedCommerceCheck.check(descriptors, required: true) }
        if let item = request.item, AdvancedCommerceCheck.check(item, priced: true) == nil, item.price! > AdvancedCommerceLimits.maxPrice {
            fatalError("a price over the limit passed the checks")
        }
        if AdvancedCommerceCheck.check(request.items, priced: true) == nil {
            let items = request.items ?? []
            guard items.count <= AdvancedCommerceLimits.maxItems else { fatalError("more items than the limit passed the checks") }
            var total: Int64 = 0
            for item in items {
                let (sum, overflow) = total.addingReportingOverflow(item.price ?? 0)
                guard !overflow else { fatalError("the checks passed prices whose sum overflows") }
                total = sum
            }
        }
    }
    if let value = try? decoder.decode(AdvancedCommerceChangeMetadataRequest.self, from: data) { roundTrip(value, "change metadata") }
    if let value = try? decoder.decode(AdvancedCommercePriceChangeRequest.self, from: data) { roundTrip(value, "change price") }
    if let value = try? decoder.decode(AdvancedCommerceMigrateRequest.self, from: data) {
        roundTrip(value, "migrate")
        _ = AdvancedCommerceCheck.check(value.items, priced: false)
    }
    if let value = try? decoder.decode(AdvancedCommerceRevokeRequest.self, from: data) { roundTrip(value, "revoke") }
    if let value = try? decoder.decode(AdvancedCommerceRequestRefundRequest.self, from: data) { roundTrip(value, "refund request") }
    if let value = try? decoder.decode(AdvancedCommerceTransactionInfo.self, from: data) { roundTrip(value, "transaction info") }
    if let value = try? decoder.decode(AdvancedCommerceRenewalInfo.self, from: data) { roundTrip(value, "renewal info") }
    return 0
}
