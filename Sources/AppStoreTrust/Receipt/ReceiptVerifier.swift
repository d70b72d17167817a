import _CryptoExtras
import AppStoreFormats
import Crypto
import Foundation
import SwiftASN1
import X509

/// Verifies app receipts (PKCS#7): the signer's chain to a trusted root under Apple's chain policy at the receipt's
/// creation date, the RSA PKCS#1 v1.5 signature (SHA-1 or SHA-256), then bundle id, version, environment and, when
/// given a device identifier, the device hash.
///
/// Xcode receipts are signed by Xcode's StoreKit Testing certificate alone; they pass only when that certificate is a
/// trusted root and ``Configuration/environments`` includes `Xcode`.
public struct ReceiptVerifier: Sendable {
    /// What a verifier accepts.
    public struct Configuration: Sendable {
        public var roots: TrustRoots
        /// The bundle id the receipt must name; `nil` accepts any.
        public var bundleId: String?
        /// The app version the receipt must name; `nil` accepts any.
        public var applicationVersion: String?
        /// Environments accepted (`Production`, `Sandbox`, and `Xcode` only when asked for).
        public var environments: Set<AppStoreEnvironment>
        /// `.signingDate` checks the chain at the receipt creation date, as Apple's certificates expire long before
        /// the receipts they signed stop mattering.
        public var validationTime: ValidationTime
        public var limits: InputLimits

        public init(roots: TrustRoots, bundleId: String? = nil, applicationVersion: String? = nil,
                    environments: Set<AppStoreEnvironment> = [.production, .sandbox],
                    validationTime: ValidationTime = .signingDate, limits: InputLimits = .default) {
            self.roots = roots
            self.bundleId = bundleId
            self.applicationVersion = applicationVersion
            self.environments = environments
            self.validationTime = validationTime
            self.limits = limits
        }
    }

    public let configuration: Configuration
    private let chains: ChainValidator
    private let cache = VerifiedChainCache<VerifiedSigner>()

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        chains = ChainValidator(roots: configuration.roots)
    }

    static let sha1: ASN1ObjectIdentifier = [1, 3, 14, 3, 2, 26]
    static let sha256: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 2, 1]
    static let rsaEncryption: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 1]
    static let sha1WithRSA: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 5]
    static let sha256WithRSA: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 11]

    /// Verifies a DER/BER receipt.
    /// - Parameter deviceIdentifier: the 16 bytes of `identifierForVendor` (or a Mac's 6-byte MAC address); when
    ///   given, the receipt's device hash must match it.
    public func verify(_ der: [UInt8], deviceIdentifier: [UInt8]? = nil) async throws -> VerifiedReceipt {
        let container = try PKCS7SignedData(berEncoded: der, limits: configuration.limits)
        guard container.signerInfos.count == 1, let signer = container.signerInfos.first else {
            throw AppStoreError(.malformed, "receipt has \(container.signerInfos.count) signers; App Store receipts have one")
        }
        let receipt = try AppReceipt(payload: container.content, limits: configuration.limits)
        let time = configuration.validationTime.date(signed: receipt.receiptCreationDate)
        let environment = receipt.receiptType?.environment

        let key = Self.cacheKey(signer, container.certificates)
        let verifiedSigner: VerifiedSigner
        if let cached = cache.entry(for: key[...]) {
            try cached.validity.check(time)
            verifiedSigner = cached
        } else {
            verifiedSigner = try await verifySigner(signer, container.certificates, at: time)
            cache.store(verifiedSigner, for: key[...])
        }
        let anchor = verifiedSigner.anchor
        if anchor.kind == .xcodeStoreKit, !configuration.environments.contains(.xcode) {
            throw AppStoreError(.testEnvironmentNotAllowed, "this receipt is signed by Xcode's StoreKit Testing certificate; Xcode receipts are not accepted")
        }

        try Self.checkSignature(signer, content: container.content, key: verifiedSigner.key)
        try check(receipt, environment: environment, anchor: anchor, deviceIdentifier: deviceIdentifier)
        return VerifiedReceipt(receipt: receipt, anchor: anchor, environment: environment, validatedAt: time,
                               digestAlgorithm: signer.digestAlgorithm == Self.sha1 ? "SHA-1" : "SHA-256")
    }

    /// A verified signer: its key, the root its chain ends in and the window in which the chain is valid.
    struct VerifiedSigner: Sendable {
        let key: _RSA.Signing.PublicKey
        let anchor: TrustAnchor
        let validity: ValidityWindow
    }

    /// The signer's identity and every embedded certificate, length-prefixed so no two inputs share a key.
    static func cacheKey(_ signer: PKCS7SignedData.SignerInfo, _ certificates: [[UInt8]]) -> [UInt8] {
        var key: [UInt8] = []
        for part in [signer.issuer, signer.serialNumber] + certificates {
            withUnsafeBytes(of: UInt32(part.count).bigEndian) { key += $0 }
            key += part
        }
        return key
    }

    /// Finds the signer among the embedded certificates and validates its chain at `time`: to Xcode's StoreKit
    /// certificate alone, or to a trusted root under Apple's chain policy.
    private func verifySigner(_ signer: PKCS7SignedData.SignerInfo, _ ders: [[UInt8]], at time: Date) async throws -> VerifiedSigner {
        let certificates = try ders.map { der in
            do { return try Certificate(derEncoded: der) } catch {
                throw AppStoreError(.malformed, "an embedded certificate is not X.509")
            }
        }
        guard let signerIndex = try Self.signerIndex(signer, in: certificates) else {
            throw AppStoreError(.invalidChainLength, "the receipt does not embed its signer's certificate")
        }
        let signerCertificate = certificates[signerIndex]
        guard let key = _RSA.Signing.PublicKey(signerCertificate.publicKey) else {
            throw AppStoreError(.unsupportedAlgorithm, "the receipt signer's key is not an RSA key of 2048 bits or more")
        }
        if let xcode = configuration.roots.anchors.first(where: { $0.kind == .xcodeStoreKit && $0.certificate == signerCertificate }) {
            guard certificates.count == 1 else {
                throw AppStoreError(.invalidChainLength, "an Xcode receipt embeds only the StoreKit Testing certificate; this one embeds \(certificates.count)")
            }
            let validity = ValidityWindow([signerCertificate])
            try validity.check(time)
            return VerifiedSigner(key: key, anchor: xcode, validity: validity)
        }
        var intermediates = certificates
        intermediates.remove(at: signerIndex)
        let chain = try await chains.validate(leaf: signerCertificate, intermediates: intermediates, embedded: certificates, at: time)
        return VerifiedSigner(key: key, anchor: chain.anchor, validity: chain.validity)
    }

    /// The embedded certificate named by the signer's issuer and serial number.
    static func signerIndex(_ signer: PKCS7SignedData.SignerInfo, in certificates: [Certificate]) throws -> Int? {
        let issuer: DistinguishedName
        do { issuer = try DistinguishedName(derEncoded: DER.parse(signer.issuer)) } catch {
            throw AppStoreError(.malformed, "the signer's issuer is not a distinguished name")
        }
        return certificates.firstIndex { certificate in
            certificate.issuer == issuer && Self.sameSerial(Array(certificate.serialNumber.bytes), signer.serialNumber)
        }
    }

    /// Compares INTEGER contents, ignoring the leading zero DER adds to keep a positive number positive.
    private static func sameSerial(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.drop { $0 == 0 }.elementsEqual(b.drop { $0 == 0 })
    }

    static func checkSignature(_ signer: PKCS7SignedData.SignerInfo, content: [UInt8], key publicKey: _RSA.Signing.PublicKey) throws {
        guard signer.signatureAlgorithm == rsaEncryption || signer.signatureAlgorithm == sha1WithRSA || signer.signatureAlgorithm == sha256WithRSA else {
            throw AppStoreError(.unsupportedAlgorithm, "receipt signature algorithm \(signer.signatureAlgorithm) is not RSA PKCS#1 v1.5")
        }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signer.signature)
        let signed = signer.signedAttributes ?? content
        let valid: Bool
        switch signer.digestAlgorithm {
        case sha1:
            if let expected = signer.messageDigest, !Insecure.SHA1.hash(data: content).elementsEqual(expected) { valid = false; break }
            valid = publicKey.isValidSignature(signature, for: Insecure.SHA1.hash(data: signed), padding: .insecurePKCS1v1_5)
        case sha256:
            if let expected = signer.messageDigest, !SHA256.hash(data: content).elementsEqual(expected) { valid = false; break }
            valid = publicKey.isValidSignature(signature, for: SHA256.hash(data: signed), padding: .insecurePKCS1v1_5)
        default:
            throw AppStoreError(.unsupportedAlgorithm, "receipt digest \(signer.digestAlgorithm) is neither SHA-1 nor SHA-256")
        }
        guard valid else { throw AppStoreError(.badSignature, "the receipt's RSA signature does not match its payload") }
    }

    private func check(_ receipt: AppReceipt, environment: AppStoreEnvironment?, anchor: TrustAnchor, deviceIdentifier: [UInt8]?) throws {
        guard let environment else { throw AppStoreError(.wrongEnvironment, "the receipt states no receipt type") }
        guard configuration.environments.contains(environment) else {
            let code: AppStoreError.Code = environment.isTestEnvironment ? .testEnvironmentNotAllowed : .wrongEnvironment
            throw AppStoreError(code, "receipt environment is \(environment); accepted: \(configuration.environments.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        // A receipt whose type claims Xcode must come from the StoreKit certificate, and only from it.
        if (environment == .xcode) != (anchor.kind == .xcodeStoreKit) {
            throw AppStoreError(.wrongEnvironment, "receipt type \(environment) does not match its signer (\(anchor.kind.rawValue))")
        }
        if let expected = configuration.bundleId, receipt.bundleId != expected {
            throw AppStoreError(.wrongBundle, "receipt bundle id is \(receipt.bundleId); expected \(expected)")
        }
        if let expected = configuration.applicationVersion, receipt.applicationVersion != expected {
            throw AppStoreError(.wrongAppVersion, "receipt app version is \(receipt.applicationVersion); expected \(expected)")
        }
        if let deviceIdentifier, !Self.deviceHash(receipt, deviceIdentifier: deviceIdentifier).elementsEqual(receipt.sha1Hash) {
            throw AppStoreError(.wrongDeviceHash, "the receipt was not issued to this device")
        }
    }

    /// SHA-1(device identifier ‖ opaque value ‖ bundle id attribute bytes): attribute 5 of a receipt for that device.
    public static func deviceHash(_ receipt: AppReceipt, deviceIdentifier: [UInt8]) -> [UInt8] {
        var hasher = Insecure.SHA1()
        hasher.update(data: deviceIdentifier)
        hasher.update(data: receipt.opaqueValue)
        hasher.update(data: receipt.bundleIdData)
        return Array(hasher.finalize())
    }
}

/// A receipt that passed verification.
public struct VerifiedReceipt: Sendable {
    public let receipt: AppReceipt
    /// The trusted root the signature chains to.
    public let anchor: TrustAnchor
    public let environment: AppStoreEnvironment?
    /// The time the chain was checked at.
    public let validatedAt: Date
    /// `SHA-1` or `SHA-256`.
    public let digestAlgorithm: String
}

extension UUID {
    /// The 16 bytes of this UUID, as the receipt device hash uses them.
    public var deviceIdentifierBytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }
}
