import _CryptoExtras
import AppStoreFormats
import Benchmark
import Crypto
import Foundation
import StoreSimulator

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 5,
        maxDuration: .seconds(3),
        maxIterations: 100_000
    )

    let authority = try! CertificateAuthority.create()
    let minter = try! Minter(authority: authority)

    var transaction = JWSTransactionDecodedPayload()
    transaction.transactionId = "2000000000000042"
    transaction.originalTransactionId = "2000000000000042"
    transaction.bundleId = "com.example.iapkit"
    transaction.productId = "com.example.iapkit.pro.monthly"
    transaction.purchaseDate = Date()
    transaction.originalPurchaseDate = Date()
    transaction.expiresDate = Date().addingTimeInterval(300)
    transaction.quantity = 1
    transaction.type = .autoRenewableSubscription
    transaction.inAppOwnershipType = .purchased
    transaction.signedDate = Date()
    transaction.environment = .sandbox
    transaction.transactionReason = .purchase
    transaction.storefront = "USA"
    transaction.storefrontId = "143441"
    transaction.price = 4990
    transaction.currency = "USD"
    let signingInput = Array(try! minter.sign(transaction).split(separator: ".").prefix(2).joined(separator: ".").utf8)

    // Baseline: one raw ES256 signature over an input of the same size, key ready.
    Benchmark("Baseline: raw P-256 sign (same-size input)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try authority.jws.leafKey.signature(for: signingInput))
        }
    }
    Benchmark("Mint signed transaction (encode + base64url + ES256)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try minter.sign(transaction))
        }
    }

    for count in [1, 50] {
        var receipt = AppReceipt(receiptType: .productionSandbox, appItemId: 0, bundleId: "com.example.iapkit", applicationVersion: "1",
                                 opaqueValue: Array(repeating: 7, count: 16), sha1Hash: Array(repeating: 0, count: 20), receiptCreationDate: Date(),
                                 originalPurchaseDate: Date(timeIntervalSince1970: 1_375_340_400), originalApplicationVersion: "1.0")
        receipt.inAppPurchases = (0..<count).map { index in
            InAppPurchaseReceipt(productId: "com.example.iapkit.pro.monthly", transactionId: String(2_000_000_000_000_000 + index),
                                 purchaseDate: Date(), originalTransactionId: "2000000000000000", expiresDate: Date().addingTimeInterval(300),
                                 webOrderLineItemId: Int64(2_000_000_000_100_000 + index))
        }
        let payload = receipt.payloadDER()
        Benchmark("Baseline: raw RSA-2048 sign (SHA-256, \(count)-purchase payload)") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try authority.receipts.leafKey.signature(for: SHA256.hash(data: payload), padding: .insecurePKCS1v1_5))
            }
        }
        Benchmark("Mint app receipt (\(count) purchases: ASN.1 + PKCS#7 + RSA-2048)") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try minter.receipt(receipt))
            }
        }
    }
}
