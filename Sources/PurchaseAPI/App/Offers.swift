import Foundation

/// `POST /v1/offers/sign`: a signature StoreKit needs from the app's server, for the signed-in customer.
public struct OfferSignRequest: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable { case promotionalOffer, introductoryOfferEligibility }
    public enum Format: String, Codable, Hashable, Sendable, CaseIterable { case jws, legacy }

    public var kind: Kind
    public var productId: String
    /// Promotional offers: the offer's identifier.
    public var offerIdentifier: String?
    /// Promotional offers: `jws` (the default) or `legacy`, the original API's signature.
    public var format: Format?
    /// The legacy signature signs the purchase's `appAccountToken` (its application username): the token of an order of
    /// this account's for this product.
    public var appAccountToken: UUID?
    /// The device's signed app transaction (`AppTransaction.shared`): the signature names this Apple ID's customer, so it
    /// serves on this Apple ID only. Without one, the newest the account presented.
    public var appTransaction: String?

    public init(kind: Kind, productId: String, offerIdentifier: String? = nil, format: Format? = nil, appAccountToken: UUID? = nil,
                appTransaction: String? = nil) {
        self.kind = kind
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.format = format
        self.appAccountToken = appAccountToken
        self.appTransaction = appTransaction
    }
}

public struct OfferSignReply: Codable, Hashable, Sendable {
    /// The original API's promotional-offer signature (`SKPaymentDiscount`'s fields).
    public struct LegacySignature: Codable, Hashable, Sendable {
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
    }

    /// What was signed; nil only for a kind a newer server added that this version does not know.
    public var kind: OfferSignRequest.Kind?
    public var productId: String
    public var offerIdentifier: String?
    /// The JWS to hand StoreKit.
    public var signature: String?
    public var legacySignature: LegacySignature?
    /// Introductory-offer eligibility: the server's judgement. Only a refusal is signed: where the server would allow it,
    /// StoreKit's own judgement per Apple ID stands.
    public var allowIntroductoryOffer: Bool?

    public init(kind: OfferSignRequest.Kind, productId: String, offerIdentifier: String? = nil, signature: String? = nil,
                legacySignature: LegacySignature? = nil, allowIntroductoryOffer: Bool? = nil) {
        self.kind = kind
        self.productId = productId
        self.offerIdentifier = offerIdentifier
        self.signature = signature
        self.legacySignature = legacySignature
        self.allowIntroductoryOffer = allowIntroductoryOffer
    }

    private enum CodingKeys: String, CodingKey { case kind, productId, offerIdentifier, signature, legacySignature, allowIntroductoryOffer }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        kind = try? container.decodeIfPresent(OfferSignRequest.Kind.self, forKey: .kind)
        productId = try container.decode(String.self, forKey: .productId)
        offerIdentifier = try container.decodeIfPresent(String.self, forKey: .offerIdentifier)
        signature = try container.decodeIfPresent(String.self, forKey: .signature)
        legacySignature = try container.decodeIfPresent(LegacySignature.self, forKey: .legacySignature)
        allowIntroductoryOffer = try container.decodeIfPresent(Bool.self, forKey: .allowIntroductoryOffer)
    }
}
