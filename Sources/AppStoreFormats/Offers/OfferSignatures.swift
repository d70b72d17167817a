import Foundation

/// The claims of a JWS the app's server signs for StoreKit (Apple's "Generating JWS to sign App Store requests"):
/// a promotional offer (`aud` `promotional-offer`, for `.promotionalOffer(_:compactJWS:)`) or introductory-offer
/// eligibility (`aud` `introductory-offer-eligibility`, for `.introductoryOfferEligibility(compactJWS:)`). Header:
/// `alg` `ES256`, `kid` the In-App Purchase key's id, `typ` `JWT`.
public struct OfferSignatureClaims: Codable, Hashable, Sendable {
    public static let promotionalOfferAudience = "promotional-offer"
    public static let introductoryOfferEligibilityAudience = "introductory-offer-eligibility"
    public static let advancedCommerceAudience = "advanced-commerce-api"

    /// The issuer id from App Store Connect's Keys page.
    public var iss: String?
    /// Seconds since 1970.
    public var iat: Double?
    public var aud: String?
    public var bid: String?
    /// A one-time UUID: the App Store takes each signature once.
    public var nonce: String?
    public var productId: String?
    /// Promotional offers: the offer's identifier in App Store Connect.
    public var offerIdentifier: String?
    /// Any transaction of the customer's, or their `appTransactionId` (optional for promotional offers).
    public var transactionId: String?
    /// Introductory-offer eligibility: whether the customer gets the introductory offer.
    public var allowIntroductoryOffer: Bool?
    /// Advanced Commerce API: the base64 of the request's JSON (``AdvancedCommerceInAppRequest``).
    public var request: String?

    public init(iss: String? = nil, iat: Double? = nil, aud: String? = nil, bid: String? = nil, nonce: String? = nil, productId: String? = nil,
                offerIdentifier: String? = nil, transactionId: String? = nil, allowIntroductoryOffer: Bool? = nil, request: String? = nil) {
        self.iss = iss
        self.iat = iat
        self.aud = aud
        self.bid = bid
        self.nonce = nonce
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.transactionId = transactionId
        self.allowIntroductoryOffer = allowIntroductoryOffer
        self.request = request
    }
}

/// The promotional-offer signature of StoreKit's original API (and `.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`):
/// ES256 (DER, base64) over the fields below joined by U+2063, valid for 24 hours from `timestamp`.
public struct LegacyPromotionalOfferSignature: Codable, Hashable, Sendable {
    public var keyIdentifier: String
    public var nonce: UUID
    /// Milliseconds since 1970.
    public var timestamp: Int64
    /// Base64 of the DER ECDSA signature.
    public var signature: String

    public init(keyIdentifier: String, nonce: UUID, timestamp: Int64, signature: String) {
        self.keyIdentifier = keyIdentifier
        self.nonce = nonce
        self.timestamp = timestamp
        self.signature = signature
    }

    /// How long Apple takes one, from its timestamp.
    public static let lifetime: TimeInterval = 86_400

    /// The text signed: bundle id, key id, product id, offer id, application username (the `appAccountToken`, lower
    /// case, or empty), nonce (lower case) and timestamp, separated by U+2063 INVISIBLE SEPARATOR.
    public static func signedText(bundleId: String, keyIdentifier: String, productId: String, offerIdentifier: String,
                                  applicationUsername: String, nonce: UUID, timestamp: Int64) -> String {
        [bundleId, keyIdentifier, productId, offerIdentifier, applicationUsername.lowercased(), nonce.lowercasedString, String(timestamp)]
            .joined(separator: "\u{2063}")
    }
}
