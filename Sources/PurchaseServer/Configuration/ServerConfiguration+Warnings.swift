import AppStoreTrust

extension ServerConfiguration {
    /// What an operator should be told at start about this configuration served with `roots`, beside what the roots
    /// alone say (`TrustRoots.warnings`).
    public func warnings(trusting roots: TrustRoots) -> [String] {
        var warnings: [String] = []
        // Sandbox purchases cost nothing: TestFlight testers buy for free. A server that takes Apple's production
        // purchases takes them too by default, so what testers "bought" counts as paid unless the operator says not.
        // Refusing them is no plain fix: App Review buys in Sandbox against the production server (Apple's guidance is to
        // accept a Sandbox receipt there), and an app whose purchases fail in review is rejected.
        if roots.trustsApple, acceptedEnvironments.contains(.production), acceptedEnvironments.contains(.sandbox) {
            warnings.append("accepting Sandbox purchases in production: App Review and TestFlight testers buy for free and are granted as if paid "
                                + "(each grant and webhook says environment Sandbox). Keep Sandbox while the app is in review; "
                                + "environments: [\"Production\"] (IAPKIT_ENVIRONMENTS=Production) refuses them, and App Review's purchases with them")
        }
        return warnings
    }
}
