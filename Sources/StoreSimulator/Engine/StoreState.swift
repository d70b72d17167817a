import AppStoreFormats
import Foundation

/// Everything the simulator remembers, as one value saved to `state.json` in its data directory after each change.
struct StoreState: Codable, Sendable {
    var accounts: [String: Account] = [:]
    var transactions: [String: StoredTransaction] = [:]
    /// Transaction ids in the order they were minted.
    var transactionOrder: [String] = []
    var pendingPurchases: [String: PendingPurchase] = [:]
    /// Ids start at a random point past 2·10¹⁵ (16 digits, like Apple's) so that a simulator started afresh — or several
    /// side by side — does not repeat an id a server may already hold from another run.
    var nextId: Int64 = 2_000_000_000_000_000 + Int64.random(in: 0..<1_000_000_000_000_000)
    var clockAdvance: TimeInterval = 0
    var retiredProductIds: Set<String> = []
    /// Renewal-date extensions per original transaction id (their times), and request identifiers already served.
    var extensions: [String: [Date]] = [:]
    var extensionRequests: [String: String] = [:]
    /// Mass renewal-date extensions by request identifier (optional: state files written before them still load).
    var massExtensions: [String: MassExtension]?
    /// Nonces of the offer signatures purchases used, with when (real time), kept while a signature could still be
    /// valid (optional: state files written before them still load).
    var usedOfferNonces: [String: Date]?
    /// Customers' refund requests by transaction id (optional: state files written before them still load).
    var refundRequests: [String: RefundRequest]?
    /// External purchase tokens by `externalPurchaseId` (optional: state files written before them still load).
    var externalPurchaseTokens: [String: ExternalToken]?
    /// Retention Messaging content and settings (optional: state files written before them still load).
    var retention: Retention?
    /// The App Store sheets each account's devices showed (manage subscriptions, refund request, offer code), oldest
    /// first. Optional: older state files load.
    var sheets: [String: [ShownSheet]]?
    /// Auto-renewable series by original transaction id.
    var subscriptions: [String: Subscription] = [:]
    /// Every notification minted, oldest first.
    var notifications: [StoredNotification] = []
    /// Renewal prices raised by the developer (product id → milliunits), applied from the next renewal.
    var priceOverrides: [String: Int64] = [:]
    /// Advanced Commerce API requests served, by `requestReferenceId`: what each asked (a retry of the same request is
    /// answered again, another request with the same id refused). Optional: older state files load.
    var advancedCommerceRequests: [String: String]?

    /// An auto-renewable subscription series and where it stands.
    struct Subscription: Codable, Sendable {
        var originalTransactionId: String
        var account: String
        var group: String
        var latestTransactionId: String
        var productId: String
        var autoRenewProductId: String
        var autoRenewStatus: Bool
        var expiresDate: Date
        var phase: Phase
        var expirationIntent: ExpirationIntent?
        var gracePeriodExpiresDate: Date?
        /// When billing first failed in the current retry.
        var billingRetrySince: Date?
        /// Renewals so far; sandbox stops renewing after 12.
        var renewals: Int = 0
        /// A price increase awaiting the customer's consent (`false`) or consented to (`true`); nil when none.
        var priceIncreaseConsented: Bool?
        /// An offer that applies to the coming renewals (a redeemed offer, or the rest of a pay-as-you-go offer).
        var nextOffer: ScheduledOffer?
        /// A family member's access: the purchaser's original transaction id. Such a series follows the purchaser's.
        var sharedFrom: String?
        /// The token a subscription change was bought with: the next transaction of the series carries it.
        var nextAppAccountToken: UUID?
        /// A monthly plan's 12-month commitment under way (optional: older state files load).
        var commitment: Commitment?
        /// A subscription of the Advanced Commerce API: what it sells, at what price, for which period.
        var advancedCommerce: AdvancedCommerceTerms?

        enum Phase: String, Codable, Sendable { case active, gracePeriod, billingRetry, expired, revoked }

        /// Monthly payments of a one-year subscription: which of the 12 the current period is, when the commitment ends,
        /// and whether another follows it (the customer's cancellation turns this off; the payments continue).
        struct Commitment: Codable, Sendable {
            var billingPeriodNumber: Int
            var expires: Date
            var renews: Bool
        }

        var status: SubscriptionStatus {
            switch phase {
            case .active: .active
            case .gracePeriod: .billingGracePeriod
            case .billingRetry: .billingRetry
            case .expired: .expired
            case .revoked: .revoked
            }
        }
    }

    /// A subscription offer's terms as they apply to a series' periods.
    struct ScheduledOffer: Codable, Sendable {
        var type: OfferType
        /// Promotional offer id or offer-code reference name; nil for introductory offers.
        var identifier: String?
        var discountType: OfferDiscountType
        /// ISO 8601 offer period, as `offerPeriod` reports it.
        var period: String
        /// Milliunits per period.
        var price: Int64
        /// Length of the next period at the offer's terms.
        var length: TimeInterval
        /// Pay as you go: discounted periods still to come after the next one.
        var periodsAfterNext: Int
    }

    /// A notification and its delivery attempts.
    struct StoredNotification: Codable, Sendable {
        var uuid: String
        var type: NotificationTypeV2
        var subtype: NotificationSubtype?
        var signedPayload: String
        var transactionId: String?
        var createdAt: Date
        var attempts: [SendAttemptItem] = []
        /// When the next delivery attempt is due (simulated time); nil when delivered or out of attempts.
        var nextAttempt: Date?
        /// A `TEST` notification's token.
        var testToken: String?
    }

    /// A simulated customer.
    struct Account: Codable, Sendable {
        var id: String
        var storefront: String
        var canMakePayments: Bool
        var askToBuy: Bool
        /// Renewals fail while this is set ("Allow Purchases & Renewals" off in sandbox settings).
        var billingFails: Bool = false
        /// Devices that bought something: renewals join each one's unfinished queue.
        var devices: Set<String> = []
        /// Subscription groups in which an introductory offer was used.
        var introOfferGroupsUsed: Set<String> = []
        /// Family members who share this account's family-shareable purchases.
        var familyMembers: [String] = []
        /// The customer's app transaction (Get App Transaction Info): its id, made when first asked for, and when the
        /// customer first had the app. Optional, so that a state file written before them still loads.
        var appTransactionId: String?
        var appPurchaseDate: Date?
    }

    /// A token Apple made for a purchase outside the App Store (the External Purchase and custom-link entitlements).
    struct ExternalToken: Codable, Sendable {
        var created: Date
        /// Custom-link tokens only: `ACQUISITION` or `SERVICES`, and when the token expires.
        var tokenType: ExternalPurchaseTokenType?
        var expires: Date?
        /// Whether the developer reported it (External Purchase Server API); unreported, Apple sends UNREPORTED.
        var reported: Bool = false
        var unreportedSent: Bool = false
        /// Monthly reminders sent while a custom-link token is active.
        var reminders: Int = 0
    }

    /// A customer's refund request (Report a Problem, `beginRefundRequest`): open until Apple decides, with the
    /// developer's consumption information once sent.
    struct RefundRequest: Codable, Sendable {
        var transactionId: String
        var reason: ConsumptionRequestReason
        var requestedAt: Date
        var consumption: ConsumptionRequest?
        var consumptionSentAt: Date?
        /// `REFUND` or `REFUND_DECLINED`, once decided.
        var decision: String?
    }

    /// What one Extend Subscription Renewal Dates for All Active Subscribers request did.
    struct MassExtension: Codable, Sendable {
        var productId: String
        var succeeded: Int64
        var failed: Int64
        var completed: Date
    }

    /// A minted transaction and its bookkeeping.
    struct StoredTransaction: Codable, Sendable {
        var payload: JWSTransactionDecodedPayload {
            // Apple's history lists transactions by when they last changed: a change moves one to the end.
            didSet { if payload != oldValue { revision = TransactionRevisions.next() } }
        }
        var account: String
        /// Devices that have not finished it yet; empty once finished everywhere it was delivered.
        var unfinishedOn: Set<String>
        /// A family member's copy: the purchaser's transaction id it mirrors.
        var sharedFrom: String?
        /// Its place in the order of changes, which Get Transaction History lists by and its `revision` continues
        /// from. Nil only in a state file written before it (the engine numbers those when it loads one).
        var revision: Int64?

        init(payload: JWSTransactionDecodedPayload, account: String, unfinishedOn: Set<String>, sharedFrom: String? = nil) {
            self.payload = payload
            self.account = account
            self.unfinishedOn = unfinishedOn
            self.sharedFrom = sharedFrom
            revision = TransactionRevisions.next()
        }
    }

    /// An Ask to Buy request waiting for a parent.
    struct PendingPurchase: Codable, Sendable {
        var account: String
        var device: String
        var productId: String
        var appAccountToken: UUID?
        var quantity: Int
        var offer: OfferRequest?
        /// The app server's signed word on the introductory offer (introductory-offer eligibility), when it gave one.
        var allowIntroductoryOffer: Bool?
        /// `MONTHLY` for a one-year subscription's 12-month commitment.
        var billingPlanType: BillingPlanType?
        /// An Advanced Commerce API purchase: the request the app's server signed.
        var advancedCommerce: AdvancedCommerceInAppRequest?
        /// When it was asked (simulated time), and whether it waits for the customer (an interrupted purchase) rather
        /// than a parent. Optional: older state files load.
        var requestedAt: Date?
        var interrupted: Bool?
    }

    mutating func mintId() -> String {
        defer { nextId += 1 }
        return String(nextId)
    }
}

/// Revisions of transactions: unique and increasing in the process. Engines in one process share the counter, which
/// keeps each engine's own revisions increasing; an engine that loads its state raises it past what it loaded.
enum TransactionRevisions {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var last: Int64 = 0

    static func next() -> Int64 { lock.withLock { last += 1; return last } }

    static func raise(past revision: Int64) { lock.withLock { last = max(last, revision) } }
}
