import AppStoreFormats
import Crypto
import Foundation

/// Checks the signatures the app's server makes for StoreKit, as the App Store does when a purchase uses them: ES256 by
/// the app's In-App Purchase key (the key the simulator's Server API takes), the feature's audience, the app's bundle
/// id, the product and offer bought, issued no more than 24 hours ago (real time, as tokens are), and a nonce never
/// used before (``StoreEngine/takeOfferNonce(_:account:transactionId:)`` keeps them).
public struct OfferSignatureVerifier: Sendable {
    public let keyId: String
    public let issuerId: String?
    public let publicKey: P256.Signing.PublicKey
    public let bundleId: String

    public init(_ authenticator: APIAuthenticator) {
        keyId = authenticator.keyId
        issuerId = authenticator.issuerId
        publicKey = authenticator.publicKey
        bundleId = authenticator.bundleId
    }

    /// What a valid signature says.
    public struct Accepted: Sendable, Hashable {
        public var nonce: String
        /// The customer's transaction or app transaction it names, to be checked against the buyer.
        public var transactionId: String?
        public var allowIntroductoryOffer: Bool?
    }

    /// Why a signature is refused (StoreKit's `invalidOfferSignature`).
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var description: String { "invalidOfferSignature: \(reason)" }
    }

    /// A promotional offer's JWS (`.promotionalOffer(_:compactJWS:)`).
    public func promotionalOffer(_ jws: String, productId: String, offerIdentifier: String, now: Date = Date()) -> Result<Accepted, Refusal> {
        claims(jws, audience: OfferSignatureClaims.promotionalOfferAudience, productId: productId, now: now).flatMap { claims in
            guard claims.offerIdentifier == offerIdentifier else { return .failure(Refusal(reason: "signed for another offer")) }
            return .success(Accepted(nonce: claims.nonce ?? "", transactionId: claims.transactionId))
        }
    }

    /// Introductory-offer eligibility's JWS (`.introductoryOfferEligibility(compactJWS:)`).
    public func introductoryOfferEligibility(_ jws: String, productId: String, now: Date = Date()) -> Result<Accepted, Refusal> {
        claims(jws, audience: OfferSignatureClaims.introductoryOfferEligibilityAudience, productId: productId, now: now).flatMap { claims in
            guard let allow = claims.allowIntroductoryOffer, let transactionId = claims.transactionId, !transactionId.isEmpty else {
                return .failure(Refusal(reason: "allowIntroductoryOffer and transactionId are required"))
            }
            return .success(Accepted(nonce: claims.nonce ?? "", transactionId: transactionId, allowIntroductoryOffer: allow))
        }
    }

    /// The original API's signature; `applicationUsername` is the purchase's `appAccountToken` (or empty).
    public func legacyPromotionalOffer(_ signature: LegacyPromotionalOfferSignature, productId: String, offerIdentifier: String,
                                       applicationUsername: String, now: Date = Date()) -> Result<Accepted, Refusal> {
        guard signature.keyIdentifier == keyId else { return .failure(Refusal(reason: "signed with another key")) }
        let issued = Date(timeIntervalSince1970: Double(signature.timestamp) / 1000)
        guard issued <= now.addingTimeInterval(60), now.timeIntervalSince(issued) <= LegacyPromotionalOfferSignature.lifetime else {
            return .failure(Refusal(reason: "expired, or dated in the future"))
        }
        let text = LegacyPromotionalOfferSignature.signedText(bundleId: bundleId, keyIdentifier: keyId, productId: productId,
                                                              offerIdentifier: offerIdentifier, applicationUsername: applicationUsername,
                                                              nonce: signature.nonce, timestamp: signature.timestamp)
        guard signature.signature.utf8.count <= 512, let der = Base64.decode(signature.signature.utf8),
              let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: der),
              publicKey.isValidSignature(ecdsa, for: SHA256.hash(data: Array(text.utf8))) else {
            return .failure(Refusal(reason: "the signature does not match"))
        }
        return .success(Accepted(nonce: signature.nonce.lowercasedString))
    }

    /// An Advanced Commerce API request (StoreKit's `advancedCommerceData`): the request it carries, decoded, and its nonce.
    public func advancedCommerceRequest(_ jws: String, now: Date = Date()) -> Result<(AdvancedCommerceInAppRequest, Accepted), Refusal> {
        claims(jws, audience: OfferSignatureClaims.advancedCommerceAudience, productId: nil, now: now).flatMap { claims in
            guard let text = claims.request, let json = Base64.decode(text.utf8),
                  let request = try? AppStoreJSON.decoder().decode(AdvancedCommerceInAppRequest.self, from: Data(json)) else {
                return .failure(Refusal(reason: "MalformedPayload: the request claim is not base64 of a request's JSON"))
            }
            return .success((request, Accepted(nonce: claims.nonce ?? "")))
        }
    }

    /// The promotional offer of a Get Retention Message answer: either signature, naming the subscription the customer
    /// is looking at (the JWS's `transactionId` is its original transaction id). Returns the product and offer it is for.
    public func retentionOffer(_ offer: RetentionPromotionalOffer, originalTransactionId: String, now: Date = Date()) -> Result<(productId: String, offerIdentifier: String), Refusal> {
        if let jws = offer.promotionalOfferSignatureV2 {
            // The claims say which product and offer; the checks below then hold them to the signature.
            guard offer.promotionalOfferSignatureV1 == nil else { return .failure(Refusal(reason: "both signatures given")) }
            guard jws.utf8.count <= 8 << 10, let compact = try? CompactJWS(jws),
                  let stated = try? JSONDecoder().decode(OfferSignatureClaims.self, from: Data(compact.payload())),
                  let productId = stated.productId, let offerIdentifier = stated.offerIdentifier else {
                return .failure(Refusal(reason: "not a promotional offer's JWS"))
            }
            return promotionalOffer(jws, productId: productId, offerIdentifier: offerIdentifier, now: now).flatMap { accepted in
                guard accepted.transactionId == originalTransactionId else { return .failure(Refusal(reason: "signed for another subscription")) }
                return .success((productId, offerIdentifier))
            }
        }
        guard let legacy = offer.promotionalOfferSignatureV1, let productId = legacy.productId, let offerIdentifier = legacy.offerIdentifier,
              let nonce = legacy.nonce, let timestamp = legacy.timestamp, let signature = legacy.encodedSignature else {
            return .failure(Refusal(reason: "no signature"))
        }
        guard legacy.keyId == keyId else { return .failure(Refusal(reason: "signed with another key")) }
        let stated = LegacyPromotionalOfferSignature(keyIdentifier: keyId, nonce: nonce, timestamp: timestamp, signature: signature)
        // The original API signs the application username as the app set it: StoreKit's UUID string, upper case, or lower.
        let usernames = legacy.appAccountToken.map { [$0.uuidString, $0.lowercasedString] } ?? [""]
        for username in usernames {
            if case .success = legacyPromotionalOffer(stated, productId: productId, offerIdentifier: offerIdentifier, applicationUsername: username, now: now) {
                return .success((productId, offerIdentifier))
            }
        }
        return .failure(Refusal(reason: "the signature does not match"))
    }

    private func claims(_ jws: String, audience: String, productId: String?, now: Date) -> Result<OfferSignatureClaims, Refusal> {
        // An Advanced Commerce request carries its items: room for Apple's longest names on many of them.
        guard jws.utf8.count <= 64 << 10, let compact = try? CompactJWS(jws), let header = try? compact.header() else {
            return .failure(Refusal(reason: "not a JWS"))
        }
        guard header.alg == "ES256", header.kid == keyId else { return .failure(Refusal(reason: "not signed with the app's In-App Purchase key")) }
        guard let raw = try? compact.signature(), let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw),
              publicKey.isValidSignature(signature, for: SHA256.hash(data: compact.signingInput)) else {
            return .failure(Refusal(reason: "the signature does not match"))
        }
        guard let claims = try? JSONDecoder().decode(OfferSignatureClaims.self, from: Data(compact.payload())) else {
            return .failure(Refusal(reason: "claims of the wrong shape"))
        }
        guard claims.aud == audience else { return .failure(Refusal(reason: "audience \(claims.aud ?? "none"), not \(audience)")) }
        guard claims.bid == bundleId else { return .failure(Refusal(reason: "signed for another app")) }
        if let issuerId, claims.iss != issuerId { return .failure(Refusal(reason: "another issuer")) }
        if let productId, claims.productId != productId { return .failure(Refusal(reason: "signed for another product")) }
        guard let iat = claims.iat, iat <= now.timeIntervalSince1970 + 60, now.timeIntervalSince1970 - iat <= LegacyPromotionalOfferSignature.lifetime else {
            return .failure(Refusal(reason: "expired, or issued in the future"))
        }
        guard let nonce = claims.nonce, UUID(uuidString: nonce) != nil else { return .failure(Refusal(reason: "the nonce is not a UUID")) }
        return .success(claims)
    }
}
