import AppStoreFormats
import AppStoreTrust
import Foundation
import Testing

@Suite("Real app receipts from ../shared/vectors")
struct ReceiptVectorTests {
    static let all = Vectors.appStoreReceipts + Vectors.xcodeReceipts

    func verifier(for name: String, roots: TrustRoots? = nil) throws -> ReceiptVerifier {
        let xcode = Vectors.xcodeReceipts.contains(name)
        return ReceiptVerifier(.init(
            roots: try roots ?? (xcode ? Vectors.storeKitRoot : Vectors.appleReceiptRoot),
            environments: xcode ? [.xcode] : [.production, .sandbox]))
    }

    @Test("Every receipt decodes to the values in expected_receipts_decoded.json", arguments: all)
    func decodesAsExpected(name: String) throws {
        let expected = try #require(try Vectors.expectedReceipts()[name] as? [String: Any])
        let der = try Vectors.receipt(name)
        #expect(der.count == expected["der_len"] as? Int)
        let container = try PKCS7SignedData(berEncoded: der)
        #expect(container.content.count == expected["payload_len"] as? Int)
        #expect(container.usesIndefiniteLength == expected["ber_indefinite"] as? Bool)
        let receipt = try AppReceipt(payload: container.content)

        let top = try #require(expected["receipt"] as? [String: Any])
        #expect(receipt.bundleId == top["bundle_id"] as? String)
        #expect(receipt.applicationVersion == top["app_version"] as? String)
        #expect(receipt.originalApplicationVersion == top["original_app_version"] as? String)
        #expect(receipt.receiptType?.rawValue == top["receipt_type"] as? String)
        #expect(receipt.appItemId == (top["app_item_id"] as? Int).map(Int64.init))
        #expect(receipt.ageRating == top["age_rating"] as? String)
        #expect(hex(receipt.opaqueValue) == top["opaque"] as? String)
        #expect(hex(receipt.sha1Hash) == top["sha1_hash"] as? String)
        #expect(receipt.receiptCreationDate == (top["receipt_creation_date"] as? String).flatMap(expectedDate))
        #expect(receipt.expirationDate == (top["expiration_date"] as? String).flatMap(expectedDate))
        // The independent decoder labels attribute 18 "preorder_date"; Apple's verifyReceipt calls the same value
        // original_purchase_date (checked against Apple's own decode in the RevenueCat test below).
        #expect(receipt.originalPurchaseDate == (top["preorder_date"] as? String).flatMap(expectedDate))

        let inApp = expected["in_app"] as? [[String: Any]] ?? []
        #expect(receipt.inAppPurchases.count == expected["in_app_count"] as? Int)
        #expect(receipt.inAppPurchases.count == inApp.count)
        for (record, want) in zip(receipt.inAppPurchases, inApp) {
            #expect(record.transactionId == want["transaction_id"] as? String)
            #expect(record.originalTransactionId == want["original_transaction_id"] as? String)
            #expect(record.productId == want["product_id"] as? String)
            #expect(record.quantity == want["quantity"] as? Int)
            #expect(record.webOrderLineItemId == (want["web_order_line_item_id"] as? Int).map(Int64.init))
            #expect(record.purchaseDate == (want["purchase_date"] as? String).flatMap(expectedDate))
            #expect(record.originalPurchaseDate == (want["original_purchase_date"] as? String).flatMap(expectedDate))
            #expect(record.expiresDate == (want["expires_date"] as? String).flatMap(expectedDate))
            // An empty cancellation date in the receipt means "not cancelled".
            #expect(record.cancellationDate == (want["cancellation_date"] as? String).flatMap(expectedDate))
            if let trial = want["is_trial"] as? Int { #expect(record.isTrialPeriod == (trial != 0)) }
            if let intro = want["is_in_intro_offer_period"] as? Int { #expect(record.isInIntroOfferPeriod == (intro != 0)) }
        }
    }

    @Test("Every receipt verifies under its own root and names it", arguments: all)
    func verifies(name: String) async throws {
        let verified = try await verifier(for: name).verify(Vectors.receipt(name))
        let xcode = Vectors.xcodeReceipts.contains(name)
        #expect(verified.anchor.kind == (xcode ? .xcodeStoreKit : .apple))
        #expect(verified.validatedAt == verified.receipt.receiptCreationDate)
    }

    @Test("Every receipt is rejected under the wrong root", arguments: all)
    func rejectedUnderWrongRoot(name: String) async throws {
        let xcode = Vectors.xcodeReceipts.contains(name)
        // The JWS root (G3) for App Store receipts; Apple's receipt root for Xcode ones.
        let wrong = try xcode ? Vectors.appleReceiptRoot : Vectors.appleJWSRoot
        let error = await appStoreError {
            _ = try await verifier(for: name, roots: wrong).verify(Vectors.receipt(name))
        }
        #expect(error?.code == .untrustedChain)
    }

    @Test("A flipped bit in the payload, the signature or any certificate is rejected", arguments: all)
    func tamperedCopiesRejected(name: String) async throws {
        let der = try Vectors.receipt(name)
        let container = try PKCS7SignedData(berEncoded: der)
        let verifier = try verifier(for: name)
        var regions: [(String, [UInt8])] = [("payload", container.content), ("signature", container.signerInfos[0].signature)]
        regions += container.certificates.enumerated().map { ("certificate \($0.offset)", $0.element) }
        for (label, region) in regions {
            let offset = try #require(Self.find(region, in: der), "\(label) not found in \(name)")
            // Flip a bit in the middle of the region: inside the content for a payload/signature, inside the
            // to-be-signed part or signature for a certificate.
            var tampered = der
            tampered[offset + region.count / 2] ^= 0x01
            do {
                _ = try await verifier.verify(tampered)
                Issue.record("\(name): a flipped bit in the \(label) was accepted")
            } catch let error as AppStoreError {
                #expect([.badSignature, .untrustedChain, .malformed, .invalidChainLength, .missingAppleMarker].contains(error.code), "\(label): \(error)")
            }
        }
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<start + needle.count].elementsEqual(needle) { return start }
        }
        return nil
    }

    @Test("Xcode receipts are refused unless Xcode is accepted explicitly")
    func xcodeNeedsOptIn() async throws {
        let name = "apple-asl-swift-xcode/xcode-app-receipt-with-transaction"
        let verifier = ReceiptVerifier(.init(roots: try Vectors.storeKitRoot))
        let error = await appStoreError { _ = try await verifier.verify(Vectors.receipt(name)) }
        #expect(error?.code == .testEnvironmentNotAllowed)
        let both = try Vectors.roots("AppleIncRootCertificate.cer", "StoreKitTestCertificate.cer")
        let production = ReceiptVerifier(.init(roots: both))
        #expect(await appStoreError { _ = try await production.verify(Vectors.receipt(name)) }?.code == .testEnvironmentNotAllowed)
    }

    @Test("Apple's Xcode receipt with a transaction carries transaction id 0 for pass.premium")
    func appleXcodeReceipt() async throws {
        let verified = try await verifier(for: "apple-asl-swift-xcode/xcode-app-receipt-with-transaction")
            .verify(Vectors.receipt("apple-asl-swift-xcode/xcode-app-receipt-with-transaction"))
        let purchase = try #require(verified.receipt.inAppPurchases.first)
        #expect(purchase.transactionId == "0")
        #expect(purchase.productId == "pass.premium")
        #expect(purchase.isInIntroOfferPeriod == true)
        let empty = try await verifier(for: "apple-asl-swift-xcode/xcode-app-receipt-empty")
            .verify(Vectors.receipt("apple-asl-swift-xcode/xcode-app-receipt-empty"))
        #expect(empty.receipt.inAppPurchases.isEmpty)
    }

    @Test("Bundle id and app version are checked")
    func bundleAndVersion() async throws {
        let name = "kvitto/sandboxReceipt.der"
        let roots = try Vectors.appleReceiptRoot
        let good = ReceiptVerifier(.init(roots: roots, bundleId: "com.cocoanetics.EmmiView", applicationVersion: "246"))
        let verified = try await good.verify(Vectors.receipt(name))
        #expect(verified.receipt.inAppPurchases.first?.transactionId == "1000000156449405")
        #expect(verified.environment == .sandbox)
        let wrongBundle = ReceiptVerifier(.init(roots: roots, bundleId: "com.example.other"))
        #expect(await appStoreError { _ = try await wrongBundle.verify(Vectors.receipt(name)) }?.code == .wrongBundle)
        let wrongVersion = ReceiptVerifier(.init(roots: roots, applicationVersion: "247"))
        #expect(await appStoreError { _ = try await wrongVersion.verify(Vectors.receipt(name)) }?.code == .wrongAppVersion)
        let productionOnly = ReceiptVerifier(.init(roots: roots, environments: [.production]))
        #expect(await appStoreError { _ = try await productionOnly.verify(Vectors.receipt(name)) }?.code == .wrongEnvironment)
    }

    @Test("The device hash matches the vector's device and no other")
    func deviceHash() async throws {
        let name = "tpinappreceipt/receipt-sandbox-g5.b64"
        let verifier = try verifier(for: name)
        let device = try #require(UUID(uuidString: "956328D9-CC6A-47F4-BE40-6953FB0AB6C7"))
        let verified = try await verifier.verify(Vectors.receipt(name), deviceIdentifier: device.deviceIdentifierBytes)
        #expect(hex(ReceiptVerifier.deviceHash(verified.receipt, deviceIdentifier: device.deviceIdentifierBytes)) == "2158847543683847e9382a0fc51853cb17abcd6d")
        let other = try #require(UUID(uuidString: "956328D9-CC6A-47F4-BE40-6953FB0AB6C8"))
        let error = await appStoreError { _ = try await verifier.verify(Vectors.receipt(name), deviceIdentifier: other.deviceIdentifierBytes) }
        #expect(error?.code == .wrongDeviceHash)
    }

    @Test("Checked now instead of at creation, an old receipt's expired chain is refused")
    func validationNow() async throws {
        let name = "revenuecat/base64encodedreceiptsample1.txt"
        let verifier = ReceiptVerifier(.init(roots: try Vectors.appleReceiptRoot, validationTime: .now))
        #expect(await appStoreError { _ = try await verifier.verify(Vectors.receipt(name)) }?.code == .expiredAtSigningTime)
    }

    @Test("Checked at a fixed time after its leaf expired, a receipt is refused on every attempt")
    func fixedTimeAfterExpiry() async throws {
        // The cache-hit path shares ValidityWindow with JWS, whose window-on-hit is tested in JWSNegativeTests.
        let der = try Vectors.receipt("tpinappreceipt/receipt-sandbox-g5.b64")
        let roots = try Vectors.appleReceiptRoot
        let atCreation = ReceiptVerifier(.init(roots: roots))
        _ = try await atCreation.verify(der)
        _ = try await atCreation.verify(der)
        let late = ReceiptVerifier(.init(roots: roots, validationTime: .fixed(Date(timeIntervalSince1970: 2_000_000_000))))
        #expect(await appStoreError { _ = try await late.verify(der) }?.code == .expiredAtSigningTime)
        #expect(await appStoreError { _ = try await late.verify(der) }?.code == .expiredAtSigningTime)
    }

    @Test("The RevenueCat receipt matches Apple's own verifyReceipt decode field by field")
    func matchesApplesDecode() throws {
        let receipt = try AppReceipt(payload: PKCS7SignedData(berEncoded: Vectors.receipt("revenuecat/base64encodedreceiptsample1.txt")).content)
        let ours = try JSONSerialization.jsonObject(with: AppStoreJSON.encoder().encode(LegacyReceipt(receipt))) as! [String: Any]
        let apple = try #require((try JSONSerialization.jsonObject(with: Data(Vectors.data("revenuecat/verifyReceiptSample1.json"))) as? [String: Any])?["receipt"] as? [String: Any])

        var compared = 0
        for (key, value) in apple where key != "in_app" {
            guard let mine = ours[key] else { continue }
            #expect("\(mine)" == "\(value)", "receipt.\(key)")
            compared += 1
        }
        // Everything Apple reports is compared except request_date, which is the time of Apple's answer, not receipt content.
        let missing = Set(apple.keys).subtracting(ours.keys)
        #expect(missing == ["request_date", "request_date_ms", "request_date_pst"])
        #expect(compared == apple.count - 1 - missing.count)

        let appleInApp = try #require(apple["in_app"] as? [[String: Any]])
        let ourInApp = try #require(ours["in_app"] as? [[String: Any]])
        #expect(appleInApp.count == ourInApp.count)
        var comparedInApp = 0
        for want in appleInApp {
            let match = try #require(ourInApp.first { $0["transaction_id"] as? String == want["transaction_id"] as? String })
            for (key, value) in want {
                guard let mine = match[key] else { continue }
                #expect("\(mine)" == "\(value)", "in_app[\(want["transaction_id"] ?? "?")].\(key)")
                comparedInApp += 1
            }
            #expect(Set(want.keys).subtracting(match.keys).isEmpty, "fields Apple reports that IAPKit does not: \(Set(want.keys).subtracting(match.keys))")
        }
        #expect(comparedInApp >= 9 * 14)
    }
}

@Suite("Other receipt shapes")
struct OtherReceiptShapeTests {
    @Test("Apple's mock iOS 6-style transaction receipt yields transaction id 33993399")
    func legacyTransactionReceipt() throws {
        let receipt = try TransactionReceipt(base64: Vectors.data("apple-asl-swift-xcode/legacyTransaction.mock"))
        #expect(receipt.transactionId == "33993399")
        #expect(receipt.fields.keys.sorted() == ["purchase-info"])
    }

    @Test("Malformed transaction receipts are typed errors", arguments: ["", "e30=", "eyJhIiA9ICJiIjt9", "ewoicHVyY2hhc2UtaW5mbyIgPSAiISEhIjsKfQo="])
    func malformedTransactionReceipts(text: String) {
        // "e30=" is "{}" (no purchase-info); the third is JSON-ish; the fourth has purchase-info that is not base64.
        #expect(throws: AppStoreError(.malformed, "")) { _ = try TransactionReceipt(base64: Array(text.utf8)) }
    }

    @Test("Undocumented attributes are kept and readable by type")
    func undocumentedAttributes() throws {
        let receipt = try AppReceipt(payload: PKCS7SignedData(berEncoded: Vectors.receipt("kvitto/receipt.der")).content)
        // Attribute 8 is an undocumented date; 9 an undocumented integer (both present in App Store receipts).
        #expect(receipt.otherAttribute(8)?.dateValue != nil)
        #expect(receipt.otherAttribute(9)?.integerValue != nil)
        #expect(receipt.otherAttribute(2) == nil, "documented attributes are interpreted, not kept raw")
        let record = try #require(try AppReceipt(payload: PKCS7SignedData(berEncoded: Vectors.receipt("kvitto/sandboxReceipt.der")).content).inAppPurchases.first)
        #expect(record.otherAttributes.contains { $0.type == 1710 && $0.integerValue != nil })
    }
}
