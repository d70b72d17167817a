import Foundation

/// `POST /v1/purchases`: what the App Store signed, verified, bound to its order and account, granted once. Exactly one
/// of `signedTransaction`, `receipt`, `transactionId` and `appTransaction`.
public struct PurchaseRequest: Codable, Hashable, Sendable {
    /// A StoreKit 2 signed transaction (`jwsRepresentation`).
    public var signedTransaction: String?
    /// A base64 app receipt (StoreKit 1).
    public var receipt: String?
    /// A transaction id alone: looked up with the App Store Server API.
    public var transactionId: String?
    /// A signed app transaction (`AppTransaction.shared`'s JWS), which a device sends instead of asking the store for a
    /// missing receipt (that prompts for a sign-in): recorded for the account; it grants nothing by itself.
    public var appTransaction: String?
    public var orderId: String?
    /// The account the device means this upload for (the one that ordered the payment). A bearer token of another
    /// account is refused (409 `account_mismatch`, nothing stored): the app's sign-in changed between the SDK's check of
    /// the owner and the token it fetched for the call.
    public var expectedAccountId: String?
    /// Jailbreak heuristics the app ran (iOS): recorded with the transaction; the server's policy decides.
    public var deviceIntegrity: DeviceIntegrityReport?
    /// With a signed transaction of an auto-renewable subscription: the device's signed renewal info of its series
    /// (StoreKit's `Product.SubscriptionInfo.Status.renewalInfo`, its `jwsRepresentation`: Apple's JWSRenewalInfo), so
    /// that a server Apple's notifications do not reach still learns that the customer turned auto-renew off or chose
    /// another product. Applied after the transaction is granted, only to a series the uploading account holds, and
    /// only when signed later than what the server holds of it (the App Store's own news and an earlier device's); it
    /// dates the renewal info alone, never the series' status, and grants nothing by itself. One that does not verify (or names another account's series, or
    /// is older) never blocks the grant of the paid transaction: it is left out, logged, and the reply's
    /// `renewalInfoIgnored` says why. At most 16 KiB.
    public var signedRenewalInfo: String?

    public init(signedTransaction: String? = nil, receipt: String? = nil, transactionId: String? = nil, appTransaction: String? = nil,
                orderId: String? = nil, expectedAccountId: String? = nil, deviceIntegrity: DeviceIntegrityReport? = nil,
                signedRenewalInfo: String? = nil) {
        self.signedTransaction = signedTransaction
        self.receipt = receipt
        self.transactionId = transactionId
        self.appTransaction = appTransaction
        self.orderId = orderId
        self.expectedAccountId = expectedAccountId
        self.deviceIntegrity = deviceIntegrity
        self.signedRenewalInfo = signedRenewalInfo
    }
}

/// Which of the SDK's jailbreak checks fired on the device that paid.
public struct DeviceIntegrityReport: Codable, Hashable, Sendable {
    /// `known-paths`, `dyld-insert`, `writable-outside-sandbox`, `url-schemes`.
    public var signals: [String]
    /// Whether the checks apply on the device's platform (iOS devices only).
    public var applicable: Bool?

    public init(signals: [String], applicable: Bool?) {
        self.signals = signals
        self.applicable = applicable
    }
}

/// `POST /v1/purchases` answered 200: what each transaction of the proof came to, and what the account owns now.
public struct PurchaseReply: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var transactionId: String
        public var outcome: SubmissionOutcome
        public var orderId: String?
        /// Set when the transaction was granted, but not as the order the request named.
        public var orderRefusal: OrderRefusal?

        public init(transactionId: String, outcome: SubmissionOutcome, orderId: String?, orderRefusal: OrderRefusal?) {
            self.transactionId = transactionId
            self.outcome = outcome
            self.orderId = orderId
            self.orderRefusal = orderRefusal
        }
    }

    /// Why the order the request named is not the one a granted transaction fulfils: a payment for another product. The
    /// purchase was granted by its `appAccountToken` all the same; the order named stays open, unpaid.
    public struct OrderRefusal: Codable, Hashable, Sendable {
        public var orderId: String
        public var code: ErrorCode
        public var message: String

        public init(orderId: String, code: ErrorCode, message: String) {
            self.orderId = orderId
            self.code = code
            self.message = message
        }
    }

    /// A line of the proof that was not granted, with the class that says whether the device may finish it.
    public struct Refused: Codable, Hashable, Sendable {
        public var transactionId: String
        public var code: ErrorCode
        public var message: String
        public var `class`: RefusalClass

        public init(transactionId: String, code: ErrorCode, message: String, class refusal: RefusalClass) {
            self.transactionId = transactionId
            self.code = code
            self.message = message
            self.class = refusal
        }

        private enum CodingKeys: String, CodingKey { case transactionId, code, message, `class` }

        /// A class a newer server names and this version does not know is the operator's: the device keeps the paid
        /// transaction and retries, which no refusal can turn into a loss.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            transactionId = try container.decode(String.self, forKey: .transactionId)
            code = try container.decode(ErrorCode.self, forKey: .code)
            message = try container.decode(String.self, forKey: .message)
            self.class = (try? container.decodeIfPresent(RefusalClass.self, forKey: .class)) ?? .operator
        }
    }

    /// The outcome of the transaction the request was about (the first, for a receipt).
    public var outcome: SubmissionOutcome?
    public var transactionId: String?
    public var orderId: String?
    /// Its ``Item/orderRefusal``.
    public var orderRefusal: OrderRefusal?
    public var transactions: [Item]
    /// The lines refused while others were granted (a receipt's): a StoreKit 1 client that finishes on a 200 must finish
    /// only what `transactions` lists, and of these only the `final` ones.
    public var refused: [Refused]
    public var entitlements: Entitlements
    /// ``entitlements`` signed for the request's `X-Entitlements-Nonce`.
    public var signedEntitlements: String?
    /// Why the request's `signedRenewalInfo` was left out, when it was (the transaction's grant stands all the same).
    /// Open: a reason a newer server names is kept as it came.
    public struct RenewalInfoIgnored: APIOpenEnum {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Its signature, chain or environment did not verify, or it was over 16 KiB.
        public static let unverified: Self = "unverified"
        /// No auto-renewable series of this account has its original transaction id.
        public static let notOwned: Self = "notOwned"
        /// The server holds news of the series signed no earlier (the App Store's, or a device's).
        public static let older: Self = "older"
        /// The server could not apply it now: send it again.
        public static let unavailable: Self = "unavailable"
    }

    public var renewalInfoIgnored: RenewalInfoIgnored?

    public init(outcome: SubmissionOutcome?, transactionId: String?, orderId: String?, orderRefusal: OrderRefusal?, transactions: [Item],
                refused: [Refused], entitlements: Entitlements, signedEntitlements: String? = nil, renewalInfoIgnored: RenewalInfoIgnored? = nil) {
        self.outcome = outcome
        self.transactionId = transactionId
        self.orderId = orderId
        self.orderRefusal = orderRefusal
        self.transactions = transactions
        self.refused = refused
        self.entitlements = entitlements
        self.signedEntitlements = signedEntitlements
        self.renewalInfoIgnored = renewalInfoIgnored
    }

    private enum CodingKeys: String, CodingKey {
        case outcome, transactionId, orderId, orderRefusal, transactions, refused, entitlements, signedEntitlements, renewalInfoIgnored
    }

    /// Servers before `transactions` and `refused` were sent answered with the first line alone: read as a proof of one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decodeIfPresent(SubmissionOutcome.self, forKey: .outcome)
        transactionId = try container.decodeIfPresent(String.self, forKey: .transactionId)
        orderId = try container.decodeIfPresent(String.self, forKey: .orderId)
        orderRefusal = try container.decodeIfPresent(OrderRefusal.self, forKey: .orderRefusal)
        transactions = try container.decodeIfPresent([Item].self, forKey: .transactions) ?? []
        refused = try container.decodeIfPresent([Refused].self, forKey: .refused) ?? []
        entitlements = try container.decode(Entitlements.self, forKey: .entitlements)
        signedEntitlements = try container.decodeIfPresent(String.self, forKey: .signedEntitlements)
        renewalInfoIgnored = try container.decodeIfPresent(RenewalInfoIgnored.self, forKey: .renewalInfoIgnored)
    }
}

/// `POST /v1/purchases` answered 202: Apple could not be asked now; the proof is kept and granted when Apple answers.
/// Keep the transaction unfinished and send it again after `retryAt`.
public struct HeldProofReply: Codable, Hashable, Sendable {
    /// `pending`.
    public var status: String
    public var proofId: String
    public var retryAt: Date

    public init(status: String = "pending", proofId: String, retryAt: Date) {
        self.status = status
        self.proofId = proofId
        self.retryAt = retryAt
    }
}

/// `POST /v1/restore`: what the store restored, bound to the account.
public struct RestoreRequest: Codable, Hashable, Sendable {
    public var signedTransactions: [String]?
    public var receipt: String?
    /// The device's signed renewal info of its auto-renewable series (see ``PurchaseRequest/signedRenewalInfo``):
    /// applied after what is restored is bound, each only to a series the account holds and only when newer; one that
    /// does not verify is left out, never refusing the restore. At most 100, each at most 16 KiB.
    public var signedRenewalInfos: [String]?

    public init(signedTransactions: [String]? = nil, receipt: String? = nil, signedRenewalInfos: [String]? = nil) {
        self.signedTransactions = signedTransactions
        self.receipt = receipt
        self.signedRenewalInfos = signedRenewalInfos
    }
}

public struct RestoreReply: Codable, Hashable, Sendable {
    public var restored: Int
    /// Transactions that belong to another account, refused.
    public var refused: [String]
    /// Everything the account owns, non-renewing subscriptions (which the store does not restore) included.
    public var entitlements: Entitlements
    public var signedEntitlements: String?

    public init(restored: Int, refused: [String], entitlements: Entitlements, signedEntitlements: String?) {
        self.restored = restored
        self.refused = refused
        self.entitlements = entitlements
        self.signedEntitlements = signedEntitlements
    }
}
