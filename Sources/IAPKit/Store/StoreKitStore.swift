// The StoreKit 2 adapter. StoreKit exists on Apple platforms only, so this file cannot be compiled or tested on the
// Linux machines IAPKit is built on: it is kept as thin as possible, every decision lives in PurchaseClient (tested
// against the simulator), and it was checked against Apple's documentation (Transaction.updates, .unfinished,
// VerificationResult, PurchaseIntent, Product.purchase(options:), isEligibleForIntroOffer, AppStore.sync). The Apple
// CI workflow (.github/workflows/apple.yml) builds it for iOS and macOS where that runs. See the README.
//
// iOS and macOS only: `PurchaseIntent` does not exist on tvOS, watchOS or visionOS, and `purchase(options:)` is
// unavailable on visionOS (it needs a scene there).
#if canImport(StoreKit) && (os(iOS) || os(macOS))
import Foundation
import StoreKit

@available(iOS 17.0, macOS 14.0, *)
public struct StoreKitStore: StoreAdapter {
    /// StoreKit's own `Transaction` values by id, as they arrived (purchase, updates, unfinished): `finish` finishes
    /// that object, never a look-alike rebuilt from the JWS.
    private let kept = Kept()
    /// Promoted purchases by product id, with the offer (a win-back offer) the App Store attached to them.
    private let intents = Intents()

    public init() {}

    actor Kept {
        private var transactions: [String: Transaction] = [:]
        func keep(_ transaction: Transaction) { transactions[String(transaction.id)] = transaction }
        func take(_ id: String) -> Transaction? { transactions.removeValue(forKey: id) }
    }

    actor Intents {
        private var offers: [String: Product.SubscriptionOffer] = [:]
        func hold(_ productId: String, _ offer: Product.SubscriptionOffer?) { offers[productId] = offer }
        func take(_ productId: String) -> Product.SubscriptionOffer? { offers.removeValue(forKey: productId) }
    }

    /// The adapter's view of a StoreKit transaction: ids read from the decoded payload StoreKit already has
    /// (`unsafePayloadValue`; the server verifies the JWS), so nothing is parsed twice and nothing here can throw.
    func adopt(_ verification: VerificationResult<Transaction>) async -> StoreTransaction {
        let transaction = verification.unsafePayloadValue
        await kept.keep(transaction)
        return StoreTransaction(transactionId: String(transaction.id), originalTransactionId: String(transaction.originalID),
                                productId: transaction.productID, appAccountToken: transaction.appAccountToken,
                                expiresDate: transaction.expirationDate, revocationDate: transaction.revocationDate,
                                signedTransaction: verification.jwsRepresentation)
    }

    public func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        let found = try await Product.products(for: productIds)
        var products: [StoreProduct] = []
        for product in found {
            // An introductory offer is shown only to a customer who can still get it: showing one the customer is
            // not eligible for misleads (and App Review rejects it).
            var intro: StoreProduct.Offer?
            if let subscription = product.subscription, let offer = subscription.introductoryOffer, await subscription.isEligibleForIntroOffer {
                intro = StoreProduct.Offer(discountType: Self.paymentMode(offer.paymentMode), period: Self.iso8601(offer.period),
                                           numberOfPeriods: offer.periodCount, price: NSDecimalNumber(decimal: offer.price * 1000).int64Value)
            }
            products.append(StoreProduct(
                productId: product.id, type: Self.typeName(product.type), displayName: product.displayName,
                price: NSDecimalNumber(decimal: product.price * 1000).int64Value, currency: product.priceFormatStyle.currencyCode,
                subscriptionPeriod: product.subscription.map { Self.iso8601($0.subscriptionPeriod) },
                introductoryOffer: intro, familyShareable: product.isFamilyShareable))
        }
        return (products, productIds.filter { id in !found.contains { $0.id == id } })
    }

    public func canMakePayments() async -> Bool { AppStore.canMakePayments }

    public func purchase(_ productId: String, appAccountToken: UUID, quantity: Int) async throws -> StorePurchaseResult {
        try await purchase(productId, appAccountToken: appAccountToken, quantity: quantity, offers: SignedOffers())
    }

    public func purchase(_ productId: String, appAccountToken: UUID, quantity: Int, offers: SignedOffers) async throws -> StorePurchaseResult {
        guard let product = try await Product.products(for: [productId]).first else { return .failed("unknown product \(productId)") }
        var options: Set<Product.PurchaseOption> = [.appAccountToken(appAccountToken), .quantity(quantity)]
        if !offers.isEmpty {
            #if compiler(>=6.2)
            // Both back-deployed to iOS 15 in the SDKs of 2025 (promotionalOffer(_:compactJWS:) returns its options as an array).
            if let id = offers.promotionalOfferId, let jws = offers.promotionalOfferJWS {
                options.formUnion(Product.PurchaseOption.promotionalOffer(id, compactJWS: jws))
            }
            if let jws = offers.introductoryOfferEligibilityJWS { options.insert(.introductoryOfferEligibility(compactJWS: jws)) }
            if let data = offers.advancedCommerceData { options.insert(.custom(key: "advancedCommerceData", value: data)) }
            #else
            // Nothing is charged: full price instead of the offer the customer chose would be a wrong charge.
            return .failed("signed offers need an SDK of 2025 or later (Swift 6.2)")
            #endif
        }
        if #available(iOS 18.0, macOS 15.0, *), let offer = await intents.take(productId), offer.type == .winBack {
            // The customer chose a win-back offer on the App Store: buying without it would charge the full price.
            options.insert(.winBackOffer(offer))
        }
        let result: Product.PurchaseResult
        do { result = try await product.purchase(options: options) } catch let refused as Product.PurchaseError {
            // StoreKit refused the purchase before charging (an offer's signature, eligibility or identifier, a
            // quantity, a product unavailable): nothing was paid, so the order's journal entry may go.
            return .failed("\(refused)")
        }
        switch result {
        // From here on StoreKit has charged: nothing below may throw or report a failure.
        case .success(let verification): return .purchased(await adopt(verification))
        case .pending: return .pending
        case .userCancelled: return .cancelled
        @unknown default: return .failed("unknown purchase result")
        }
    }

    /// Every unfinished transaction, each read on its own: one StoreKit cannot verify is still listed (the server
    /// judges it), and nothing one element does empties the list.
    public func unfinished() async throws -> [StoreTransaction] {
        var result: [StoreTransaction] = []
        for await verification in Transaction.unfinished { result.append(await adopt(verification)) }
        return result
    }

    /// Finishes the `Transaction` StoreKit handed over for this id. One not seen in this process (journaled before a
    /// relaunch) is looked up in `Transaction.unfinished`; if StoreKit does not have it, this throws rather than
    /// let the client believe it finished.
    public func finish(_ transaction: StoreTransaction) async throws {
        if let kept = await kept.take(transaction.transactionId) {
            await kept.finish()
            return
        }
        _ = try await unfinished()
        guard let found = await kept.take(transaction.transactionId) else {
            throw PurchaseFailure(.storeFailed, "StoreKit holds no unfinished transaction \(transaction.transactionId) to finish")
        }
        await found.finish()
    }

    /// Restore is a user's action (a Restore button): `AppStore.sync()` may ask the customer to sign in, which Apple
    /// allows only then.
    public func restore() async throws -> [StoreTransaction] {
        try await AppStore.sync()
        var result: [StoreTransaction] = []
        for await verification in Transaction.currentEntitlements { result.append(await adopt(verification)) }
        return result
    }

    public func currentEntitlements() async throws -> [StoreTransaction] {
        var result: [StoreTransaction] = []
        // Offline there is no server to judge: only what StoreKit itself verified counts.
        for await verification in Transaction.currentEntitlements {
            guard case .verified = verification else { continue }
            result.append(await adopt(verification))
        }
        return result
    }

    public func updates() -> AsyncStream<StoreTransaction> {
        AsyncStream { continuation in
            let task = Task {
                for await verification in Transaction.updates { continuation.yield(await adopt(verification)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The app receipt when the device has one; never refreshed here, because `AppStore.sync()` prompts for a
    /// sign-in and Apple allows that only on a user's explicit action: use ``refreshReceipt()`` behind a button.
    public func receipt() async throws -> String? {
        Bundle.main.appStoreReceiptURL.flatMap { try? Data(contentsOf: $0) }?.base64EncodedString()
    }

    /// Asks the App Store for a fresh receipt (may ask the customer to sign in): call only from a user's action.
    public func refreshReceipt() async throws -> String? {
        try await AppStore.sync()
        return try await receipt()
    }

    /// The signed app transaction (`AppTransaction.shared`'s JWS): proof of the app's purchase that, unlike the
    /// receipt, never needs a sign-in prompt to obtain.
    public func appTransaction() async throws -> String? {
        try await AppTransaction.shared.jwsRepresentation
    }

    public func promotedPurchases() -> AsyncStream<String> {
        AsyncStream { continuation in
            let task = Task {
                // PurchaseIntent arrived in macOS 14.4 (iOS 16.4, below this package's iOS 17 floor).
                if #available(iOS 17.0, macOS 14.4, *) {
                    for await intent in PurchaseIntent.intents {
                        if #available(iOS 18.0, macOS 15.0, *) { await intents.hold(intent.product.id, intent.offer) }
                        continuation.yield(intent.product.id)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    static func paymentMode(_ mode: Product.SubscriptionOffer.PaymentMode) -> String {
        switch mode {
        case .freeTrial: "FREE_TRIAL"
        case .payUpFront: "PAY_UP_FRONT"
        default: "PAY_AS_YOU_GO"
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
