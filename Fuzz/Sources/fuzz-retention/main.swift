import AppStoreFormats
import Foundation
import FuzzSupport

/// Retention Messaging's inputs: an uploaded image's PNG header, and the JSON bodies — a message upload, the realtime
/// request Apple signs and the answer a developer's endpoint gives. Never a trap; a header read twice reads the same
/// and stays within PNG's limits; what decodes survives encode → decode.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = bytes(start, count)
    if let header = PNGImageHeader.parse(input) {
        guard header.width > 0, header.height > 0, header.width <= 0x7FFF_FFFF, header.height <= 0x7FFF_FFFF else {
            fatalError("PNG dimensions outside PNG's limits: \(header)")
        }
        guard PNGImageHeader.parse(input) == header else { fatalError("the same PNG read twice reads differently") }
        guard (header.colorType == 4 || header.colorType == 6) ? header.hasTransparency : true else { fatalError("an alpha channel not seen as transparency") }
    }
    let data = Data(input)
    let decoder = AppStoreJSON.decoder()
    if let value = try? decoder.decode(UploadMessageRequestBody.self, from: data) { roundTrip(value, "message upload") }
    if let value = try? decoder.decode(DecodedRealtimeRequestBody.self, from: data) { roundTrip(value, "realtime request") }
    if let value = try? decoder.decode(RealtimeResponseBody.self, from: data) {
        roundTrip(value, "realtime answer")
        _ = value.choices
    }
    if let value = try? decoder.decode(PerformanceTestResultResponse.self, from: data) { roundTrip(value, "performance test result") }
    return 0
}
