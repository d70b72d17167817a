// StoreKit's SwiftUI additions as Apple declares them (iOS 26 SDK: "Available when SwiftUI is imported with StoreKit"),
// reduced to what IAPKit uses. Apple ships them as the cross-import overlay _StoreKit_SwiftUI; scripts/typecheck-apple
// builds this the same way, so a file sees them only when it imports both StoreKit and SwiftUI. Bodies trap.
@_exported import StoreKit
import SwiftUI

@available(iOS 17.0, tvOS 17.0, macOS 14.0, watchOS 10.0, visionOS 1.0, *)
@MainActor @preconcurrency public struct PurchaseAction {
    @MainActor @preconcurrency public func callAsFunction(_ product: Product, options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { fatalError() }
}

@available(iOS 17.0, tvOS 17.0, macOS 14.0, watchOS 10.0, visionOS 1.0, *)
extension PurchaseAction: Sendable {
}

@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension EnvironmentValues {
    public var purchase: PurchaseAction { fatalError() }
}

@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension View {
    nonisolated public func inAppPurchaseOptions(_ options: ((Product) async -> Set<Product.PurchaseOption>)?) -> some View { _Declared<Self>() }

    nonisolated public func onInAppPurchaseCompletion(perform action: ((Product, Result<Product.PurchaseResult, any Error>) async -> ())?) -> some View { _Declared<Self>() }
}

/// What the modifiers above return: opaque, as in Apple's declarations, so callers see only `some View`.
@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
struct _Declared<Content>: View {
    nonisolated init() {}
    var body: Never { fatalError() }
}
