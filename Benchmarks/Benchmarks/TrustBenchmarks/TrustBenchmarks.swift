import _CryptoExtras
import AppStoreFormats
import AppStoreTrust
import Benchmark
import Crypto
import Foundation
import X509

/// `../shared/vectors`, read in place.
let vectors = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/vectors")

func vector(_ name: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: vectors.appendingPathComponent(name).path) else {
        fatalError("missing test vector \(name): the benchmarks need ../shared/vectors beside the repository")
    }
    return Array(data)
}

func receiptDER(_ name: String) -> [UInt8] {
    let raw = vector(name)
    return raw.first == 0x30 ? raw : Array(Data(base64Encoded: Data(raw), options: .ignoreUnknownCharacters)!)
}

func roots(_ name: String) -> TrustRoots {
    var roots = TrustRoots()
    try! roots.add(certificateData: vector("certs/\(name)"))
    return roots
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 10,
        maxDuration: .seconds(3),
        maxIterations: 100_000
    )

    // MARK: JWS — a real App Store signed transaction (Sandbox, Apple Root CA - G3 chain)

    let jwsText = String(decoding: vector("jws-real/mingos_signedTransaction_2000000847061981.jws"), as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    let jwsBytes = Array(jwsText.utf8)
    let g3 = roots("AppleRootCA-G3.pem")

    // Baseline: one raw P-256 verify of the very same signature (SHA-256 of the signing input, then ECDSA),
    // with the key and signature already decoded.
    let compact = try! CompactJWS(jwsBytes)
    let leafDER = Base64.decode(try! compact.header().x5c![0].utf8)!
    let leafKey = P256.Signing.PublicKey(try! Certificate(derEncoded: leafDER).publicKey)!
    let rawSignature = try! P256.Signing.ECDSASignature(rawRepresentation: compact.signature())
    let signingInput = Array(compact.signingInput)
    Benchmark("Baseline: raw P-256 verify (same JWS signature)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(leafKey.isValidSignature(rawSignature, for: SHA256.hash(data: signingInput)))
        }
    }

    let warm = SignedDataVerifier(.init(roots: g3))
    Benchmark("JWS verify+decode, warm (chain cached)", configuration: .init(setup: {
        _ = try await warm.verifyTransaction(jwsText)
    })) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try await warm.verify(jwsBytes, as: JWSTransactionDecodedPayload.self) {
                ($0.signedDate, $0.environment, $0.bundleId, nil)
            })
        }
    }

    Benchmark("JWS verify+decode, cold (new verifier: chain built each time)") { benchmark in
        for _ in benchmark.scaledIterations {
            let cold = SignedDataVerifier(.init(roots: g3))
            blackHole(try await cold.verifyTransaction(jwsText))
        }
    }

    Benchmark("JWS decode only, unverified (split + base64url + JSON)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try CompactJWS(jwsBytes).unverifiedPayload(as: JWSTransactionDecodedPayload.self))
        }
    }

    // MARK: Receipts — real App Store receipts (Apple Root CA chain)

    let appleRoot = roots("AppleIncRootCertificate.cer")
    for (label, name) in [("SHA-256, 2 purchases", "tpinappreceipt/receipt-sandbox-g5.b64"),
                          ("SHA-1, 187 purchases", "tpinappreceipt/receipt-sandbox-legacy.b64")] {
        let der = receiptDER(name)
        let container = try! PKCS7SignedData(berEncoded: der)
        let signer = container.signerInfos[0]
        let certificates = container.certificates.map { try! Certificate(derEncoded: $0) }
        let signerCertificate = certificates.first { $0.serialNumber.bytes.elementsEqual(signer.serialNumber.drop { $0 == 0 }) || Array($0.serialNumber.bytes) == signer.serialNumber }!
        let rsaKey = _RSA.Signing.PublicKey(signerCertificate.publicKey)!
        let rsaSignature = _RSA.Signing.RSASignature(rawRepresentation: signer.signature)
        let payload = container.content
        let sha1 = signer.digestAlgorithm == [1, 3, 14, 3, 2, 26]

        Benchmark("Baseline: raw RSA-2048 verify (same receipt signature, \(label))") { benchmark in
            for _ in benchmark.scaledIterations {
                if sha1 {
                    blackHole(rsaKey.isValidSignature(rsaSignature, for: Insecure.SHA1.hash(data: payload), padding: .insecurePKCS1v1_5))
                } else {
                    blackHole(rsaKey.isValidSignature(rsaSignature, for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5))
                }
            }
        }

        let verifier = ReceiptVerifier(.init(roots: appleRoot))
        Benchmark("Receipt verify+decode (\(label))") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try await verifier.verify(der))
            }
        }

        Benchmark("Receipt decode only, unverified (\(label))") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try AppReceipt(payload: PKCS7SignedData(berEncoded: der).content))
            }
        }
    }
}
