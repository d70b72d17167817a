import AppStoreFormats
import AppStoreTrust
import Foundation
import PurchaseServer
import Testing

@Suite("The server trusts Apple's bundled roots unless roots are named or they are turned off")
struct ServerAppleRootsTests {
    static let vectors = (ProcessInfo.processInfo.environment["IAPKIT_SHARED"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared").path) + "/vectors"

    static func realTransaction() throws -> String {
        let path = vectors + "/jws-real/mingos_signedTransaction_2000000847061981.jws"
        let data = try #require(FileManager.default.contents(atPath: path), "test vector \(path) is missing")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The services `iap serve` opens for `configuration`, with a throwaway SQLite ledger.
    static func withServices(_ configuration: ServerConfiguration, _ body: (PurchaseServices) async throws -> Void) async throws {
        var configuration = configuration
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-roots-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        configuration.dataDirectory = data.path
        configuration.auth.hs256Secret = String(repeating: "roots-secret-", count: 3)
        let services = try await PurchaseServices.open(configuration)
        do { try await body(services) } catch {
            try await services.ledger.store.close()
            throw error
        }
        try await services.ledger.store.close()
    }

    @Test("With the embedded defaults, the server verifies a real App Store transaction with no root named")
    func defaultsVerifyRealTransaction() async throws {
        let configuration = try ServerConfiguration.load(file: nil, environment: ["IAPKIT_BUNDLE_ID": "com.goodheartapp"])
        #expect(configuration.trustedRoots.isEmpty && configuration.trustAppleRoots)
        #expect(try configuration.loadTrustRoots().trustsApple)
        try await Self.withServices(configuration) { services in
            let transaction = try await services.verifier.transaction(Self.realTransaction())
            #expect(transaction.transactionId == "2000000847061981")
        }
    }

    @Test("trustAppleRoots false (file or IAPKIT_TRUST_APPLE_ROOTS) trusts nothing, and the real transaction is refused")
    func turnedOff() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(#"{"bundleId": "com.goodheartapp", "trustAppleRoots": false}"#.utf8).write(to: file)
        let fromFile = try ServerConfiguration.load(file: file.path, environment: [:])
        #expect(!fromFile.trustAppleRoots)
        #expect(try fromFile.loadTrustRoots().anchors.isEmpty)
        let fromEnvironment = try ServerConfiguration.load(file: nil, environment: ["IAPKIT_TRUST_APPLE_ROOTS": "false"])
        #expect(!fromEnvironment.trustAppleRoots)
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.load(file: nil, environment: ["IAPKIT_TRUST_APPLE_ROOTS": "maybe"]) }
        try await Self.withServices(fromFile) { services in
            do {
                _ = try await services.verifier.transaction(Self.realTransaction())
                Issue.record("a real transaction verified with Apple's roots turned off")
            } catch let error as AppStoreError {
                #expect(error.code == .untrustedChain)
            }
        }
    }

    @Test("Named roots replace Apple's: a server naming only another root trusts no Apple root")
    func namedRootsReplace() throws {
        var configuration = ServerConfiguration()
        configuration.trustedRoots = [Self.vectors + "/certs/StoreKitTestCertificate.cer"]
        let roots = try configuration.loadTrustRoots()
        #expect(roots.anchors.map(\.kind) == [.xcodeStoreKit])
        configuration.trustedRoots.append(Self.vectors + "/certs/AppleRootCA-G3.pem")
        #expect(try configuration.loadTrustRoots().trustsApple)
    }
}
