import AppStoreFormats
import Foundation

extension TrustRoots {
    /// Apple's two roots as this package ships them (resources of `AppStoreTrust`), by the name each is pinned under
    /// in ``appleRootFingerprints``: the file must be that root, not merely one of Apple's.
    static let bundledAppleRoots: [(resource: String, name: String)] = [
        ("AppleRootCA-G3.pem", "Apple Root CA - G3"),
        ("AppleIncRootCertificate.cer", "Apple Root CA"),
    ]

    /// Apple's roots, shipped with IAPKit: Apple Root CA - G3 (StoreKit 2 JWS and notifications) and Apple Inc. Root
    /// (app receipts). What a verifier trusts when the operator names no root, so that a default deployment can verify
    /// what the real App Store signed.
    ///
    /// Each file is checked against its pinned SHA-256 fingerprint whenever it is loaded: a package whose resources were
    /// changed fails to start rather than trusting whatever they now hold.
    /// - Throws: ``AppStoreError/Code/invalidTrustRoot`` when a bundled root is missing or is not the root it is
    ///   pinned as.
    public static func apple() throws -> TrustRoots {
        let bundle = try resourceBundle()
        return try apple { resource in
            let dot = resource.lastIndex(of: ".")!
            let url = bundle.url(forResource: String(resource[..<dot]), withExtension: String(resource[resource.index(after: dot)...]))
            return url.flatMap { FileManager.default.contents(atPath: $0.path) }
        }
    }

    /// SwiftPM's `Bundle.module` stops the process when its bundle is missing — a binary copied without the
    /// `IAPKit_AppStoreTrust.resources` directory SwiftPM writes beside it. On Linux, where that directory beside the
    /// program is where `Bundle.module` looks first, it is looked for here first, so that a missing one is an error the
    /// operator reads (with what to do) rather than a crash. `Bundle.module`'s second place, the build directory's
    /// absolute path, is deliberately not relied on: a copied binary would work only while its build tree exists, and
    /// then crash on the machine it was deployed to.
    private static func resourceBundle() throws -> Bundle {
        #if os(Linux)
        let directory = Bundle.main.bundleURL.appendingPathComponent("IAPKit_AppStoreTrust.resources")
        guard FileManager.default.fileExists(atPath: directory.path) else {
            throw AppStoreError(.invalidTrustRoot, "Apple's roots ship in \(directory.lastPathComponent), which is not beside this program (\(directory.path)): "
                                + "install it with the binary, name the roots to trust, or turn Apple's roots off")
        }
        #endif
        return Bundle.module
    }

    /// ``apple()`` over files read by `read` (a resource's name to its bytes, nil when missing): the check a tampered
    /// package must fail is tested through it.
    static func apple(reading read: (String) -> Data?) throws -> TrustRoots {
        var roots = TrustRoots()
        for (resource, name) in bundledAppleRoots {
            guard let pinned = appleRootFingerprints.first(where: { $0.value == name })?.key else {
                preconditionFailure("\(name) has no pinned fingerprint")
            }
            guard let data = read(resource) else {
                throw AppStoreError(.invalidTrustRoot, "IAPKit's bundled \(name) (\(resource)) is missing from the AppStoreTrust resources")
            }
            var one = TrustRoots()
            do {
                try one.add(certificateData: Array(data), source: "bundled \(resource)")
            } catch let error as AppStoreError {
                throw AppStoreError(.invalidTrustRoot, "IAPKit's bundled \(name) is not Apple's: \(error.message)")
            }
            let found = one.anchors.map(\.sha256Fingerprint)
            guard found == [pinned] else {
                throw AppStoreError(.invalidTrustRoot, "IAPKit's bundled \(name) (\(resource)) has SHA-256 \(found.joined(separator: ", ")), not the pinned \(pinned): refusing to trust it")
            }
            try roots.add(certificateData: Array(data), source: "bundled \(resource)")
        }
        return roots
    }
}

extension TrustRoots {
    /// The roots an operator's choices amount to. Roots named in `paths` replace Apple's rather than adding to them, so
    /// a deployment that names a simulator's or a test CA's root trusts that alone, as it says; naming Apple's files
    /// too keeps them. With none named, Apple's bundled roots unless `trustingApple` is false (then nothing verifies,
    /// and ``warnings`` says so).
    public static func load(_ paths: [String], trustingApple: Bool) throws -> TrustRoots {
        paths.isEmpty && trustingApple ? try apple() : try load(paths)
    }
}
