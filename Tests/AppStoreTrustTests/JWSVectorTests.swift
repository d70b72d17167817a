import AppStoreFormats
import AppStoreTrust
import Foundation
import Testing

@Suite("Real App Store JWS from ../shared/vectors")
struct JWSVectorTests {
    let verifier: SignedDataVerifier

    init() throws { verifier = SignedDataVerifier(.init(roots: try Vectors.appleJWSRoot)) }

    @Test("The mingos consumable transaction verifies with every asserted field")
    func mingosTransaction() async throws {
        let verified = try await verifier.verifyTransaction(Vectors.text("jws-real/mingos_signedTransaction_2000000847061981.jws"))
        let t = verified.payload
        #expect(verified.anchor.kind == .apple)
        #expect(verified.anchor.sha256Fingerprint == "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179")
        #expect(t.transactionId == "2000000847061981")
        #expect(t.originalTransactionId == "2000000847061981")
        #expect(t.bundleId == "com.goodheartapp")
        #expect(t.productId == "gh_super_good_ticket_1")
        #expect(t.purchaseDate == Date(timeIntervalSince1970: 1_738_645_560))
        #expect(t.quantity == 1)
        #expect(t.type == .consumable)
        #expect(t.inAppOwnershipType == .purchased)
        #expect(t.signedDate == Date(timeIntervalSince1970: 1_739_161_772.561))
        #expect(t.environment == .sandbox)
        #expect(t.transactionReason == .purchase)
        #expect(t.storefront == "JPN")
        #expect(t.storefrontId == "143462")
        #expect(t.price == 230_000)
        #expect(t.currency == "JPY")
        #expect(verified.validatedAt == t.signedDate)
    }

    @Test("The go-iap renewal info verifies")
    func goIAPRenewalInfo() async throws {
        let verified = try await verifier.verifyRenewalInfo(Vectors.text("jws-real/go-iap_signedRenewalInfo_2000000335310644.jws"))
        #expect(verified.payload.originalTransactionId == "2000000335310644")
        #expect(verified.payload.productId == "co.ringalarm.swtich.quarterly2")
        #expect(verified.payload.autoRenewProductId == "co.ringalarm.swtich.quarterly2")
        #expect(verified.payload.autoRenewStatus == .on)
        #expect(verified.payload.signedDate == Date(timeIntervalSince1970: 1_684_822_778.492))
    }

    @Test("Real JWS are rejected under the wrong root", arguments: Vectors.realJWS)
    func wrongRoot(name: String) async throws {
        let wrong = SignedDataVerifier(.init(roots: try Vectors.appleReceiptRoot))
        let error = await appStoreError {
            _ = try await wrong.verify(Vectors.data(name), as: JWSRenewalInfoDecodedPayload.self) { ($0.signedDate, $0.environment, nil, nil) }
        }
        #expect(error?.code == .untrustedChain)
    }

    @Test("Real JWS checked now, after their leaf expired, are refused", arguments: Vectors.realJWS)
    func checkedNow(name: String) async throws {
        let now = SignedDataVerifier(.init(roots: try Vectors.appleJWSRoot, validationTime: .now))
        let error = await appStoreError {
            _ = try await now.verify(Vectors.data(name), as: JWSRenewalInfoDecodedPayload.self) { ($0.signedDate, $0.environment, nil, nil) }
        }
        #expect(error?.code == .expiredAtSigningTime)
    }

    @Test("A flipped bit in the payload, the signature or any x5c certificate is rejected", arguments: Vectors.realJWS)
    func tampered(name: String) async throws {
        let original = try Vectors.text(name)
        let parts = original.split(separator: ".").map(String.init)
        let header = try CompactJWS(original).header()
        var copies: [(String, String)] = []
        copies.append(("payload", [parts[0], Self.flip(parts[1]), parts[2]].joined(separator: ".")))
        copies.append(("signature", [parts[0], parts[1], Self.flip(parts[2])].joined(separator: ".")))
        for index in 0..<3 {
            var der = try #require(Base64.decode(header.x5c![index].utf8))
            der[der.count / 2] ^= 0x01
            var changed = header
            changed.x5c![index] = Base64.standardEncode(der)
            let newHeader = Base64.urlEncode(try AppStoreJSON.encoder().encode(changed))
            copies.append(("x5c[\(index)]", [newHeader, parts[1], parts[2]].joined(separator: ".")))
        }
        for (label, copy) in copies {
            // A fresh verifier each time, so no cached chain can help or hide anything.
            let verifier = SignedDataVerifier(.init(roots: try Vectors.appleJWSRoot))
            let error = await appStoreError {
                _ = try await verifier.verify(Array(copy.utf8), as: JWSTransactionDecodedPayload.self) { ($0.signedDate, $0.environment, nil, nil) }
            }
            #expect(error != nil, "\(label) tampering was accepted")
            #expect(error?.code != .tooLarge, "\(label)")
        }
    }

    /// Flips one bit of the bytes a base64url segment encodes.
    static func flip(_ segment: String) -> String {
        var bytes = Base64.decode(segment.utf8)!
        bytes[bytes.count / 2] ^= 0x01
        return Base64.urlEncode(bytes)
    }

    @Test("Xcode-signed JWS are refused unless Xcode is accepted, then marked as self-signed")
    func xcode() async throws {
        let jws = try Vectors.text("apple-asl-swift-xcode/xcode-signed-transaction")
        #expect(await appStoreError { _ = try await verifier.verifyTransaction(jws) }?.code == .testEnvironmentNotAllowed)

        let xcode = SignedDataVerifier(.init(roots: TrustRoots(), bundleId: "com.example.naturelab.backyardbirds.example", environments: [.xcode]))
        let verified = try await xcode.verifyTransaction(jws)
        #expect(verified.anchor.kind == .xcodeSelfSigned)
        let t = verified.payload
        #expect(t.transactionId == "0")
        #expect(t.originalTransactionId == "0")
        #expect(t.webOrderLineItemId == "0")
        #expect(t.productId == "pass.premium")
        #expect(t.subscriptionGroupIdentifier == "6F3A93AB")
        #expect(abs(t.purchaseDate!.timeIntervalSince1970 - 1_697_679_936.049) < 0.001)
        #expect(abs(t.expiresDate!.timeIntervalSince1970 - 1_700_358_336.049) < 0.001)
        #expect(t.type == .autoRenewableSubscription)
        #expect(t.offerType == .introductoryOffer)
        #expect(t.storefront == "USA")
        #expect(t.storefrontId == "143441")
        #expect(t.environment == .xcode)
        #expect(t.transactionReason == .purchase)
        #expect(t.appAccountToken == nil)
        #expect(t.isUpgraded == false)

        let renewal = try await xcode.verifyRenewalInfo(Vectors.text("apple-asl-swift-xcode/xcode-signed-renewal-info")).payload
        #expect(renewal.autoRenewStatus == .on)
        #expect(renewal.autoRenewProductId == "pass.premium")
        #expect(abs(renewal.renewalDate!.timeIntervalSince1970 - 1_700_358_336.049) < 0.001)

        let app = try await xcode.verifyAppTransaction(Vectors.text("apple-asl-swift-xcode/xcode-signed-app-transaction")).payload
        #expect(app.bundleId == "com.example.naturelab.backyardbirds.example")
        #expect(app.applicationVersion == "1")
        #expect(app.originalPurchaseDate == Date(timeIntervalSince1970: -62_135_769_600))
        #expect(app.deviceVerificationNonce == UUID(uuidString: "48c8b92d-ce0d-4229-bedf-e61b4f9cfc92"))
        #expect(app.receiptType == .xcode)
    }

    @Test("Even with Xcode allowed, a tampered Xcode JWS fails its signature")
    func xcodeTampered() async throws {
        let parts = try Vectors.text("apple-asl-swift-xcode/xcode-signed-transaction").split(separator: ".").map(String.init)
        let xcode = SignedDataVerifier(.init(roots: TrustRoots(), environments: [.xcode]))
        let tampered = [parts[0], Self.flip(parts[1]), parts[2]].joined(separator: ".")
        let error = await appStoreError { _ = try await xcode.verifyTransaction(tampered) }
        #expect(error?.code == .badSignature || error?.code == .malformed)
        let resigned = [parts[0], parts[1], Self.flip(parts[2])].joined(separator: ".")
        #expect(await appStoreError { _ = try await xcode.verifyTransaction(resigned) }?.code == .badSignature)
    }
}
