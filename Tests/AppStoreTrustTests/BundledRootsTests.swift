import AppStoreFormats
@testable import AppStoreTrust
import Foundation
import Testing

@Suite("Apple's roots, shipped with IAPKit and trusted when no root is named")
struct BundledRootsTests {
    @Test("The bundled roots load as Apple's, each with its pinned fingerprint")
    func bundledRootsMatchFingerprints() throws {
        let roots = try TrustRoots.apple()
        #expect(roots.anchors.map(\.kind) == [.apple, .apple])
        #expect(Set(roots.anchors.map(\.sha256Fingerprint)) == Set(TrustRoots.appleRootFingerprints.keys))
        #expect(roots.trustsApple)
        #expect(roots.warnings.isEmpty)
        // Byte for byte the certificates Apple publishes (the vectors hold copies taken from Apple's site).
        let published = try Vectors.roots("AppleRootCA-G3.pem", "AppleIncRootCertificate.cer")
        #expect(roots.anchors.map(\.certificate) == published.anchors.map(\.certificate))
    }

    @Test("A real App Store JWS verifies with no root named")
    func realJWSWithDefaultRoots() async throws {
        let verifier = SignedDataVerifier(.init(roots: try TrustRoots.load([], trustingApple: true)))
        let verified = try await verifier.verifyTransaction(Vectors.text("jws-real/mingos_signedTransaction_2000000847061981.jws"))
        #expect(verified.payload.transactionId == "2000000847061981")
        #expect(verified.anchor.kind == .apple)
        #expect(verified.anchor.sha256Fingerprint == "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179")
    }

    @Test("A real App Store receipt verifies with no root named")
    func realReceiptWithDefaultRoots() async throws {
        let verifier = ReceiptVerifier(.init(roots: try TrustRoots.load([], trustingApple: true)))
        let verified = try await verifier.verify(Vectors.receipt("revenuecat/base64encodedreceiptsample1.txt"))
        #expect(verified.receipt.bundleId == "com.revenuecat.sampleapp")
        #expect(verified.anchor.kind == .apple)
        #expect(verified.anchor.sha256Fingerprint == "B0B1730ECBC7FF4505142C49F1295E6EDA6BCAED7E2C68C5BE91B5A11001F024")
    }

    @Test("Named roots replace Apple's; with Apple's turned off and none named, nothing is trusted")
    func namedRootsReplaceAndOffSwitch() async throws {
        let storeKit = Vectors.directory.appendingPathComponent("certs/StoreKitTestCertificate.cer").path
        #expect(try TrustRoots.load([storeKit], trustingApple: true).anchors.map(\.kind) == [.xcodeStoreKit])
        let off = try TrustRoots.load([], trustingApple: false)
        #expect(off.anchors.isEmpty)
        #expect(off.warnings.contains { $0.contains("no Apple root is trusted") })
        let verifier = SignedDataVerifier(.init(roots: off))
        let error = await appStoreError {
            _ = try await verifier.verifyTransaction(Vectors.text("jws-real/mingos_signedTransaction_2000000847061981.jws"))
        }
        #expect(error?.code == .untrustedChain)
    }

    @Test("A bundled root that is not the root it is pinned as stops the load, never trusted")
    func alteredBundleRefused() throws {
        let g3 = Data(try Vectors.data("certs/AppleRootCA-G3.pem"))
        let inc = Data(try Vectors.data("certs/AppleIncRootCertificate.cer"))
        let storeKit = Data(try Vectors.data("certs/StoreKitTestCertificate.cer"))
        let genuine = ["AppleRootCA-G3.pem": g3, "AppleIncRootCertificate.cer": inc]
        #expect(try TrustRoots.apple { genuine[$0] }.anchors.count == 2)
        // Apple's other root in its place: one of Apple's, but not the one pinned for that file.
        var swapped = genuine
        swapped["AppleIncRootCertificate.cer"] = g3
        // A root of someone else's, and one that names Apple without Apple's fingerprint.
        var foreign = genuine
        foreign["AppleRootCA-G3.pem"] = storeKit
        var impostor = genuine
        impostor["AppleRootCA-G3.pem"] = Data(try TestCA.der(TestCA(.init(rootSubject: "Apple Root CA - G3")).root))
        var missing = genuine
        missing["AppleIncRootCertificate.cer"] = nil
        for files in [swapped, foreign, impostor, missing] {
            #expect(throws: AppStoreError(.invalidTrustRoot, "")) { try TrustRoots.apple { files[$0] } }
        }
    }
}
