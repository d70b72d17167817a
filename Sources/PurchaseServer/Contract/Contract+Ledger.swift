import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger

// The ledger's records as the contract answers them. The ledger keys a test environment's ids apart
// (`TransactionKey`); apps and operators are told ids as Apple signed them, so the mapping is here, once.

extension Entitlements {
    /// What the ledger says the account owns, as apps are told it.
    init(_ owned: AccountEntitlements) {
        self.init(accountId: owned.accountId, entitlements: owned.entitlements.map(Entitlements.Item.init), balances: owned.balances)
    }
}

extension Entitlements.Item {
    init(_ entitlement: Entitlement) {
        let environment = entitlement.environment
        self.init(name: entitlement.name, productId: entitlement.productId,
                  transactionId: TransactionKey.signedId(entitlement.transactionId, in: environment),
                  originalTransactionId: entitlement.originalTransactionId.map { TransactionKey.signedId($0, in: environment) },
                  appAccountToken: entitlement.appAccountToken.flatMap(UUID.init(uuidString:)), expiresAt: entitlement.expiresAt,
                  state: State(rawValue: entitlement.state.rawValue), environment: environment.rawValue,
                  renewalInfo: entitlement.renewal.map(Entitlements.RenewalInfo.init))
    }
}

extension Entitlements.RenewalInfo {
    /// Apple's values as Apple sends them.
    init(_ renewal: Entitlement.Renewal) {
        self.init(autoRenewStatus: renewal.autoRenewStatus.rawValue, autoRenewProductId: renewal.autoRenewProductId,
                  expirationIntent: renewal.expirationIntent?.rawValue, gracePeriodExpiresDate: renewal.gracePeriodExpiresDate,
                  isInBillingRetryPeriod: renewal.isInBillingRetryPeriod, priceIncreaseStatus: renewal.priceIncreaseStatus?.rawValue,
                  signedDate: renewal.signedDate)
    }
}

extension AdminOrder {
    init(_ order: Order) {
        self.init(orderId: order.orderId, accountId: order.accountId, productId: order.productId, appAccountToken: order.appAccountToken.lowercasedString,
                  state: order.state.rawValue, transactionId: order.transactionId, createdAt: order.createdAt, expiresAt: order.expiresAt,
                  abandonedAt: order.abandonedAt, abandonReason: order.abandonReason)
    }
}

extension TransactionRecord {
    /// The operator sees the ledger's key (an Xcode transaction's `Xcode:<id>`): what the admin API takes back.
    init(_ record: PurchaseRecord) {
        self.init(transactionId: record.transactionId, originalTransactionId: record.originalTransactionId, accountId: record.accountId,
                  orderId: record.orderId, productId: record.productId, type: record.productType.rawValue, environment: record.environment.rawValue,
                  quantity: record.quantity, purchaseDate: record.purchaseDate, expiresDate: record.expiresDate, revocationDate: record.revocationDate,
                  revocationReason: record.revocationReason?.rawValue, revocationType: record.revocationType?.rawValue,
                  revocationPercentage: record.revocationPercentage, appTransactionId: record.appTransactionId, isUpgraded: record.isUpgraded,
                  appAccountToken: record.appAccountToken?.lowercasedString, signedDate: record.signedDate, price: record.price,
                  currency: record.currency, offerType: record.offerType?.rawValue, offerDiscountType: record.offerDiscountType?.rawValue,
                  offerPeriod: record.offerPeriod, storefront: record.storefront)
    }
}

extension SeriesReply.Status {
    init(_ status: SubscriptionRecord) {
        self.init(status: status.status?.rawValue, gracePeriodExpiresDate: status.gracePeriodExpiresDate, autoRenew: status.autoRenew,
                  autoRenewProductId: status.autoRenewProductId, signedDate: status.signedDate, productId: status.productId,
                  expiresDate: status.expiresDate)
    }
}

extension OfferSignReply.LegacySignature {
    init(_ signature: LegacyPromotionalOfferSignature) {
        self.init(keyIdentifier: signature.keyIdentifier, nonce: signature.nonce, timestamp: signature.timestamp, signature: signature.signature)
    }
}

extension ErrorCode {
    init(_ code: LedgerError.Code) { self.init(rawValue: code.rawValue) }
    init(_ code: AppStoreError.Code) { self.init(rawValue: code.rawValue) }
}

extension PurchaseReply.OrderRefusal {
    /// The order named was refused, the payment granted by its `appAccountToken` all the same.
    init(orderId: String, refusal: LedgerError) {
        self.init(orderId: orderId, code: ErrorCode(refusal.code),
                  message: refusal.message + "; the purchase was granted by its appAccountToken, not as that order")
    }
}
