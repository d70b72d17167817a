import Foundation

/// StoreKit's own store views (`SubscriptionStoreView`, `StoreView`, `ProductView`) and the App Store's sheets for the
/// customer's own tools: the same promise as ``PurchaseClient/purchase(_:quantity:confirmIn:)``.
extension PurchaseClient {
    // MARK: StoreKit's views

    /// The order a purchase made in one of StoreKit's views is paid with: made, and its intent journaled, before the
    /// payment sheet shows; its `appAccountToken` goes on the payment (`.inAppPurchaseOptions`, applied by the SDK's
    /// `purchases(through:)` modifier). Nil when no order could be made (offline, signed out): the view's purchase then
    /// carries no order, and the server grants it to the account that uploads it.
    public func storeViewOrder(for productId: String) async -> UUID? {
        // The account the order is for, as it was asked: a sign-in change while the order is made must not move it.
        let owner = accountId
        guard owner != nil else {
            send(.failed(productId: productId, PurchaseFailure(.notSignedIn, "no account is signed in: the view's purchase carries no order")))
            return nil
        }
        switch await openOrder(productId, owner: owner) {
        case .success(let order):
            storeViewOrders[productId] = (order.appAccountToken, order.orderId, owner)
            send(.awaitingPayment(productId: productId, orderId: order.orderId))
            return order.appAccountToken
        case .failure(let failure):
            send(.failed(productId: productId, failure))
            return nil
        }
    }

    /// What one of StoreKit's views completed with (`onInAppPurchaseCompletion`): a paid transaction is journaled and
    /// delivered to the account whose order it carries; a cancelled or failed payment removes the order's intent when
    /// nothing was charged. A payment completed outside the view (Ask to Buy, an interruption) arrives through the
    /// store's updates and finds its order by its token all the same.
    @discardableResult
    public func storeViewPurchaseCompleted(productId: String, result: Result<StorePurchaseResult, any Error>) async -> PurchaseOutcome {
        let outcome: PurchaseOutcome
        switch result {
        case .success(let answer):
            // The view asked for this product's order just before its payment sheet: that order is the one it ended.
            let asked = storeViewOrders.removeValue(forKey: productId)
            let token: UUID? = if case .purchased(let transaction) = answer { transaction.appAccountToken } else { asked?.token }
            let entries = (try? journal.entries()) ?? []
            let intent = Self.intent(token: token, in: entries)
            let owner = asked?.token == token ? asked?.accountId ?? intent?.accountId : intent?.accountId
            // Answered with what the Apple ID already owned through another order: the view's own order was not paid.
            if case .purchased = answer, let asked, asked.token != token, let unpaid = Self.intent(token: asked.token, in: entries) {
                orderEnded(unpaid, .alreadyOwned)
            }
            outcome = await paymentEnded(answer, productId: productId, intent: intent, owner: owner)
        case .failure(let error):
            let asked = storeViewOrders.removeValue(forKey: productId)
            let storeError = error as? StoreError
            // Nothing charged: the order's intent goes, as for purchase(_:).
            if storeError?.chargedNothing == true, let intent = Self.intent(token: asked?.token, in: (try? journal.entries()) ?? []) {
                orderEnded(intent, storeError == .userCancelled ? .cancelled : .failed)
            }
            outcome = storeError == .userCancelled ? .cancelled : .failed(storeFailure(error, productId: productId))
        }
        return ended(outcome, productId: productId)
    }

    // MARK: The customer's own tools

    /// The App Store's manage-subscriptions sheet (change plan, cancel); returns when it closes. What the customer
    /// changed reaches the server through Apple's notifications, and the app through ``entitlements()``.
    public func showManageSubscriptions(in confirmation: PurchaseConfirmation? = nil) async throws(PurchaseFailure) {
        do { try await store.showManageSubscriptions(in: confirmation) } catch { throw storeFailure(error, productId: nil) }
    }

    /// The App Store's refund sheet for `transactionId` (Apple decides later; the server hears `REFUND` or
    /// `REFUND_DECLINED`). Answers whether the request was submitted or the customer closed the sheet.
    public func requestRefund(for transactionId: String, in confirmation: PurchaseConfirmation? = nil) async throws(PurchaseFailure) -> RefundRequestStatus {
        do { return try await store.beginRefundRequest(for: transactionId, in: confirmation) } catch { throw storeFailure(error, productId: nil) }
    }

    /// The App Store's offer-code sheet. What the customer redeems arrives through the store's updates and is delivered
    /// to the signed-in account like any purchase (``events`` says so).
    public func presentOfferCodeRedeemSheet(in confirmation: PurchaseConfirmation? = nil) async throws(PurchaseFailure) {
        do { try await store.presentOfferCodeRedeemSheet(in: confirmation) } catch { throw storeFailure(error, productId: nil) }
    }
}
