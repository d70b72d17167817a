// The StoreKit 2 adapter. StoreKit exists on Apple platforms only, so this file cannot be compiled or tested on the
// Linux machines IAPKit is built on: it is kept as thin as possible, every decision lives in PurchaseClient (tested
// against the simulator). See the README.
#if canImport(StoreKit)
import Foundation
import StoreKit

@available(iOS 17.0, macOS 14.0, *)
public struct StoreKitStore: StoreAdapter {
    public init() {}

    public func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        let found = try await Product.products(for: productIds)
        let products = found.map { product in
            StoreProduct(
                productId: product.id, type: Self.typeName(product.type), displayName: product.displayName,
                price: NSDecimalNumber(decimal: product.price * 1000).int64Value, currency: product.priceFormatStyle.currencyCode,
                subscriptionPeriod: product.subscription.map { Self.iso8601($0.subscriptionPeriod) },
                introductoryOffer: product.subscription?.introductoryOffer.map {
                    StoreProduct.Offer(discountType: $0.paymentMode == .freeTrial ? "FREE_TRIAL" : $0.paymentMode == .payUpFront ? "PAY_UP_FRONT" : "PAY_AS_YOU_GO",
                                       period: Self.iso8601($0.period), numberOfPeriods: $0.periodCount,
                                       price: NSDecimalNumber(decimal: $0.price * 1000).int64Value)
                },
                familyShareable: product.isFamilyShareable)
        }
        return (products, productIds.filter { id in !found.contains { $0.id == id } })
    }

    public func canMakePayments() async -> Bool { AppStore.canMakePayments }

    public func purchase(_ productId: String, appAccountToken: UUID, quantity: Int) async throws -> StorePurchaseResult {
        guard let product = try await Product.products(for: [productId]).first else { return .failed("unknown product \(productId)") }
        switch try await product.purchase(options: [.appAccountToken(appAccountToken), .quantity(quantity)]) {
        case .success(let verification): return .purchased(try StoreTransaction(signedTransaction: verification.jwsRepresentation))
        case .pending: return .pending
        case .userCancelled: return .cancelled
        @unknown default: return .failed("unknown purchase result")
        }
    }

    public func unfinished() async throws -> [StoreTransaction] {
        var result: [StoreTransaction] = []
        for await verification in Transaction.unfinished { result.append(try StoreTransaction(signedTransaction: verification.jwsRepresentation)) }
        return result
    }

    public func finish(_ transaction: StoreTransaction) async throws {
        for await verification in Transaction.unfinished where verification.unsafePayloadValue.id == UInt64(transaction.transactionId) {
            await verification.unsafePayloadValue.finish()
        }
    }

    public func restore() async throws -> [StoreTransaction] {
        try await AppStore.sync()
        var result: [StoreTransaction] = []
        for await verification in Transaction.currentEntitlements { result.append(try StoreTransaction(signedTransaction: verification.jwsRepresentation)) }
        return result
    }

    public func updates() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for await verification in Transaction.updates {
                    if let transaction = try? StoreTransaction(signedTransaction: verification.jwsRepresentation) { continuation.yield(transaction) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    public func receipt() async throws -> String? {
        func read() -> String? { Bundle.main.appStoreReceiptURL.flatMap { try? Data(contentsOf: $0) }?.base64EncodedString() }
        if let receipt = read() { return receipt }
        try await AppStore.sync()  // refreshes a missing receipt (asks the customer to sign in if needed)
        return read()
    }

    public func promotedPurchases() -> AsyncStream<String> {
        AsyncStream { continuation in
            let task = Task {
                if #available(iOS 17.0, macOS 14.4, *) {
                    for await intent in PurchaseIntent.intents { continuation.yield(intent.product.id) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    static func typeName(_ type: Product.ProductType) -> String {
        switch type {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .nonRenewable: "Non-Renewing Subscription"
        default: "Auto-Renewable Subscription"
        }
    }

    static func iso8601(_ period: Product.SubscriptionPeriod) -> String {
        switch period.unit {
        case .day: "P\(period.value)D"
        case .week: "P\(period.value)W"
        case .month: "P\(period.value)M"
        default: "P\(period.value)Y"
        }
    }
}
#endif
