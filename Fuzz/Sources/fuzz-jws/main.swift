import AppStoreFormats
import Foundation
import FuzzSupport

/// A compact JWS as the App Store signs them, read as each payload it can carry — transaction, renewal info, app
/// transaction, notification, the claims of an offer signature — and a notification body: never a trap; what decodes survives encode → decode.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = bytes(start, count)
    if let jws = try? CompactJWS(input) {
        _ = try? jws.header()
        _ = try? jws.signature()
        if let value = try? jws.unverifiedPayload(as: JWSTransactionDecodedPayload.self) { roundTrip(value, "transaction") }
        if let value = try? jws.unverifiedPayload(as: JWSRenewalInfoDecodedPayload.self) { roundTrip(value, "renewal info") }
        if let value = try? jws.unverifiedPayload(as: AppTransactionDecodedPayload.self) { roundTrip(value, "app transaction") }
        if let value = try? jws.unverifiedPayload(as: ResponseBodyV2DecodedPayload.self) { roundTrip(value, "notification") }
        if let value = try? jws.unverifiedPayload(as: OfferSignatureClaims.self) { roundTrip(value, "offer signature claims") }
    }
    if let body = try? AppStoreJSON.decoder().decode(ResponseBodyV2.self, from: Data(input)) { roundTrip(body, "notification body") }
    return 0
}
