import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import Testing

@Suite("iap trusts Apple's bundled roots when no root is named", .timeLimit(.minutes(3)))
struct IAPAppleRootsTests {
    let transaction = "\(IAPCommandTests.vectors)/jws-real/mingos_signedTransaction_2000000847061981.jws"

    @Test("jws verify of a real App Store transaction with no root named is valid; --no-apple-roots refuses it")
    func jwsWithDefaultRoots() async throws {
        let run = try await IAPCommandTests.iap(["jws", "verify", transaction, "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("chained to apple root"))
        #expect(!run.stderr.contains("warning:"))
        let payload = try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(run.stdout.utf8))
        #expect(payload.transactionId == "2000000847061981")

        let off = try await IAPCommandTests.iap(["jws", "verify", transaction, "--no-apple-roots"])
        #expect(off.status == 1)
        #expect(off.stderr.contains("warning: no Apple root is trusted"))
        #expect(off.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.map { $0.split(separator: ":")[1] } == [" untrusted_chain"])
        #expect(off.stdout.isEmpty)
    }

    @Test("receipt verify of a real App Store receipt with no root named is valid; a named root replaces Apple's")
    func receiptWithDefaultRoots() async throws {
        let receipt = "\(IAPCommandTests.vectors)/kvitto/sandboxReceipt.der"
        let run = try await IAPCommandTests.iap(["receipt", "verify", receipt])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("chained to apple root"))
        let g3Only = try await IAPCommandTests.iap(["receipt", "verify", receipt, "--root", "\(IAPCommandTests.vectors)/certs/AppleRootCA-G3.pem"])
        #expect(g3Only.status == 1)
        #expect(g3Only.stderr.contains("error: untrusted_chain:"))
    }

    @Test("iap serve announces Apple's bundled roots with no root named, and warns with --no-apple-roots")
    func serveDefaults() async throws {
        for (flags, expected, absent) in [([String](), "trust roots: Apple's, bundled", "no Apple root is trusted"),
                                          (["--no-apple-roots"], "warning: no Apple root is trusted", "trust roots: Apple's")] {
            let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-roots-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: data) }
            let log = data.appendingPathComponent("stderr.log")
            let port = try FreePort.pick()
            let process = try Subprocess.start(try IAPSimulatorProcessTests.binary().path, ["serve", "--port", String(port), "--data", data.path] + flags,
                                               stderrFile: log)
            for _ in 0..<300 {
                if (try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/health")!)) != nil { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            try await IAPServeProcessTests.stop(process)
            let text = try String(contentsOf: log, encoding: .utf8)
            #expect(text.contains(expected), "\(text)")
            #expect(!text.contains(absent), "\(text)")
        }
    }
}

@Suite("iap without its resources", .timeLimit(.minutes(3)))
struct IAPWithoutResourcesTests {
    @Test("iap installed without its resources directory: a typed error, not a crash, and named roots still verify")
    func missingResources() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-lone-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let lone = directory.appendingPathComponent("iap")
        let built = try IAPSimulatorProcessTests.binary()
        // A hard link where it can be (the debug binary is large); the program sees the directory it was started from.
        do { try FileManager.default.linkItem(at: built, to: lone) } catch { try FileManager.default.copyItem(at: built, to: lone) }
        let transaction = "\(IAPCommandTests.vectors)/jws-real/mingos_signedTransaction_2000000847061981.jws"
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "IAP_TRUST_ROOTS")
        let refused = try await Subprocess.run(lone.path, ["jws", "verify", transaction], environment: environment)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("error: invalid_trust_root:"), "\(refused.stderr)")
        #expect(refused.stderr.contains("IAPKit_AppStoreTrust.resources"))
        let named = try await Subprocess.run(lone.path, ["jws", "verify", transaction, "--root", "\(IAPCommandTests.vectors)/certs/AppleRootCA-G3.pem"],
                                             environment: environment)
        #expect(named.status == 0, "\(named.stderr)")
    }
}
