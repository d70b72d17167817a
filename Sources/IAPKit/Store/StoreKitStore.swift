// The StoreKit 2 adapter. StoreKit exists on Apple platforms only: on the Linux machines IAPKit is built on, this file is
// type-checked in Swift 6 mode against Apple's declarations (Tests/AppleDeclarations, scripts/typecheck-apple, part of
// scripts/test), and the Apple CI workflow (.github/workflows/apple.yml) builds it for iOS and macOS where that runs. It
// is kept thin: every decision lives in PurchaseClient, tested against the simulator.
//
// The package needs the iOS 26 / macOS 26 SDK (Xcode 26): `Product.PurchaseOption.promotionalOffer(_:compactJWS:)`
// exists only there (`.introductoryOfferEligibility(compactJWS:)` since the iOS 18.4 SDK). Apple back-deploys both, and
// `.custom(key:value:)`, to every OS this package runs on, so no availability check guards them.
//
// iOS and macOS only: `PurchaseIntent` does not exist on tvOS, watchOS or visionOS, and `purchase(options:)` is
// unavailable on visionOS (it needs a scene there).
#if canImport(StoreKit) && (os(iOS) || os(macOS) || IAPKIT_APPLE_DECLARATIONS)
import Foundation
import StoreKit
// `PurchaseAction` is StoreKit's SwiftUI overlay: seen only where SwiftUI is imported too.
import SwiftUI
#if canImport(UIKit)
import UIKit
#elseif canImport(AppKit)
import AppKit
#endif

@available(iOS 17.0, macOS 14.0, *)
public struct StoreKitStore: StoreAdapter {
    /// StoreKit's own `Transaction` values by id, as they arrived to be finished (purchase, updates, unfinished):
    /// `finish` finishes that object, never a look-alike rebuilt from the JWS.
    private let kept = Kept()

    public init() {}

    actor Kept {
        private var transactions: [String: Transaction] = [:]
        func keep(_ transaction: Transaction) { transactions[String(transaction.id)] = transaction }
        func take(_ id: String) -> Transaction? { transactions.removeValue(forKey: id) }
    }

    /// A transaction that is to be finished: kept for ``finish(_:)``, and read.
    func adopt(_ verification: VerificationResult<Transaction>) async -> StoreTransaction {
        await kept.keep(verification.unsafePayloadValue)
        // Without its renewal info: a paid transaction is journaled before anything else, and asking StoreKit for the
        // series' status may wait on the network. The restore sends the renewal info (``restore()``).
        return Self.read(verification)
    }

    /// ``read(_:)``, with the signed renewal info of an auto-renewable subscription's series (`Transaction
    /// .subscriptionStatus`, nil for any other product, or when StoreKit cannot say): sent with the restore, it tells
    /// the server the series' renewal state (auto-renew off, the next product) even when Apple's notifications do not
    /// reach it.
    static func readWithRenewalInfo(_ verification: VerificationResult<Transaction>) async -> StoreTransaction {
        var read = read(verification)
        if let status = await verification.unsafePayloadValue.subscriptionStatus {
            read.signedRenewalInfo = status.renewalInfo.jwsRepresentation
        }
        return read
    }

    /// The adapter's view of a StoreKit transaction: ids read from the decoded payload StoreKit already has
    /// (`unsafePayloadValue`; the server verifies the JWS), so nothing is parsed twice and nothing here can throw.
    static func read(_ verification: VerificationResult<Transaction>) -> StoreTransaction {
        let transaction = verification.unsafePayloadValue
        return StoreTransaction(transactionId: String(transaction.id), originalTransactionId: String(transaction.originalID),
                                productId: transaction.productID, appAccountToken: transaction.appAccountToken,
                                expiresDate: transaction.expirationDate, revocationDate: transaction.revocationDate,
                                signedTransaction: verification.jwsRepresentation)
    }

    public func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        let found: [Product]
        do { found = try await Product.products(for: productIds) } catch { throw Self.rethrown(error) }
        var products: [StoreProduct] = []
        for product in found {
            // An introductory offer is shown only to a customer who can still get it: showing one the customer is
            // not eligible for misleads (and App Review rejects it).
            var intro: StoreProduct.Offer?
            if let subscription = product.subscription, let offer = subscription.introductoryOffer, await subscription.isEligibleForIntroOffer {
                intro = StoreProduct.Offer(discountType: Self.paymentMode(offer.paymentMode), period: Self.iso8601(offer.period),
                                           numberOfPeriods: offer.periodCount, price: Self.milliunits(offer.price))
            }
            products.append(StoreProduct(
                productId: product.id, type: Self.productType(product.type), displayName: product.displayName,
                price: Self.milliunits(product.price), currency: product.priceFormatStyle.currencyCode, displayPrice: product.displayPrice,
                subscriptionPeriod: product.subscription.map { Self.iso8601($0.subscriptionPeriod) },
                introductoryOffer: intro, familyShareable: product.isFamilyShareable))
        }
        return (products, productIds.filter { id in !found.contains { $0.id == id } })
    }

    /// StoreKit's product type in the App Store's words (the transactions' `type`): StoreKit's own raw values are not
    /// documented to be those, so the four known types are named, and only another type keeps StoreKit's raw value.
    static func productType(_ type: Product.ProductType) -> StoreProduct.ProductType {
        switch type {
        case .consumable: .consumable
        case .nonConsumable: .nonConsumable
        case .nonRenewable: .nonRenewingSubscription
        case .autoRenewable: .autoRenewableSubscription
        default: StoreProduct.ProductType(rawValue: type.rawValue)
        }
    }

    public func canMakePayments() async throws -> Bool { AppStore.canMakePayments }

    public func purchase(_ request: StorePurchaseRequest) async throws -> StorePurchaseResult {
        let product: Product
        do {
            // Not sold (StoreKit answers no product): nothing is charged, and the client says so (`unknownProduct`).
            guard let found = try await Product.products(for: [request.productId]).first else { throw StoreError.productUnavailable }
            product = found
        } catch {
            throw Self.rethrown(error)
        }
        var options: Set<Product.PurchaseOption> = [.appAccountToken(request.appAccountToken), .quantity(request.quantity)]
        // Nothing is charged when what the request carries cannot go on the payment: full price instead of the offer
        // the customer chose would be a wrong charge.
        if let jws = request.offers.promotionalOfferJWS {
            guard let offerId = request.offers.promotionalOfferId else { return .failed("a signed promotional offer without its offer id") }
            options.formUnion(Product.PurchaseOption.promotionalOffer(offerId, compactJWS: jws))
        }
        if let jws = request.offers.introductoryOfferEligibilityJWS { options.insert(.introductoryOfferEligibility(compactJWS: jws)) }
        if let data = request.offers.advancedCommerceData { options.insert(.custom(key: "advancedCommerceData", value: data)) }
        if let offerId = request.winBackOfferId {
            // Not offered (any more, or before iOS 18): StoreKit's own refusal for an offer it does not know, before any charge.
            guard #available(iOS 18.0, macOS 15.0, *), let offer = product.subscription?.winBackOffers.first(where: { $0.id == offerId }) else {
                throw StoreError.invalidOfferIdentifier
            }
            options.insert(.winBackOffer(offer))
        }
        let result: Product.PurchaseResult
        do { result = try await Self.pay(product, options: options, confirmation: request.confirmation) } catch { throw Self.rethrown(error) }
        switch result {
        // From here on StoreKit has charged: nothing below may throw or report a failure.
        case .success(let verification): return .purchased(await adopt(verification))
        case .pending: return .pending(requestId: nil)
        case .userCancelled: return .cancelled
        // A result a newer StoreKit adds may have charged: waited for like Ask to Buy (the order's intent stays, and a
        // paid transaction arrives through the updates), never ended as failed — which would tell the server nothing
        // was charged.
        @unknown default: return .pending(requestId: nil)
        }
    }

    /// The payment sheet where the app asked for it, with the API Apple provides for that anchor; `purchase(options:)`
    /// (StoreKit's own choice of window) without one, and on macOS, where Apple offers no other.
    @MainActor
    static func pay(_ product: Product, options: Set<Product.PurchaseOption>, confirmation: PurchaseConfirmation?) async throws -> Product.PurchaseResult {
        switch confirmation?.anchor {
        case let action as PurchaseAction:
            return try await action(product, options: options)
        #if canImport(UIKit)
        case let scene as UIScene:
            return try await product.purchase(confirmIn: scene, options: options)
        case let viewController as UIViewController:
            if #available(iOS 18.2, *) { return try await product.purchase(confirmIn: viewController, options: options) }
            if let scene = viewController.viewIfLoaded?.window?.windowScene { return try await product.purchase(confirmIn: scene, options: options) }
            return try await product.purchase(options: options)
        #endif
        default:
            return try await product.purchase(options: options)
        }
    }

    /// Every unfinished transaction, each read on its own: one StoreKit cannot verify is still listed (the server
    /// judges it), and nothing one element does empties the list.
    public func unfinished() async throws -> [StoreTransaction] {
        var result: [StoreTransaction] = []
        for await verification in Transaction.unfinished { result.append(await adopt(verification)) }
        return result
    }

    /// Finishes the `Transaction` StoreKit handed over for this id, or the one `Transaction.unfinished` lists (one
    /// journaled before a relaunch). One StoreKit no longer lists was finished already: done.
    public func finish(_ transaction: StoreTransaction) async throws {
        if let kept = await kept.take(transaction.transactionId) {
            await kept.finish()
            return
        }
        for await verification in Transaction.unfinished where String(verification.unsafePayloadValue.id) == transaction.transactionId {
            await verification.unsafePayloadValue.finish()
            return
        }
    }

    /// Restore is a user's action (a Restore button): `AppStore.sync()` may ask the customer to sign in, which Apple
    /// allows only then.
    public func restore() async throws -> [StoreTransaction] {
        do { try await AppStore.sync() } catch { throw Self.rethrown(error) }
        var result: [StoreTransaction] = []
        for await verification in Transaction.currentEntitlements { result.append(await Self.readWithRenewalInfo(verification)) }
        return result
    }

    public func currentEntitlements() async throws -> [StoreTransaction] {
        var result: [StoreTransaction] = []
        // Offline there is no server to judge: only what StoreKit itself verified counts.
        for await verification in Transaction.currentEntitlements {
            guard case .verified = verification else { continue }
            result.append(Self.read(verification))
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

    /// The app receipt, before iOS 18 / macOS 15 (Apple deprecated it there: ``transactionHistory()`` stands in for
    /// it); never refreshed here, because `AppStore.sync()` prompts for a sign-in and Apple allows that only on a
    /// user's explicit action: use ``refreshReceipt()`` behind a button.
    public func receipt() async throws -> String? {
        guard #unavailable(iOS 18.0, macOS 15.0) else { return nil }
        return Bundle.main.appStoreReceiptURL.flatMap { try? Data(contentsOf: $0) }?.base64EncodedString()
    }

    /// Asks the App Store for a fresh receipt (may ask the customer to sign in): call only from a user's action.
    public func refreshReceipt() async throws -> String? {
        do { try await AppStore.sync() } catch { throw Self.rethrown(error) }
        return try await receipt()
    }

    /// `Transaction.all` where Apple deprecated the receipt (iOS 18 / macOS 15); nil before, where the receipt is used.
    public func transactionHistory() async throws -> [StoreTransaction]? {
        guard #available(iOS 18.0, macOS 15.0, *) else { return nil }
        var result: [StoreTransaction] = []
        for await verification in Transaction.all { result.append(Self.read(verification)) }
        return result
    }

    /// The signed app transaction (`AppTransaction.shared`'s JWS): proof of the app's purchase that, unlike the
    /// receipt, never needs a sign-in prompt to obtain.
    public func appTransaction() async throws -> String? {
        do { return try await AppTransaction.shared.jwsRepresentation } catch { throw Self.rethrown(error) }
    }

    public func promotedPurchases() -> AsyncStream<PromotedPurchase> {
        AsyncStream { continuation in
            let task = Task {
                // PurchaseIntent arrived in macOS 14.4 (iOS 16.4, below this package's iOS 17 floor).
                if #available(macOS 14.4, *) {
                    for await intent in PurchaseIntent.intents {
                        continuation.yield(PromotedPurchase(productId: intent.product.id, winBackOfferId: Self.winBackOfferId(of: intent)))
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The win-back offer the App Store showed with a promoted purchase (iOS 18 / macOS 15): bought without it, the
    /// customer would pay full price.
    @available(macOS 14.4, *)
    static func winBackOfferId(of intent: PurchaseIntent) -> String? {
        guard #available(iOS 18.0, macOS 15.0, *), let offer = intent.offer, offer.type == .winBack else { return nil }
        return offer.id
    }

    // MARK: The customer's own tools

    public func showManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws {
        do { try await Self.presentManageSubscriptions(in: confirmation) } catch { throw Self.rethrown(error) }
    }

    public func beginRefundRequest(for transactionId: String, in confirmation: PurchaseConfirmation?) async throws -> RefundRequestStatus {
        guard let id = UInt64(transactionId) else { throw StoreError.systemError("\(transactionId) is not a StoreKit transaction id") }
        let status: Transaction.RefundRequestStatus
        do { status = try await Self.presentRefundRequest(for: id, in: confirmation) } catch { throw Self.rethrown(error) }
        switch status {
        case .success: return .success
        case .userCancelled: return .userCancelled
        @unknown default: throw StoreError.unknown
        }
    }

    public func presentOfferCodeRedeemSheet(in confirmation: PurchaseConfirmation?) async throws {
        do { try await Self.presentOfferCodes(in: confirmation) } catch { throw Self.rethrown(error) }
    }

    #if canImport(UIKit)
    @MainActor
    static func presentManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws {
        try await AppStore.showManageSubscriptions(in: windowScene(confirmation))
    }

    @MainActor
    static func presentRefundRequest(for transactionID: UInt64, in confirmation: PurchaseConfirmation?) async throws -> Transaction.RefundRequestStatus {
        try await Transaction.beginRefundRequest(for: transactionID, in: windowScene(confirmation))
    }

    @MainActor
    static func presentOfferCodes(in confirmation: PurchaseConfirmation?) async throws {
        try await AppStore.presentOfferCodeRedeemSheet(in: windowScene(confirmation))
    }

    /// The window scene Apple's sheets take: the anchor itself, or the scene of a view controller's window. A purchase
    /// action has none.
    @MainActor
    static func windowScene(_ confirmation: PurchaseConfirmation?) throws -> UIWindowScene {
        switch confirmation?.anchor {
        case let scene as UIWindowScene: return scene
        case let viewController as UIViewController:
            if let scene = viewController.viewIfLoaded?.window?.windowScene { return scene }
        default: break
        }
        throw StoreError.unsupported
    }
    #elseif canImport(AppKit)
    /// Apple has no manage-subscriptions sheet on macOS.
    @MainActor
    static func presentManageSubscriptions(in confirmation: PurchaseConfirmation?) async throws {
        throw StoreError.unsupported
    }

    @MainActor
    static func presentRefundRequest(for transactionID: UInt64, in confirmation: PurchaseConfirmation?) async throws -> Transaction.RefundRequestStatus {
        try await Transaction.beginRefundRequest(for: transactionID, in: viewController(confirmation))
    }

    @MainActor
    static func presentOfferCodes(in confirmation: PurchaseConfirmation?) async throws {
        guard #available(macOS 15.0, *) else { throw StoreError.unsupported }
        try await AppStore.presentOfferCodeRedeemSheet(from: viewController(confirmation))
    }

    /// The view controller Apple's sheets take on macOS: the anchor itself, or a window's content view controller.
    @MainActor
    static func viewController(_ confirmation: PurchaseConfirmation?) throws -> NSViewController {
        switch confirmation?.anchor {
        case let viewController as NSViewController: return viewController
        case let window as NSWindow:
            if let viewController = window.contentViewController { return viewController }
        default: break
        }
        throw StoreError.unsupported
    }
    #endif

    // MARK: StoreKit's terms

    /// What StoreKit threw, as ``StoreError`` says it (case for case); anything else as it was.
    static func rethrown(_ error: any Error) -> any Error {
        switch error {
        case let error as StoreKitError: StoreError(error)
        case let error as Product.PurchaseError: StoreError(error)
        case let error as Transaction.RefundRequestError: StoreError(error)
        default: error
        }
    }

    static func milliunits(_ price: Decimal) -> Int64 { NSDecimalNumber(decimal: price * 1000).int64Value }

    static func paymentMode(_ mode: Product.SubscriptionOffer.PaymentMode) -> String {
        switch mode {
        case .freeTrial: "FREE_TRIAL"
        case .payUpFront: "PAY_UP_FRONT"
        default: "PAY_AS_YOU_GO"
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

extension StoreError {
    @available(iOS 17.0, macOS 14.0, *)
    init(_ error: StoreKitError) {
        switch error {
        case .unknown: self = .unknown
        case .userCancelled: self = .userCancelled
        case .networkError(let error): self = .networkError("\(error.code.rawValue): \(error.localizedDescription)")
        case .systemError(let error): self = .systemError("\(error)")
        case .notAvailableInStorefront: self = .notAvailableInStorefront
        case .notEntitled: self = .notEntitled
        case .unsupported: self = .unsupported
        @unknown default: self = .unknown
        }
    }

    @available(iOS 17.0, macOS 14.0, *)
    init(_ error: Transaction.RefundRequestError) {
        switch error {
        case .duplicateRequest: self = .duplicateRequest
        case .failed: self = .refundRequestFailed
        @unknown default: self = .unknown
        }
    }

    @available(iOS 17.0, macOS 14.0, *)
    init(_ error: Product.PurchaseError) {
        switch error {
        case .invalidQuantity: self = .invalidQuantity
        case .productUnavailable: self = .productUnavailable
        case .purchaseNotAllowed: self = .purchaseNotAllowed
        case .ineligibleForOffer: self = .ineligibleForOffer
        case .invalidOfferIdentifier: self = .invalidOfferIdentifier
        case .invalidOfferPrice: self = .invalidOfferPrice
        case .invalidOfferSignature: self = .invalidOfferSignature
        case .missingOfferParameters: self = .missingOfferParameters
        @unknown default: self = .unknown
        }
    }
}

/// Where StoreKit shows its sheets, in Apple's terms.
extension PurchaseConfirmation {
    #if canImport(UIKit)
    /// `Product.purchase(confirmIn:options:)` with a scene (iOS 17); a window scene also anchors the App Store's other sheets.
    @MainActor public static func scene(_ scene: UIScene) -> PurchaseConfirmation { PurchaseConfirmation(anchor: scene) }

    /// `Product.purchase(confirmIn:options:)` with a view controller (iOS 18.2; before, its window's scene).
    @MainActor public static func viewController(_ viewController: UIViewController) -> PurchaseConfirmation {
        PurchaseConfirmation(anchor: viewController)
    }
    #elseif canImport(AppKit)
    /// The view controller the App Store's sheets show from on macOS (refund, offer codes). Apple offers no anchored
    /// purchase on macOS: the payment sheet is StoreKit's own.
    @MainActor public static func viewController(_ viewController: NSViewController) -> PurchaseConfirmation {
        PurchaseConfirmation(anchor: viewController)
    }

    /// A window whose content view controller anchors the App Store's sheets on macOS.
    @MainActor public static func window(_ window: NSWindow) -> PurchaseConfirmation { PurchaseConfirmation(anchor: window) }
    #endif

    /// SwiftUI's purchase action (`@Environment(\.purchase)`), which Apple recommends for SwiftUI apps on every platform.
    @MainActor public static func purchaseAction(_ action: PurchaseAction) -> PurchaseConfirmation { PurchaseConfirmation(anchor: action) }
}
#endif
