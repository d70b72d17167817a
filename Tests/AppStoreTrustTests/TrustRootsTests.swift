import AppStoreFormats
import AppStoreTrust
import Foundation
import Testing

@Suite("Trust roots: Apple recognised by fingerprint, impostors refused, test roots explicit")
struct TrustRootsTests {
    @Test("Apple's roots load as Apple, in DER and PEM")
    func appleRoots() throws {
        let roots = try Vectors.roots("AppleIncRootCertificate.cer", "AppleRootCA-G3.pem")
        #expect(roots.anchors.map(\.kind) == [.apple, .apple])
        #expect(roots.trustsApple)
        #expect(roots.warnings.isEmpty)
    }

    @Test("A deployment trusting no Apple root is told so")
    func noAppleRoot() throws {
        let roots = try TestCA().roots
        #expect(!roots.trustsApple)
        #expect(roots.warnings.contains { $0.contains("no Apple root is trusted") })
        #expect(roots.warnings.contains { $0.contains("non-Apple root") })
        #expect(roots.anchors.first?.kind == .custom)
        #expect(TrustRoots().warnings.count == 1)
    }

    @Test("A certificate calling itself Apple Root CA without Apple's fingerprint is refused")
    func impostor() throws {
        let fake = try TestCA(.init(rootSubject: "Apple Root CA - G3"))
        var roots = TrustRoots()
        #expect(throws: AppStoreError(.invalidTrustRoot, "")) {
            try roots.add(certificateData: TestCA.der(fake.root), source: "fake")
        }
        #expect(roots.anchors.isEmpty)
    }

    @Test("Xcode's StoreKit certificate is recognised as such, never as a chain root")
    func storeKit() throws {
        let roots = try Vectors.storeKitRoot
        #expect(roots.anchors.first?.kind == .xcodeStoreKit)
        #expect(!roots.trustsApple)
    }

    @Test("Garbage and unreadable files are a typed error")
    func garbage() {
        var roots = TrustRoots()
        #expect(throws: AppStoreError(.invalidTrustRoot, "")) { try roots.add(certificateData: [1, 2, 3]) }
        #expect(throws: AppStoreError(.invalidTrustRoot, "")) { try roots.add(certificateData: Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)) }
        #expect(throws: AppStoreError(.invalidTrustRoot, "")) { try roots.add(contentsOf: ["/nonexistent/root.cer"]) }
    }
}
