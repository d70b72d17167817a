// StoreKit 2 as Apple declares it (the iOS 26 SDK's generated interface; macOS-only members from Apple's documentation),
// reduced to what IAPKit's Apple-only code uses, signatures and availability unchanged. Test support for
// scripts/typecheck-apple, never linked into anything: bodies trap.
//
// Built twice: with the UIKit declarations (the iOS SDK: the members taking a scene or a UIViewController) and with the
// AppKit ones (the macOS SDK: the members taking an NSViewController).
@_exported import Foundation
#if canImport(UIKit)
import UIKit
#endif
#if canImport(AppKit)
import AppKit
#endif

// MARK: AppStore

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public enum AppStore {
    public static var canMakePayments: Bool { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension AppStore {
    public static func sync() async throws { fatalError() }
}

#if canImport(UIKit)
@available(iOS 15.0, visionOS 1.0, *)
@available(macOS, unavailable)
@available(watchOS, unavailable)
@available(tvOS, unavailable)
extension AppStore {
    @available(iOS 15.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    @available(watchOS, unavailable)
    @available(tvOS, unavailable)
    @MainActor public static func showManageSubscriptions(in scene: UIWindowScene) async throws { fatalError() }
}

extension AppStore {
    @available(iOS 16.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    @available(watchOS, unavailable)
    @available(tvOS, unavailable)
    @MainActor public static func presentOfferCodeRedeemSheet(in scene: UIWindowScene) async throws { fatalError() }
}
#endif

#if canImport(AppKit)
extension AppStore {
    @available(macOS 15.0, *)
    @available(iOS, unavailable)
    @available(watchOS, unavailable)
    @available(tvOS, unavailable)
    @available(visionOS, unavailable)
    @MainActor public static func presentOfferCodeRedeemSheet(from controller: NSViewController) async throws { fatalError() }
}
#endif

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension AppStore: Sendable {
}

// MARK: AppTransaction

@available(iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, visionOS 1.0, *)
public struct AppTransaction: Sendable {
    public static var shared: VerificationResult<AppTransaction> { get async throws { fatalError() } }
}

// MARK: Product

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public struct Product: Identifiable {
    public struct ProductType: RawRepresentable, Equatable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { fatalError() }
        public static let consumable: Product.ProductType = { fatalError() }()
        public static let nonConsumable: Product.ProductType = { fatalError() }()
        public static let nonRenewable: Product.ProductType = { fatalError() }()
        public static let autoRenewable: Product.ProductType = { fatalError() }()
        @available(iOS 15.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, macOS 12.0, *)
        public typealias RawValue = String
    }

    public let id: String
    public let type: Product.ProductType
    public let displayName: String
    public let price: Decimal
    public let displayPrice: String
    public let isFamilyShareable: Bool
    public let subscription: Product.SubscriptionInfo?

    @available(iOS 15.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, macOS 12.0, *)
    public typealias ID = String
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public struct SubscriptionPeriod: Equatable, Hashable {
        public enum Unit: Equatable, Hashable {
            case day
            case week
            case month
            case year
        }

        public let unit: Product.SubscriptionPeriod.Unit
        public let value: Int
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public struct SubscriptionInfo: Equatable, Hashable {
        public let introductoryOffer: Product.SubscriptionOffer?
        @available(iOS 18.0, macOS 15.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
        public let winBackOffers: [Product.SubscriptionOffer]
        public let subscriptionPeriod: Product.SubscriptionPeriod
        @inlinable public var isEligibleForIntroOffer: Bool { get async { fatalError() } }
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public struct PurchaseOption: Equatable, Hashable, Sendable {
        public static func appAccountToken(_ token: UUID) -> Product.PurchaseOption { fatalError() }
        public static func custom(key: String, value: String) -> Product.PurchaseOption { fatalError() }
        public static func custom(key: String, value: Double) -> Product.PurchaseOption { fatalError() }
        public static func custom(key: String, value: Bool) -> Product.PurchaseOption { fatalError() }
        public static func custom(key: String, value: Data) -> Product.PurchaseOption { fatalError() }

        @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
        @backDeployed(before: iOS 19.0, macOS 16.0, tvOS 19.0, watchOS 12.0, visionOS 3.0)
        public static func promotionalOffer(_ offerID: String, compactJWS: String) -> [Product.PurchaseOption] { fatalError() }

        public static func quantity(_ quantity: Int) -> Product.PurchaseOption { fatalError() }

        @available(iOS 18.0, macOS 15.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
        public static func winBackOffer(_ offer: Product.SubscriptionOffer) -> Product.PurchaseOption { fatalError() }

        @backDeployed(before: iOS 18.4, macOS 15.4, tvOS 18.4, watchOS 11.4, visionOS 2.4)
        public static func introductoryOfferEligibility(compactJWS: String) -> Product.PurchaseOption { fatalError() }
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public enum PurchaseResult {
        case success(VerificationResult<Transaction>)
        case userCancelled
        case pending
    }

    public enum PurchaseError: Error {
        case invalidQuantity
        case productUnavailable
        case purchaseNotAllowed
        case ineligibleForOffer
        case invalidOfferIdentifier
        case invalidOfferPrice
        case invalidOfferSignature
        case missingOfferParameters
    }

    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    @available(visionOS, unavailable)
    @MainActor public func purchase(options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { fatalError() }

    #if canImport(UIKit)
    @available(iOS 17.0, tvOS 17.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    @available(watchOS, unavailable)
    @MainActor public func purchase(confirmIn scene: some UIScene, options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { fatalError() }

    @available(iOS 18.2, tvOS 18.2, visionOS 2.2, *)
    @available(macOS, unavailable)
    @available(watchOS, unavailable)
    public func purchase(confirmIn viewController: UIViewController, options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { fatalError() }
    #endif
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public static func products<Identifiers>(for identifiers: Identifiers) async throws -> [Product] where Identifiers: Collection, Identifiers.Element == String { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
    @backDeployed(before: iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, macCatalyst 16.0)
    public var priceFormatStyle: Decimal.FormatStyle.Currency { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product {
    public struct SubscriptionOffer: Equatable, Hashable {
        public struct OfferType: RawRepresentable, Equatable, Hashable {
            public let rawValue: String
            public init(rawValue: String) { fatalError() }
            public static let introductory: Product.SubscriptionOffer.OfferType = { fatalError() }()
            public static let promotional: Product.SubscriptionOffer.OfferType = { fatalError() }()
            @available(iOS 18.0, macOS 15.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
            public static let winBack: Product.SubscriptionOffer.OfferType = { fatalError() }()
            @available(iOS 15.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, macOS 12.0, *)
            public typealias RawValue = String
        }

        public struct PaymentMode: RawRepresentable, Equatable, Hashable {
            public let rawValue: String
            public init(rawValue: String) { fatalError() }
            public static let payAsYouGo: Product.SubscriptionOffer.PaymentMode = { fatalError() }()
            public static let payUpFront: Product.SubscriptionOffer.PaymentMode = { fatalError() }()
            public static let freeTrial: Product.SubscriptionOffer.PaymentMode = { fatalError() }()
            @available(iOS 15.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, macOS 12.0, *)
            public typealias RawValue = String
        }

        public let id: String?
        public let type: Product.SubscriptionOffer.OfferType
        public let price: Decimal
        public let period: Product.SubscriptionPeriod
        public let periodCount: Int
        public let paymentMode: Product.SubscriptionOffer.PaymentMode
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.ProductType: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionPeriod: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionPeriod.Unit: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionInfo: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionInfo {
    public struct RenewalInfo {
    }

    public struct Status: Equatable, Hashable {
        public let renewalInfo: VerificationResult<Product.SubscriptionInfo.RenewalInfo>
        public static func == (a: Product.SubscriptionInfo.Status, b: Product.SubscriptionInfo.Status) -> Bool { fatalError() }
        public func hash(into hasher: inout Hasher) { fatalError() }
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionInfo.RenewalInfo: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionInfo.Status: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.PurchaseResult: Sendable {
}

@available(iOS 15.4, macOS 12.3, tvOS 15.4, watchOS 8.5, visionOS 1.0, *)
extension Product.PurchaseError: LocalizedError {
    public var errorDescription: String? { fatalError() }
    public var failureReason: String? { fatalError() }
    public var recoverySuggestion: String? { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.PurchaseError: Equatable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.PurchaseError: Hashable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionOffer: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionOffer.OfferType: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Product.SubscriptionOffer.PaymentMode: Sendable {
}

// MARK: PurchaseIntent

@available(iOS 16.4, macOS 14.4, *)
@available(tvOS, unavailable)
@available(watchOS, unavailable)
@available(visionOS, unavailable)
public struct PurchaseIntent: Equatable, Sendable {
    public let product: Product

    @available(iOS 18.0, macOS 15.0, *)
    @available(tvOS, unavailable)
    @available(watchOS, unavailable)
    @available(visionOS, unavailable)
    public let offer: Product.SubscriptionOffer?

    @available(iOS 16.4, macOS 14.4, *)
    @backDeployed(before: iOS 18.0, macOS 15.0, macCatalyst 18.0)
    @available(tvOS, unavailable)
    @available(watchOS, unavailable)
    @available(visionOS, unavailable)
    public var id: Product.ID { fatalError() }

    public static func == (a: PurchaseIntent, b: PurchaseIntent) -> Bool { fatalError() }
}

@available(iOS 16.4, macOS 14.4, *)
@available(tvOS, unavailable)
@available(watchOS, unavailable)
@available(visionOS, unavailable)
extension PurchaseIntent {
    public struct PurchaseIntents: AsyncSequence {
        public typealias Element = PurchaseIntent

        public struct AsyncIterator: AsyncIteratorProtocol {
            public mutating func next() async -> PurchaseIntent.PurchaseIntents.Element? { fatalError() }
        }

        public func makeAsyncIterator() -> PurchaseIntent.PurchaseIntents.AsyncIterator { fatalError() }
    }

    public static var intents: PurchaseIntent.PurchaseIntents { fatalError() }
}

// MARK: StoreKitError

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public enum StoreKitError: Error {
    case unknown
    case userCancelled
    case networkError(URLError)
    case systemError(any Error)
    case notAvailableInStorefront
    @available(iOS 15.4, macOS 12.3, tvOS 15.4, watchOS 8.5, visionOS 1.0, *)
    case notEntitled
    @available(iOS 18.4, macOS 15.4, tvOS 18.4, watchOS 11.4, visionOS 2.4, *)
    case unsupported
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension StoreKitError: Sendable {
}

@available(iOS 15.4, macOS 12.3, tvOS 15.4, watchOS 8.5, visionOS 1.0, *)
extension StoreKitError: LocalizedError {
    public var errorDescription: String? { fatalError() }
    public var failureReason: String? { fatalError() }
    public var recoverySuggestion: String? { fatalError() }
}

// MARK: Transaction

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public struct Transaction: Identifiable {
    public let id: UInt64
    public let originalID: UInt64
    public let productID: String
    public let expirationDate: Date?
    public let revocationDate: Date?
    public let appAccountToken: UUID?
    public func finish() async { fatalError() }

    @available(iOS 15.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, macOS 12.0, *)
    public typealias ID = UInt64
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Transaction {
    public struct Transactions: AsyncSequence {
        public typealias Element = VerificationResult<Transaction>

        public struct AsyncIterator: AsyncIteratorProtocol {
            public mutating func next() async -> VerificationResult<Transaction>? { fatalError() }
        }

        public func makeAsyncIterator() -> Transaction.Transactions.AsyncIterator { fatalError() }
    }

    public static var all: Transaction.Transactions { fatalError() }
    public static var currentEntitlements: Transaction.Transactions { fatalError() }
    public static var unfinished: Transaction.Transactions { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Transaction {
    public static var updates: Transaction.Transactions { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction {
    @available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    public enum RefundRequestError: Error {
        case duplicateRequest
        case failed
    }

    @available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    public enum RefundRequestStatus {
        case success
        case userCancelled
    }

    #if canImport(UIKit)
    @available(iOS 15.0, visionOS 1.0, *)
    @available(watchOS, unavailable)
    @available(tvOS, unavailable)
    @MainActor public static func beginRefundRequest(for transactionID: UInt64, in scene: UIWindowScene) async throws -> Transaction.RefundRequestStatus { fatalError() }
    #endif

    #if canImport(AppKit)
    @available(macOS 12.0, *)
    @available(iOS, unavailable)
    @available(watchOS, unavailable)
    @available(tvOS, unavailable)
    @available(visionOS, unavailable)
    public static func beginRefundRequest(for transactionID: UInt64, in controller: NSViewController) async throws -> Transaction.RefundRequestStatus { fatalError() }
    #endif
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Transaction {
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
    @backDeployed(before: iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0)
    public var subscriptionStatus: Product.SubscriptionInfo.Status? { get async { fatalError() } }
}

@available(iOS 15.0, tvOS 15.0, macOS 12.0, watchOS 8.0, visionOS 1.0, *)
extension Transaction: Sendable {
}

@available(iOS 15.0, tvOS 15.0, macOS 12.0, watchOS 8.0, visionOS 1.0, *)
extension Transaction.Transactions: Sendable {
}

@available(iOS 15.0, tvOS 17.0, macOS 12.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestError: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestError: Equatable {
}

@available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestError: Hashable {
}

@available(iOS 15.0, tvOS 17.0, macOS 12.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestStatus: Sendable {
}

@available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestStatus: Equatable {
}

@available(iOS 15.0, macOS 12.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
extension Transaction.RefundRequestStatus: Hashable {
}

// MARK: VerificationResult

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
@frozen public enum VerificationResult<SignedType> {
    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    case verified(SignedType)

    public var payloadValue: SignedType { get throws { fatalError() } }
    public var unsafePayloadValue: SignedType { fatalError() }
}

@available(iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, visionOS 1.0, *)
extension VerificationResult where SignedType == AppTransaction {
    public var jwsRepresentation: String { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension VerificationResult where SignedType == Transaction {
    public var jwsRepresentation: String { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension VerificationResult where SignedType == Product.SubscriptionInfo.RenewalInfo {
    public var jwsRepresentation: String { fatalError() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension VerificationResult {
    public enum VerificationError: Error {
        case revokedCertificate
        case invalidCertificateChain
        case invalidDeviceVerification
        case invalidEncoding
        case invalidSignature
        case missingRequiredProperties
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension VerificationResult: Sendable where SignedType: Sendable {
}
