import AppStoreFormats
import Foundation

/// The Advanced Commerce API's server endpoints (`/advancedCommerce/v1`, the same hosts, key and token as the Server
/// API): changes to a subscription of the generic product, named by any of its transactions. Each answers the
/// subscription's latest transaction and renewal info, signed; a retry with the same `requestReferenceId` (Apple's
/// advice after a timeout) is not applied twice.
extension ServerAPIClient {
    /// Change Subscription Metadata: names and SKUs now (`IMMEDIATELY`) or from the next renewal; METADATA_UPDATE.
    public func changeSubscriptionMetadata(_ transactionId: String, _ request: AdvancedCommerceChangeMetadataRequest) async throws -> AdvancedCommerceSubscriptionResponse {
        try await advancedCommerce("subscription/changeMetadata", transactionId, request)
    }

    /// Change Subscription Price: prices from the next renewal; PRICE_CHANGE.
    public func changeSubscriptionPrice(_ transactionId: String, _ request: AdvancedCommercePriceChangeRequest) async throws -> AdvancedCommerceSubscriptionResponse {
        try await advancedCommerce("subscription/changePrice", transactionId, request)
    }

    /// Migrate a Subscription to Advanced Commerce API: the In-App Purchase subscription goes on as one of the generic
    /// product, under a new original transaction id; MIGRATION.
    public func migrateSubscription(_ transactionId: String, _ request: AdvancedCommerceMigrateRequest) async throws -> AdvancedCommerceSubscriptionResponse {
        try await advancedCommerce("subscription/migrate", transactionId, request)
    }

    /// Cancel a Subscription: auto-renew off.
    public func cancelSubscription(_ transactionId: String, _ request: AdvancedCommerceCancelRequest) async throws -> AdvancedCommerceSubscriptionResponse {
        try await advancedCommerce("subscription/cancel", transactionId, request)
    }

    /// Revoke Subscription: ends it now with a refund; REFUND.
    public func revokeSubscription(_ transactionId: String, _ request: AdvancedCommerceRevokeRequest) async throws -> AdvancedCommerceSubscriptionResponse {
        try await advancedCommerce("subscription/revoke", transactionId, request)
    }

    /// Request Transaction Refund: refunds (and with `revoke`, revokes) items of one transaction; REFUND.
    public func requestTransactionRefund(_ transactionId: String, _ request: AdvancedCommerceRequestRefundRequest) async throws -> AdvancedCommerceTransactionResponse {
        try await advancedCommerce("transaction/requestRefund", transactionId, request)
    }

    /// The answer's type is the caller's: a subscription change answers both signed payloads, a refund the transaction.
    private func advancedCommerce<Answer: Decodable>(_ operation: String, _ transactionId: String, _ request: some Encodable) async throws -> Answer {
        let body = try AppStoreJSON.encoder().encode(request)
        return try await call(.POST, "/advancedCommerce/v1/\(operation)/\(try Self.pathSegment(transactionId))", body: [UInt8](body), as: Answer.self)
    }
}
