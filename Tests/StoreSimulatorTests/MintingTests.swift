import AppStoreFormats
import AppStoreTrust
import Foundation
import StoreSimulator
import IAPTestSupport
import Testing

/// One authority for the suite: RSA key generation is the slow part.
let sharedAuthority: CertificateAuthority = try! CertificateAuthority.create()

func simulatorRoots(_ authority: CertificateAuthority = sharedAuthority) throws -> TrustRoots {
    var roots = TrustRoots()
    try roots.add(certificateData: authority.jws.rootDER, source: "simulator JWS root")
    try roots.add(certificateData: authority.receipts.rootDER, source: "simulator receipt root")
    return roots
}

func sampleTransaction(signedDate: Date = Date()) -> JWSTransactionDecodedPayload {
    var transaction = JWSTransactionDecodedPayload()
    transaction.transactionId = "2000000000000042"
    transaction.originalTransactionId = "2000000000000042"
    transaction.webOrderLineItemId = "2000000000000043"
    transaction.bundleId = "com.example.sim"
    transaction.productId = "com.example.sim.monthly"
    transaction.subscriptionGroupIdentifier = "7096FF06"
    transaction.purchaseDate = signedDate
    transaction.originalPurchaseDate = signedDate
    transaction.expiresDate = signedDate.addingTimeInterval(300)
    transaction.quantity = 1
    transaction.type = .autoRenewableSubscription
    transaction.appAccountToken = UUID(uuidString: "7E3A1F2C-1111-4A5B-9C8D-0123456789AB")
    transaction.inAppOwnershipType = .purchased
    transaction.signedDate = signedDate
    transaction.environment = .sandbox
    transaction.transactionReason = .purchase
    transaction.storefront = "USA"
    transaction.storefrontId = "143441"
    transaction.price = 4990
    transaction.currency = "USD"
    return transaction
}

@Suite("The simulator's authority and what it mints, judged by AppStoreTrust")
struct MintingTests {
    @Test("The authority is created once, saved, and loaded back identical")
    func persistence() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-ca-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let created = try CertificateAuthority.loadOrCreate(in: directory)
        let loaded = try CertificateAuthority.loadOrCreate(in: directory)
        #expect(created.jws.rootDER == loaded.jws.rootDER)
        #expect(created.jws.leafDER == loaded.jws.leafDER)
        #expect(created.receipts.rootDER == loaded.receipts.rootDER)
        #expect(created.jws.leafKey.publicKey.rawRepresentation == loaded.jws.leafKey.publicKey.rawRepresentation)
        let keyAttributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("jws-leaf.key").path)
        #expect((keyAttributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test("A minted transaction verifies under the simulator's root, and only under it")
    func transaction() async throws {
        let minter = try Minter(authority: sharedAuthority)
        let transaction = sampleTransaction()
        let jws = try minter.sign(transaction)
        let verified = try await SignedDataVerifier(.init(roots: try simulatorRoots(), bundleId: "com.example.sim")).verifyTransaction(jws)
        #expect(verified.anchor.kind == .custom)
        #expect(verified.payload.transactionId == transaction.transactionId)
        #expect(verified.payload.appAccountToken == transaction.appAccountToken)
        #expect(verified.payload.price == 4990)
        let otherAuthority = try CertificateAuthority.create()
        let stranger = SignedDataVerifier(.init(roots: try simulatorRoots(otherAuthority)))
        #expect(await { () async -> AppStoreError.Code? in
            do { _ = try await stranger.verifyTransaction(jws); return nil } catch let error as AppStoreError { return error.code } catch { return nil }
        }() == .untrustedChain)
    }

    @Test("A minted receipt verifies, decodes to what was minted, and fails when altered")
    func receipt() async throws {
        let minter = try Minter(authority: sharedAuthority)
        let created = Date(timeIntervalSince1970: floor(Date().timeIntervalSince1970))
        let device = UUID()
        var receipt = AppReceipt(receiptType: .productionSandbox, appItemId: 0, bundleId: "com.example.sim", applicationVersion: "7",
                                 opaqueValue: Array(repeating: 0xAB, count: 16), receiptCreationDate: created,
                                 originalPurchaseDate: Date(timeIntervalSince1970: 1_375_340_400), originalApplicationVersion: "1.0")
        receipt.sha1Hash = ReceiptVerifier.deviceHash(receipt, deviceIdentifier: device.deviceIdentifierBytes)
        receipt.inAppPurchases = [
            InAppPurchaseReceipt(productId: "com.example.sim.coins", transactionId: "2000000000000001", purchaseDate: created,
                                 productTypeCode: InAppPurchaseReceipt.productTypeCode(.consumable)),
            InAppPurchaseReceipt(productId: "com.example.sim.monthly", transactionId: "2000000000000002", purchaseDate: created,
                                 originalTransactionId: "2000000000000002", expiresDate: created.addingTimeInterval(300),
                                 webOrderLineItemId: 2_000_000_000_000_003, isTrialPeriod: true),
        ]
        let der = try minter.receipt(receipt)
        let verifier = ReceiptVerifier(.init(roots: try simulatorRoots(), bundleId: "com.example.sim", applicationVersion: "7"))
        let verified = try await verifier.verify(der, deviceIdentifier: device.deviceIdentifierBytes)
        #expect(verified.anchor.kind == .custom)
        #expect(verified.digestAlgorithm == "SHA-256")
        let decoded = verified.receipt
        #expect(decoded.bundleId == receipt.bundleId)
        #expect(decoded.receiptCreationDate == created)
        #expect(decoded.inAppPurchases.count == 2)
        #expect(decoded.inAppPurchases[0].productType == .consumable)
        #expect(decoded.inAppPurchases[1].expiresDate == created.addingTimeInterval(300))
        #expect(decoded.inAppPurchases[1].isTrialPeriod == true)
        #expect(decoded.inAppPurchases[1].cancellationDate == nil)
        #expect(decoded.inAppPurchases[0].originalTransactionId == "2000000000000001")

        var altered = der
        let payload = receipt.payloadDER()
        let start = try #require((0...(der.count - payload.count)).first { der[$0..<$0 + payload.count].elementsEqual(payload) })
        altered[start + payload.count / 2] ^= 0x01
        do {
            _ = try await verifier.verify(altered)
            Issue.record("an altered minted receipt verified")
        } catch let error as AppStoreError {
            #expect([.badSignature, .malformed].contains(error.code))
        }
    }
}

@Suite("Apple's own Python library accepts what the simulator mints")
struct AppleLibraryTests {
    /// Runs Apple's `SignedDataVerifier` (scripts/apple_library_verify.py) over `inputs` (kind, JWS), trusting the
    /// simulator's root: one decoded object (or `{"error"}`) per input, as the library's models print (free-form JSON);
    /// nil, with an issue recorded, without Apple's library.
    static func appleVerify(_ inputs: [(kind: String, jws: String)], bundleId: String) async throws -> [[String: AppStoreJSONValue]]? {
        guard let python = ProcessInfo.processInfo.environment["IAPKIT_PYTHON"] else {
            Issue.record("IAPKIT_PYTHON is not set: run the suite with scripts/test, which installs Apple's library")
            return nil
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-apple-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let rootPath = directory.appendingPathComponent("root.der").path
        try Data(sharedAuthority.jws.rootDER).write(to: URL(fileURLWithPath: rootPath))
        var arguments: [String] = []
        for (index, input) in inputs.enumerated() {
            let path = directory.appendingPathComponent("\(index).jws").path
            try Data(input.jws.utf8).write(to: URL(fileURLWithPath: path))
            arguments.append("\(input.kind)=\(path)")
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/apple_library_verify.py").path
        let run = try await Subprocess.run(python, [script, rootPath, bundleId, "Sandbox"] + arguments)
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map { (try? JSONDecoder().decode([String: AppStoreJSONValue].self, from: Data($0.utf8))) ?? [:] }
        try #require(lines.count == inputs.count, "Apple's library printed: \(run.stdout)")
        return lines
    }

    @Test("SignedDataVerifier (app-store-server-library) verifies a minted transaction, renewal info and notification")
    func appleLibraryAccepts() async throws {
        let minter = try Minter(authority: sharedAuthority)
        let transaction = sampleTransaction()
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.originalTransactionId = transaction.originalTransactionId
        renewal.productId = transaction.productId
        renewal.autoRenewProductId = transaction.productId
        renewal.autoRenewStatus = .on
        renewal.signedDate = transaction.signedDate
        renewal.environment = .sandbox
        renewal.renewalDate = transaction.expiresDate
        var notification = ResponseBodyV2DecodedPayload()
        notification.notificationType = .subscribed
        notification.subtype = .initialBuy
        notification.notificationUUID = UUID().uuidString.lowercased()
        notification.version = "2.0"
        notification.signedDate = transaction.signedDate
        notification.data = NotificationData()
        notification.data?.environment = .sandbox
        notification.data?.bundleId = "com.example.sim"
        notification.data?.appAppleId = 1_234_567_890
        notification.data?.signedTransactionInfo = try minter.sign(transaction)
        notification.data?.signedRenewalInfo = try minter.sign(renewal)
        notification.data?.status = .active

        guard let lines = try await Self.appleVerify([("transaction", try minter.sign(transaction)), ("renewal", try minter.sign(renewal)),
                                                      ("notification", try minter.sign(notification))], bundleId: "com.example.sim") else { return }
        let (t, r, n) = (lines[0], lines[1], lines[2])
        #expect(t["error"] == nil, "transaction rejected: \(t)")
        #expect(t["transactionId"]?.string == transaction.transactionId)
        #expect(t["appAccountToken"]?.string?.lowercased() == transaction.appAccountToken?.uuidString.lowercased())
        #expect(t["price"]?.int == 4990)
        #expect(t["type"]?.string == "Auto-Renewable Subscription")
        #expect(r["error"] == nil, "renewal info rejected: \(r)")
        #expect(r["autoRenewProductId"]?.string == transaction.productId)
        #expect(n["error"] == nil, "notification rejected: \(n)")
        #expect(n["notificationType"]?.string == "SUBSCRIBED")
        #expect(n["subtype"]?.string == "INITIAL_BUY")
    }

    @Test("Apple's SignedDataVerifier takes the simulator's CONSUMPTION_REQUEST (with its reason) and RESCIND_CONSENT (appData, no data)")
    func appleLibraryAcceptsCustomerNotices() async throws {
        let engine = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority))
        try await engine.createAccount("kim")
        guard case .purchased(_, let id, _) = try await engine.purchase(account: "kim", device: "d", productId: "com.example.iapkit.coins.100") else {
            Issue.record("purchase failed"); return
        }
        #expect(try await engine.requestRefund(id, reason: .fulfillmentIssue))
        #expect(try await !engine.requestRefund(id), "one open request at a time")
        #expect(try await engine.rescindConsent(account: "kim"))
        let notices = await engine.notifications().filter { [.consumptionRequest, .rescindConsent].contains($0.type) }
        try #require(notices.count == 2)
        guard let lines = try await Self.appleVerify(notices.map { ("notification", $0.signedPayload) }, bundleId: engine.catalog.bundleId) else { return }
        #expect(lines[0]["error"] == nil, "\(lines[0])")
        #expect(lines[0]["notificationType"]?.string == "CONSUMPTION_REQUEST")
        #expect(lines[0]["data"]?["consumptionRequestReason"]?.string == "FULFILLMENT_ISSUE")
        #expect(lines[1]["error"] == nil, "\(lines[1])")
        #expect(lines[1]["notificationType"]?.string == "RESCIND_CONSENT")
        #expect(lines[1]["data"] == nil)
        #expect(lines[1]["appData"]?["signedAppTransactionInfo"]?.string != nil)
    }
}
