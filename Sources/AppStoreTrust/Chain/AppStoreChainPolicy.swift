import SwiftASN1
import X509

/// Apple's rules for an App Store signing chain, as a swift-certificates policy: exactly leaf → intermediate → root,
/// the intermediate carrying Apple's WWDR marker (1.2.840.113635.100.6.2.1) and the leaf the App Store receipt
/// signing marker (1.2.840.113635.100.6.11.1). The markers' contents do not matter, only their presence.
///
/// Combine it with `RFC5280Policy` for signatures, names and validity.
public struct AppStoreChainPolicy: VerifierPolicy, Sendable {
    /// Apple Worldwide Developer Relations intermediate marker.
    public static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// Mac App Store and iTunes Store receipt signing leaf marker.
    public static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    /// Whether the markers are required. Off only to diagnose why a chain failed.
    public var requiresMarkers: Bool

    public init(requiresMarkers: Bool = true) { self.requiresMarkers = requiresMarkers }

    /// Apple marks these extensions critical on some certificates; this policy is what handles them.
    public let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [Self.intermediateMarker, Self.leafMarker]

    public func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "App Store chains are leaf, intermediate, root; this one has \(chain.count) certificates")
        }
        guard requiresMarkers else { return .meetsPolicy }
        guard chain[0].extensions[oid: Self.leafMarker] != nil else {
            return .failsToMeetPolicy(reason: "leaf lacks Apple's receipt-signing marker \(Self.leafMarker)")
        }
        guard chain[1].extensions[oid: Self.intermediateMarker] != nil else {
            return .failsToMeetPolicy(reason: "intermediate lacks Apple's WWDR marker \(Self.intermediateMarker)")
        }
        return .meetsPolicy
    }
}
