import AppStoreFormats
import AppStoreTrust
import Foundation
import IAPTestSupport
import Testing

@Suite("Hostile input: garbage, truncations and bit flips never crash, always give a typed error")
struct HostileInputTests {
    /// Runs a verification that must fail with an `AppStoreError` (or, for a harmless mutation, succeed).
    static func survives(_ body: () async throws -> Void) async -> Bool {
        do { try await body(); return true } catch is AppStoreError { return true } catch {
            Issue.record("untyped error: \(error)")
            return false
        }
    }

    @Test("Truncating a real receipt at every length gives a typed error")
    func truncatedReceiptAtEveryLength() async throws {
        let der = try Vectors.receipt("kvitto/receipt.der")
        let verifier = ReceiptVerifier(.init(roots: try Vectors.appleReceiptRoot))
        var accepted = 0
        for length in 0..<der.count {
            do {
                _ = try await verifier.verify(Array(der[..<length]))
                accepted += 1
            } catch is AppStoreError {
            } catch {
                Issue.record("length \(length): untyped error \(error)")
            }
        }
        #expect(accepted == 0)
    }

    @Test("Truncating an Xcode BER receipt at every length gives a typed error")
    func truncatedBERReceipt() async throws {
        let der = try Vectors.receipt("kvitto/storeKitTestReceipt.der")
        let verifier = ReceiptVerifier(.init(roots: try Vectors.storeKitRoot, environments: [.xcode]))
        for length in 0..<der.count {
            let error = await appStoreError { _ = try await verifier.verify(Array(der[..<length])) }
            #expect(error != nil, "length \(length)")
        }
    }

    @Test("Random bit flips and byte overwrites in receipts", arguments: [1, 2, 3])
    func mutatedReceipts(seed: UInt64) async throws {
        var random = SeededGenerator(state: seed)
        let names = ["revenuecat/base64encodedreceiptsample1.txt", "kvitto/storeKitTestReceipt.der", "tpinappreceipt/receipt-sandbox-g5.b64"]
        var roots = try Vectors.roots("AppleIncRootCertificate.cer", "StoreKitTestCertificate.cer")
        try roots.add(certificateData: Vectors.data("certs/AppleRootCA-G3.pem"))
        let verifier = ReceiptVerifier(.init(roots: roots, environments: [.production, .sandbox, .xcode]))
        for name in names {
            let original = try Vectors.receipt(name)
            for _ in 0..<150 {
                var bytes = original
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    if Bool.random(using: &random) { bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &random) } else { bytes[index] = .random(in: 0...255, using: &random) }
                }
                #expect(await Self.survives { _ = try await verifier.verify(bytes) })
                // The parsers alone, on the same bytes.
                #expect(await Self.survives { _ = try AppReceipt(payload: PKCS7SignedData(berEncoded: bytes).content) })
            }
        }
    }

    @Test("Pure garbage and ASN.1-shaped garbage", arguments: [7, 8])
    func garbage(seed: UInt64) async throws {
        var random = SeededGenerator(state: seed)
        let verifier = ReceiptVerifier(.init(roots: try Vectors.appleReceiptRoot))
        for _ in 0..<400 {
            let length = Int.random(in: 0...600, using: &random)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            if Bool.random(using: &random), !bytes.isEmpty {
                // Plausible headers reach deeper code: a SEQUENCE with a long or indefinite length.
                bytes[0] = [0x30, 0x31, 0x24, 0xA0].randomElement(using: &random)!
                if bytes.count > 1 { bytes[1] = [0x80, 0x82, 0x84, 0x7F].randomElement(using: &random)! }
            }
            let error = await appStoreError { _ = try await verifier.verify(bytes) }
            #expect(error != nil)
            #expect(await Self.survives { _ = try AppReceipt(payload: bytes) })
        }
    }

    @Test("Deep nesting is refused, not recursed into")
    func deepNesting() async throws {
        var bytes: [UInt8] = [0x05, 0x00]
        for _ in 0..<500 { bytes = ASN1Writer.tlv(0x30, bytes) }
        #expect(throws: AppStoreError(.malformed, "")) { _ = try PKCS7SignedData(berEncoded: bytes) }
        #expect(throws: AppStoreError(.malformed, "")) { _ = try AppReceipt(payload: bytes) }
    }

    @Test("Random mutations of real and test-CA JWS", arguments: [11, 12])
    func mutatedJWS(seed: UInt64) async throws {
        var random = SeededGenerator(state: seed)
        let ca = try TestCA()
        var roots = try ca.roots
        try roots.add(certificateData: Vectors.data("certs/AppleRootCA-G3.pem"))
        let verifier = SignedDataVerifier(.init(roots: roots))
        let originals = try Vectors.realJWS.map { Array(try Vectors.text($0).utf8) } + [Array(try ca.sign(payload: TestCA.transaction()).utf8)]
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/{}\"".utf8)
        for original in originals {
            for _ in 0..<300 {
                var bytes = original
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes = Array(bytes[..<Int.random(in: 0..<bytes.count, using: &random)])
                case 1: bytes[Int.random(in: 0..<bytes.count, using: &random)] = alphabet.randomElement(using: &random)!
                default: bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= 1 << UInt8.random(in: 0...7, using: &random)
                }
                #expect(await Self.survives {
                    _ = try await verifier.verify(bytes, as: JWSTransactionDecodedPayload.self) { ($0.signedDate, $0.environment, nil, nil) }
                })
            }
        }
    }

    @Test("Oversized receipts are refused before parsing")
    func oversizedReceipt() async throws {
        let verifier = ReceiptVerifier(.init(roots: try Vectors.appleReceiptRoot, limits: InputLimits(maxReceiptBytes: 4_000)))
        let error = await appStoreError { _ = try await verifier.verify(Vectors.receipt("kvitto/receipt.der")) }
        #expect(error?.code == .tooLarge)
        let big = [UInt8](repeating: 0x30, count: InputLimits.default.maxReceiptBytes + 1)
        #expect(throws: AppStoreError(.tooLarge, "")) { _ = try PKCS7SignedData(berEncoded: big) }
    }
}
