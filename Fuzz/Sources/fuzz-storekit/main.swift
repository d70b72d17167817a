import AppStoreFormats
import FuzzSupport

/// An Xcode `.storekit` file: never a trap, and every price it accepts is a non-negative amount.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard let configuration = try? StoreKitConfiguration(data: bytes(start, count)) else { return 0 }
    for product in configuration.products + configuration.subscriptionGroups.flatMap(\.subscriptions) {
        if let text = product.displayPrice, let price = Milliunits.parse(text), price < 0 { fatalError("a negative price from \(text)") }
    }
    return 0
}
