import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPTestSupport
import StoreSimulator
import Testing

/// Runs the built `iap` binary as a newcomer would, and checks exit codes and output.
@Suite("The iap command line", .timeLimit(.minutes(3)))
struct IAPCommandTests {
    /// `IAPKIT_SHARED` overrides; otherwise `../shared` beside the repository.
    static let vectors = ProcessInfo.processInfo.environment["IAPKIT_SHARED"].map { "\($0)/vectors" }
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/vectors").path

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func iap(_ arguments: [String], stdin: Data? = nil) async throws -> Run {
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "IAP_TRUST_ROOTS")
        let result = try await Subprocess.run(try IAPSimulatorProcessTests.binary().path, arguments, stdin: stdin, environment: environment)
        return Run(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    let appleRoot = "\(vectors)/certs/AppleIncRootCertificate.cer"
    let g3 = "\(vectors)/certs/AppleRootCA-G3.pem"

    @Test("receipt verify --json prints verifyReceipt's receipt object and exits 0")
    func receiptJSON() async throws {
        let run = try await Self.iap(["receipt", "verify", "\(Self.vectors)/revenuecat/base64encodedreceiptsample1.txt", "--root", appleRoot, "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let receipt = try AppStoreJSON.decoder().decode(LegacyReceipt.self, from: Data(run.stdout.utf8))
        #expect(receipt.bundleId == "com.revenuecat.sampleapp")
        #expect(receipt.inApp.count == 9)
        #expect(receipt.inApp.first?.transactionId == "1000000692879214")
        #expect(run.stderr.contains("verified: SHA-1 signature, chained to apple root"))
    }

    @Test("receipt verify reads DER from stdin and checks the device id")
    func receiptStdinAndDevice() async throws {
        let der = try Data(contentsOf: URL(fileURLWithPath: "\(Self.vectors)/tpinappreceipt/receipt-sandbox-g5.b64"))
        let good = try await Self.iap(["receipt", "verify", "-", "--root", appleRoot, "--device-id", "956328D9-CC6A-47F4-BE40-6953FB0AB6C7"], stdin: der)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("dev.bonzer.weeka.app"))
        let bad = try await Self.iap(["receipt", "verify", "-", "--root", appleRoot, "--device-id", "00000000-0000-0000-0000-000000000000"], stdin: der)
        #expect(bad.status == 1)
        #expect(bad.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }.map { $0.split(separator: ":")[1] } == [" wrong_device_hash"])
    }

    @Test("A receipt under no or the wrong root: one typed error line, exit 1")
    func receiptRefused() async throws {
        let run = try await Self.iap(["receipt", "verify", "\(Self.vectors)/kvitto/receipt.der", "--root", g3])
        #expect(run.status == 1)
        let errors = run.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("error: untrusted_chain:") == true)
        #expect(run.stdout.isEmpty)
        let none = try await Self.iap(["receipt", "verify", "\(Self.vectors)/kvitto/receipt.der", "--no-apple-roots"])
        #expect(none.status == 1)
        #expect(none.stderr.contains("warning: no Apple root is trusted"))
    }

    @Test("--at now refuses a receipt whose chain expired after it was made")
    func atNow() async throws {
        let run = try await Self.iap(["receipt", "verify", "\(Self.vectors)/kvitto/receipt.der", "--root", appleRoot, "--at", "now"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("error: expired_at_signing_time:"))
    }

    @Test("jws verify prints Apple's field names; a notification body is unwrapped")
    func jws() async throws {
        let path = "\(Self.vectors)/jws-real/mingos_signedTransaction_2000000847061981.jws"
        let run = try await Self.iap(["jws", "verify", path, "--root", g3, "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let payload = try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(run.stdout.utf8))
        #expect(payload.transactionId == "2000000847061981")
        #expect(payload.price == 230_000)
        let wrongBundle = try await Self.iap(["jws", "verify", path, "--root", g3, "--bundle-id", "com.example.other"])
        #expect(wrongBundle.status == 1)
        #expect(wrongBundle.stderr.contains("error: wrong_bundle:"))
    }

    @Test("Xcode JWS need --allow-xcode; --no-verify decodes loudly and exits 3")
    func xcodeAndNoVerify() async throws {
        let path = "\(Self.vectors)/apple-asl-swift-xcode/xcode-signed-renewal-info"
        let refused = try await Self.iap(["jws", "verify", path])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("error: test_environment_not_allowed:"))
        let allowed = try await Self.iap(["jws", "verify", path, "--allow-xcode"])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(allowed.stderr.contains("not signed by Apple"))
        let decoded = try await Self.iap(["jws", "verify", path, "--no-verify"])
        #expect(decoded.status == 3)
        #expect(decoded.stderr.contains("NOT VERIFIED"))
        #expect(decoded.stdout.contains("\"autoRenewProductId\" : \"pass.premium\""))
    }

    @Test("Garbage input is a typed malformed error")
    func garbage() async throws {
        let run = try await Self.iap(["jws", "verify", "-"], stdin: Data("not a jws at all".utf8))
        #expect(run.status == 1)
        #expect(run.stderr.hasPrefix("error: malformed:"))
        let receipt = try await Self.iap(["receipt", "verify", "-", "--root", appleRoot], stdin: Data("%%%".utf8))
        #expect(receipt.status == 1)
        #expect(receipt.stderr.contains("error: malformed:"))
    }

    @Test("A file that does not exist is named as such, not as malformed bytes: one line, exit 1")
    func missingFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-no-such-\(UUID().uuidString).der").path
        for command in [["receipt", "verify", path, "--root", appleRoot], ["jws", "verify", path]] {
            let run = try await Self.iap(command)
            #expect(run.status == 1)
            #expect(run.stderr == "error: cannot open \(path): No such file or directory\n", "\(command[0]): \(run.stderr)")
        }
    }
}

@Suite("iap simulator as a process", .timeLimit(.minutes(3)))
struct IAPSimulatorProcessTests {
    static func binary() throws -> URL {
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [products.appendingPathComponent("iap"), products.deletingLastPathComponent().appendingPathComponent("iap")]
        where FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        throw CocoaError(.fileNoSuchFile)
    }

    /// Starts `iap simulator` on a free-ish port and waits until it answers.
    static func start(data: URL) async throws -> (Process, Int) {
        let port = try FreePort.pick()
        let process = try Subprocess.start(try binary().path, ["simulator", "--port", String(port), "--data", data.path])
        for _ in 0..<100 {
            if (try? Data(contentsOf: URL(string: "http://127.0.0.1:\(port)/sim/root.cer")!)) != nil { return (process, port) }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.terminate()
        throw CocoaError(.fileReadUnknown)
    }

    static func post<T: Decodable>(_ port: Int, _ path: String, _ body: String, as type: T.Type) async throws -> T {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        let (data, _) = try await URLSession.shared.data(for: request)
        return try data.decoded(as: T.self)
    }

    @Test("iap simulator sells the demo catalog, its JWS verify with iap under its root, and a restart keeps state")
    func simulatorProcess() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-simproc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        var (process, port) = try await Self.start(data: data)
        struct Created: Decodable { var id: String }
        _ = try await Self.post(port, "/sim/accounts", #"{"id":"zoe"}"#, as: Created.self)
        let bought = try await Self.post(port, "/sim/purchases", #"{"account":"zoe","device":"p","productId":"com.example.iapkit.premium"}"#,
                                         as: SimulatedPurchaseAnswer.self)
        #expect(bought.status == "purchased")
        let jwsFile = data.appendingPathComponent("t.jws")
        try Data(try #require(bought.signedTransaction).utf8).write(to: jwsFile)
        let verified = try await IAPCommandTests.iap(["jws", "verify", jwsFile.path, "--root", data.appendingPathComponent("jws-root.pem").path, "--json"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("com.example.iapkit.premium"))
        process.terminate()
        for _ in 0..<250 where process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!process.isRunning, "iap simulator must exit on SIGTERM")
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }

        (process, port) = try await Self.start(data: data)
        defer { process.terminate() }
        let again = try await Self.post(port, "/sim/purchases", #"{"account":"zoe","device":"p","productId":"com.example.iapkit.coins.100"}"#,
                                        as: SimulatedPurchaseAnswer.self)
        #expect(again.status == "purchased")
        #expect(again.transactionId != bought.transactionId)
        let (queue, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/sim/accounts/zoe/devices/p/unfinished")!)
        let signed = try queue.decoded(as: SimulatedSignedTransactions.self).signedTransactions
        #expect(signed.count == 2, "the first purchase survived the restart")
    }
}
