import AppStoreFormats
import Foundation
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

/// Builds and checks a signing chain against a verifier's trust roots, and says precisely why one fails.
struct ChainValidator: Sendable {
    let roots: TrustRoots
    private let store: CertificateStore

    init(roots: TrustRoots) {
        self.roots = roots
        store = CertificateStore(roots.chainAnchors.map(\.certificate))
    }

    /// A verified chain: the anchor it ends in and the window in which every certificate of it is valid.
    struct Result: Sendable {
        let anchor: TrustAnchor
        /// Leaf first, trusted root last.
        let certificates: [Certificate]
        let validity: ValidityWindow
    }

    /// Validates `leaf` through `intermediates` to a trusted root at `time` under Apple's chain policy.
    ///
    /// Every certificate the sender embedded must be part of the verified chain (the embedded root must be the
    /// trusted root itself): a stray or altered certificate means the container was tampered with.
    func validate(leaf: Certificate, intermediates: [Certificate], embedded: [Certificate], at time: Date) async throws -> Result {
        let result = try await validate(leaf: leaf, intermediates: intermediates, at: time)
        for certificate in embedded where !result.certificates.contains(certificate) {
            throw AppStoreError(.untrustedChain, "an embedded certificate (\(certificate.subject)) is not part of the verified chain")
        }
        return result
    }

    private func validate(leaf: Certificate, intermediates: [Certificate], at time: Date) async throws -> Result {
        if case .valid(let chain) = await run(leaf, intermediates, RFC5280Policy(fixedExpiryValidationTime: time), AppStoreChainPolicy()) {
            guard let anchor = roots.anchor(for: chain[chain.count - 1]) else {
                throw AppStoreError(.untrustedChain, "chain ends in a certificate that is not a configured root")
            }
            return Result(anchor: anchor, certificates: chain, validity: ValidityWindow(chain))
        }
        throw await diagnose(leaf: leaf, intermediates: intermediates, at: time)
    }

    /// Re-runs the chain with one rule relaxed at a time to name the rule that failed. Only failures pay for this.
    private func diagnose(leaf: Certificate, intermediates: [Certificate], at time: Date) async -> AppStoreError {
        if case .valid = await run(leaf, intermediates, RFC5280Policy.withValidityCheckDisabled(), AppStoreChainPolicy()) {
            return AppStoreError(.expiredAtSigningTime, "a certificate in the chain was not valid at \(ReceiptDate.rfc3339(time))")
        }
        if case .valid = await run(leaf, intermediates, RFC5280Policy(fixedExpiryValidationTime: time), AppStoreChainPolicy(requiresMarkers: false)) {
            return AppStoreError(.missingAppleMarker, "the chain reaches a trusted root but lacks Apple's leaf (…6.11.1) or intermediate (…6.2.1) marker")
        }
        if roots.chainAnchors.isEmpty {
            return AppStoreError(.untrustedChain, "no trust roots are configured")
        }
        return AppStoreError(.untrustedChain, "the certificates do not chain to a trusted root (\(roots.chainAnchors.map(\.subject).joined(separator: "; ")))")
    }

    private enum Outcome { case valid([Certificate]), invalid }

    private func run(_ leaf: Certificate, _ intermediates: [Certificate], _ rfc: RFC5280Policy, _ apple: AppStoreChainPolicy) async -> Outcome {
        var verifier = Verifier(rootCertificates: store) {
            rfc
            apple
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(intermediates)) {
        case .validCertificate(let chain): return .valid(Array(chain))
        case .couldNotValidate: return .invalid
        }
    }
}

/// When a verified chain may sign: the intersection of its certificates' validity periods.
///
/// A cached chain is only reused for a signing date inside this window, so the cache never widens what RFC 5280
/// would accept at that date.
struct ValidityWindow: Sendable {
    let from: Date
    let until: Date

    init(_ certificates: [Certificate]) {
        from = certificates.map(\.notValidBefore).max() ?? .distantFuture
        until = certificates.map(\.notValidAfter).min() ?? .distantPast
    }

    func check(_ time: Date) throws {
        guard from <= time, time <= until else {
            throw AppStoreError(.expiredAtSigningTime, "a certificate in the chain was not valid at \(ReceiptDate.rfc3339(time))")
        }
    }
}
