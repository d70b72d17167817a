import AppStoreFormats
import Foundation

/// What the server prefers Apple to decide when a customer asks for a refund (the answer to a `CONSUMPTION_REQUEST`).
public enum RefundPolicy: String, Codable, Sendable, CaseIterable {
    /// `GRANT_FULL`: the customer is refunded.
    case preferRefund
    /// `DECLINE`.
    case preferNoRefund
    /// By what was consumed: nothing consumed `GRANT_FULL`, all of it `DECLINE`, otherwise `GRANT_PRORATED` with the share
    /// consumed (auto-renewable subscriptions: `GRANT_PRORATED` alone; Apple computes their consumption).
    case prorated
}

/// What the ledger knows of a transaction a customer asked Apple to refund.
public struct ConsumptionFacts: Sendable, Hashable {
    public var transaction: PurchaseRecord
    /// The account it was delivered to; nil when it reached nobody.
    public var accountId: String?
    /// Whether that account's customer agreed to share consumption data with Apple (and no guardian withdrew consent).
    public var consented: Bool
    /// A consumable's credit (its units times the catalog amount) and the account's balance of that currency now.
    public var credited: Int64?
    public var balance: Int64?
    /// A non-renewing subscription's length in seconds (the catalog's; Apple keeps none).
    public var periodSeconds: Int64?

    public init(transaction: PurchaseRecord, accountId: String?, consented: Bool, credited: Int64? = nil, balance: Int64? = nil, periodSeconds: Int64? = nil) {
        self.transaction = transaction
        self.accountId = accountId
        self.consented = consented
        self.credited = credited
        self.balance = balance
        self.periodSeconds = periodSeconds
    }
}

/// The answer to a `CONSUMPTION_REQUEST`, as Apple's Send Consumption Information (API 1.19) takes it.
public enum ConsumptionRules {
    /// Why no answer is sent.
    public enum Silence: String, Sendable, Hashable {
        /// The transaction reached no account of this server: no customer to have consented.
        case notDelivered = "not_delivered"
        /// The customer did not consent (or a guardian withdrew consent): Apple asks for nothing to be sent then.
        case noConsent = "no_consent"
    }

    /// The body to send, or why none is sent.
    public static func answer(_ facts: ConsumptionFacts, policy: RefundPolicy, sampleContentProvided: Bool, now: Date) -> Result<ConsumptionRequest, SilenceReason> {
        guard facts.accountId != nil else { return .failure(SilenceReason(.notDelivered)) }
        guard facts.consented else { return .failure(SilenceReason(.noConsent)) }
        var request = ConsumptionRequest(customerConsented: true, sampleContentProvided: sampleContentProvided, deliveryStatus: .delivered)
        // Apple computes an auto-renewable subscription's consumption itself and refuses a percentage for one (4000209).
        let consumed = facts.transaction.productType == .autoRenewableSubscription ? nil : consumedShare(facts, now: now)
        request.consumptionPercentage = consumed
        switch policy {
        case .preferRefund: request.refundPreference = .grantFull
        case .preferNoRefund: request.refundPreference = .decline
        case .prorated:
            switch consumed {
            // An auto-renewable's share is Apple's to compute; an unknown one cannot back GRANT_PRORATED (it needs a share).
            case nil: request.refundPreference = facts.transaction.productType == .autoRenewableSubscription ? .grantProrated : .grantFull
            case 0?: request.refundPreference = .grantFull
            case 100_000?: request.refundPreference = .decline
            default: request.refundPreference = .grantProrated
            }
        }
        return .success(request)
    }

    /// The share of a purchase the customer consumed, in milliunits: a consumable's credit no longer in the balance
    /// (the refunded purchase's units counted as the last spent, in the customer's favour), a non-renewing
    /// subscription's time elapsed, all of a non-consumable (it unlocked what it sells once delivered).
    static func consumedShare(_ facts: ConsumptionFacts, now: Date) -> Int? {
        switch facts.transaction.productType {
        case .consumable:
            // A catalog that does not say what it credited: unknown, and said as such (no percentage).
            guard let credited = facts.credited, credited > 0 else { return nil }
            let left = min(credited, max(0, facts.balance ?? 0))
            return Int((credited - left) * 100_000 / credited)
        case .nonRenewingSubscription:
            guard let period = facts.periodSeconds, period > 0 else { return 100_000 }
            let elapsed = now.timeIntervalSince(facts.transaction.purchaseDate)
            return Int(min(100_000, max(0, (elapsed / Double(period) * 100_000).rounded(.down))))
        default:
            return 100_000
        }
    }

    /// ``Silence`` as an error value.
    public struct SilenceReason: Error, Sendable, Hashable {
        public let silence: Silence
        public init(_ silence: Silence) { self.silence = silence }
    }
}
