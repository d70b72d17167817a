// StoreKit's own SwiftUI views (`SubscriptionStoreView`, `StoreView`, `ProductView`) paying through IAPKit: each purchase
// carries an order's token, and its completion is delivered like any purchase. Apple platforms only, like
// StoreKitStore.swift (type-checked on Linux against Tests/AppleDeclarations by scripts/typecheck-apple).
#if canImport(StoreKit) && (os(iOS) || os(macOS) || IAPKIT_APPLE_DECLARATIONS)
import Foundation
import StoreKit
import SwiftUI

@available(iOS 17.0, macOS 14.0, *)
extension View {
    /// Purchases made in StoreKit's views within this view go through `client`: before the payment sheet shows, an
    /// order is made and its token set on the payment (`inAppPurchaseOptions`); the completion
    /// (`onInAppPurchaseCompletion`) is journaled and delivered to the account that ordered it.
    ///
    /// Replaces StoreKit's default completion, so a failure shows no StoreKit alert: `client.events` says it.
    ///
    /// StoreKit gives no way to stop a view's purchase from here: an order the server refuses only leaves the payment
    /// without a token. So on a server whose device-integrity policy is `refuse`, show StoreKit's views only where
    /// ``DeviceIntegrity/check(canOpenURL:)`` found nothing (`suspicious` false), and use
    /// ``PurchaseClient/purchase(_:quantity:confirmIn:)`` elsewhere: it stops before the payment sheet opens.
    public func purchases(through client: PurchaseClient) -> some View {
        inAppPurchaseOptions { product in
            // No order (offline, signed out): the purchase goes ahead without a token, and the server grants it to
            // the account that uploads it.
            guard let token = await client.storeViewOrder(for: product.id) else { return [] }
            return [.appAccountToken(token)]
        }
        .onInAppPurchaseCompletion { product, result in
            let store = client.store as? StoreKitStore ?? StoreKitStore()
            let completed: Result<StorePurchaseResult, any Error>
            switch result {
            case .success(.success(let verification)): completed = .success(.purchased(await store.adopt(verification)))
            case .success(.pending): completed = .success(.pending(requestId: nil))
            case .success(.userCancelled): completed = .success(.cancelled)
            // A result a newer StoreKit adds may have charged: waited for, as StoreKitStore does.
            case .success: completed = .success(.pending(requestId: nil))
            case .failure(let error): completed = .failure(StoreKitStore.rethrown(error))
            }
            await client.storeViewPurchaseCompleted(productId: product.id, result: completed)
        }
    }
}
#endif
