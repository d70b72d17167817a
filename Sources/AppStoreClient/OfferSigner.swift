import AppStoreFormats
import Crypto
import Foundation

/// The signatures the app's server makes for StoreKit with its In-App Purchase key: promotional offers (the JWS of
/// 2025 and the original signature) and introductory-offer eligibility. Each carries a fresh nonce: the App Store takes
/// a signature once.
public struct OfferSigner: Sendable {
    public let credentials: ServerAPIClient.Credentials

    public init(credentials: ServerAPIClient.Credentials) {
        self.credentials = credentials
    }

    /// For `.promotionalOffer(_:compactJWS:)`. `transactionId`: any transaction of the customer's, or their
    /// `appTransactionId` (Apple recommends one).
    public func promotionalOffer(productId: String, offerIdentifier: String, transactionId: String?, now: Date = Date()) throws -> String {
        try credentials.signJWT(claims(OfferSignatureClaims.promotionalOfferAudience, productId: productId, transactionId: transactionId, now: now,
                                       offerIdentifier: offerIdentifier))
    }

    /// For `.introductoryOfferEligibility(compactJWS:)`: the server's word on whether the customer gets the product's
    /// introductory offer, which StoreKit then applies instead of its own judgement.
    public func introductoryOfferEligibility(productId: String, allowIntroductoryOffer: Bool, transactionId: String, now: Date = Date()) throws -> String {
        try credentials.signJWT(claims(OfferSignatureClaims.introductoryOfferEligibilityAudience, productId: productId, transactionId: transactionId,
                                       now: now, allowIntroductoryOffer: allowIntroductoryOffer))
    }

    /// An Advanced Commerce API request for StoreKit (`aud` `advanced-commerce-api`, the request's JSON in base64 as
    /// `request`): the app passes it with the purchase of the generic product, and the App Store charges what it says.
    public func advancedCommerceRequest(_ request: AdvancedCommerceInAppRequest, now: Date = Date()) throws -> String {
        let json = try AppStoreJSON.encoder().encode(request)
        return try credentials.signJWT(OfferSignatureClaims(iss: credentials.issuerId, iat: now.timeIntervalSince1970.rounded(.down),
                                                            aud: OfferSignatureClaims.advancedCommerceAudience, bid: credentials.bundleId,
                                                            nonce: UUID().lowercasedString, request: Base64.standardEncode(Array(json))))
    }

    /// The original API's promotional-offer signature; `applicationUsername` is the purchase's `appAccountToken`.
    public func legacyPromotionalOffer(productId: String, offerIdentifier: String, applicationUsername: String, now: Date = Date())
        throws -> LegacyPromotionalOfferSignature {
        let nonce = UUID()
        let timestamp = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let text = LegacyPromotionalOfferSignature.signedText(bundleId: credentials.bundleId, keyIdentifier: credentials.keyId, productId: productId,
                                                              offerIdentifier: offerIdentifier, applicationUsername: applicationUsername,
                                                              nonce: nonce, timestamp: timestamp)
        let signature = try credentials.privateKey.signature(for: Array(text.utf8))
        return LegacyPromotionalOfferSignature(keyIdentifier: credentials.keyId, nonce: nonce, timestamp: timestamp,
                                               signature: Base64.standardEncode(signature.derRepresentation))
    }

    private func claims(_ audience: String, productId: String, transactionId: String?, now: Date, offerIdentifier: String? = nil,
                        allowIntroductoryOffer: Bool? = nil) -> OfferSignatureClaims {
        OfferSignatureClaims(iss: credentials.issuerId, iat: now.timeIntervalSince1970.rounded(.down), aud: audience, bid: credentials.bundleId,
                             nonce: UUID().lowercasedString, productId: productId, offerIdentifier: offerIdentifier,
                             transactionId: transactionId, allowIntroductoryOffer: allowIntroductoryOffer)
    }
}
