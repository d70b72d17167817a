import AppStoreTrust

extension ServerConfiguration {
    /// The roots this configuration trusts: ``trustedRoots`` when any is named (they replace Apple's), otherwise
    /// Apple's bundled roots unless ``trustAppleRoots`` is false.
    public func loadTrustRoots() throws -> TrustRoots {
        try TrustRoots.load(trustedRoots, trustingApple: trustAppleRoots)
    }
}
