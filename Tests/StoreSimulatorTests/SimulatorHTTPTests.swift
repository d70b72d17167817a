import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import HummingbirdTesting
import StoreSimulator
import IAPTestSupport
import Testing

/// A simulator over real HTTP on loopback, and an API key to call its Server API with.
struct SimulatorFixture {
    let apiKey = P256.Signing.PrivateKey()
    let keyId = "SIMKEY0001"
    let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
    let engine: StoreEngine

    init() throws {
        let catalog = try SimulatorCatalog(storeKit: CatalogTests.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat", appAppleId: 42))
        engine = try StoreEngine(catalog: catalog, minter: Minter(authority: sharedAuthority))
    }

    /// `retentionBudget`: Apple's 700 ms by default; a test that judges answers gives more, and a too-slow endpoint more than that (the
    /// loaded suite has taken 769 ms to answer a local endpoint that answers at once).
    func application(sharedSecret: String? = nil, retentionBudget: Duration = RetentionRequester.budget) -> some ApplicationProtocol {
        var services = SimulatorServer.Services(
            engine: engine,
            authenticator: APIAuthenticator(keyId: keyId, issuerId: issuerId, publicKey: apiKey.publicKey, bundleId: "com.revenuecat"),
            sharedSecret: sharedSecret)
        services.retentionBudget = retentionBudget
        return SimulatorServer.application(services, port: 0)
    }

    /// An App Store Connect API token, optionally broken in one way.
    func token(audience: String = "appstoreconnect-v1", bundleId: String = "com.revenuecat", lifetime: TimeInterval = 300,
               issuedAt: Date = Date(), keyId: String? = nil, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyId ?? self.keyId)","typ":"JWT"}"#
        let iat = Int(issuedAt.timeIntervalSince1970)
        let claims = #"{"iss":"\#(issuerId)","iat":\#(iat),"exp":\#(iat + Int(lifetime)),"aud":"\#(audience)","bid":"\#(bundleId)"}"#
        let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(claims.utf8))
        let signature = try (key ?? apiKey).signature(for: Array(input.utf8))
        return input + "." + Base64.urlEncode(signature.rawRepresentation)
    }
}

/// A request body built as a JSON object: the simulator's own device endpoints, and bodies made to be refused.
func jsonBody(_ object: [String: Any]) throws -> ByteBuffer {
    ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object))
}

@Suite("The simulator over real HTTP")
struct SimulatorHTTPTests {
    let fixture: SimulatorFixture
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))
    let receiptVerifier = ReceiptVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))

    init() throws { fixture = try SimulatorFixture() }

    @Test("Device side: account, products, purchase, unfinished queue, finish, root certificate")
    func deviceFlow() async throws {
        try await fixture.application().test(.live) { client in
            let root = try await client.execute(uri: "/sim/root.cer", method: .get)
            #expect(Array(root.body.readableBytesView) == sharedAuthority.jws.rootDER)
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "alice"]))
            let products = try decode(SimProducts.self, try await client.execute(uri: "/sim/products?ids=lifetime,no.such.thing", method: .get))
            #expect(products.products.first?.productId == "lifetime")
            #expect(products.invalidProductIds == ["no.such.thing"])

            let token = UUID()
            let bought = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(
                ["account": "alice", "device": "phone", "productId": "lifetime", "appAccountToken": token.uuidString])))
            #expect(bought.status == "purchased")
            let signedTransaction = try #require(bought.signedTransaction)
            let verified = try await verifier.verifyTransaction(signedTransaction)
            #expect(verified.payload.appAccountToken == token)
            let receiptText = try #require(bought.receipt)
            let receipt = try #require(Base64.decode(receiptText.utf8))
            #expect(try await receiptVerifier.verify(receipt).receipt.inAppPurchases.count == 1)
            // StoreKit 2's view: the transaction alone; the receipt, when asked for, lists both purchases.
            let alone = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(
                ["account": "alice", "device": "phone", "productId": "com.revenuecat.consumable", "withReceipt": false])))
            #expect(alone.status == "purchased" && alone.signedTransaction != nil)
            #expect(alone.receipt == nil)
            let currentText = try decode(SimReceipt.self, try await client.execute(uri: "/sim/accounts/alice/receipt", method: .get)).receipt
            let current = try #require(Base64.decode(currentText.utf8))
            #expect(try await receiptVerifier.verify(current).receipt.inAppPurchases.count == 2)
            let aloneId = try #require(alone.transactionId)
            _ = try await client.execute(uri: "/sim/transactions/\(aloneId)/finish", method: .post, body: jsonBody(["device": "phone"]))

            let queue = try decode(SimulatedSignedTransactions.self, try await client.execute(uri: "/sim/accounts/alice/devices/phone/unfinished", method: .get))
            #expect(queue.signedTransactions.count == 1)
            let id = try #require(bought.transactionId)
            let finished = try decode(SimFinished.self, try await client.execute(uri: "/sim/transactions/\(id)/finish", method: .post, body: jsonBody(["device": "phone"])))
            #expect(finished.finished == true)
            let empty = try decode(SimulatedSignedTransactions.self, try await client.execute(uri: "/sim/accounts/alice/devices/phone/unfinished", method: .get))
            #expect(empty.signedTransactions.isEmpty == true)

            let cancelled = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(
                ["account": "alice", "device": "phone", "productId": "lifetime", "outcome": "userCancelled"])))
            #expect(cancelled.status == "userCancelled")
            let interrupted = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: jsonBody(
                ["account": "alice", "device": "phone", "productId": "com.revenuecat.consumable", "outcome": "interrupted"])))
            #expect(interrupted.status == "interrupted")
            let request = try #require(interrupted.requestId)
            let completed = try? decode(SimApproved.self, try await client.execute(uri: "/sim/requests/\(request)/approve", method: .post))
            #expect(completed?.transactionId != nil)
            let bad = try await client.execute(uri: "/sim/purchases", method: .post, body: ByteBuffer(string: "{not json"))
            #expect(bad.status == .badRequest)
        }
    }

    @Test("verifyReceipt: 0 in the right environment, 21007/21008 in the wrong one, 21002, 21003, 21004, 21000")
    func verifyReceipt() async throws {
        try await fixture.engine.createAccount("bob")
        guard case .purchased(_, _, let receipt?) = try await fixture.engine.purchase(account: "bob", device: "d", productId: "com.revenuecat.monthly_4.99.1_week_intro") else {
            Issue.record("purchase failed"); return
        }
        let data = Base64.standardEncode(receipt)
        try await fixture.application(sharedSecret: "s3cret").test(.live) { client in
            func answer(_ path: String, _ body: VerifyReceiptRequest) async throws -> TestResponse {
                try await client.execute(uri: path, method: .post, body: encoded(body))
            }
            func status(_ path: String, _ body: VerifyReceiptRequest) async throws -> Int {
                try decode(VerifyReceiptResponse.self, try await answer(path, body)).status.rawValue
            }
            #expect(try await status("/verifyReceipt", .init(receiptData: data, password: "s3cret")) == 21007)
            let answered = try await answer("/sandbox/verifyReceipt", .init(receiptData: data, password: "s3cret"))
            let ok = try decode(VerifyReceiptResponse.self, answered)
            #expect(ok.status == .valid)
            #expect(ok.environment == .sandbox)
            #expect(ok.receipt?.bundleId == "com.revenuecat")
            let latest = try #require(ok.latestReceiptInfo)
            #expect(latest.first?.isTrialPeriod == true)
            #expect(ok.pendingRenewalInfo?.first?.autoRenewStatus == true)
            // Apple's spellings of the two flags: "true" in latest_receipt_info, "1" in pending_renewal_info.
            let wire = String(decoding: answered.body.readableBytesView, as: UTF8.self)
            #expect(wire.contains(#""is_trial_period":"true""#) && wire.contains(#""auto_renew_status":"1""#), "\(wire)")
            #expect(try await status("/sandbox/verifyReceipt", .init(receiptData: data, password: "wrong")) == 21004)
            #expect(try await status("/sandbox/verifyReceipt", .init(receiptData: "%%%")) == 21002)
            let apple = try Base64.standardEncode(CatalogTests.shared("vectors/kvitto/sandboxReceipt.der"))
            #expect(try await status("/sandbox/verifyReceipt", .init(receiptData: apple)) == 21003)
            let get = try decode(VerifyReceiptResponse.self, try await client.execute(uri: "/verifyReceipt", method: .get))
            #expect(get.status.rawValue == 21000)
        }
    }

    @Test("Server API: Apple's JWT rules, 401 without JSON, errors as Apple's JSON")
    func serverAPIAuth() async throws {
        try await fixture.engine.createAccount("carol")
        guard case .purchased(_, let id, _) = try await fixture.engine.purchase(account: "carol", device: "d", productId: "lifetime") else {
            Issue.record("purchase failed"); return
        }
        let other = P256.Signing.PrivateKey()
        try await fixture.application().test(.live) { client in
            func get(_ path: String, _ token: String?) async throws -> TestResponse {
                try await client.execute(uri: path, method: .get, headers: token.map { [.authorization: "Bearer \($0)"] } ?? [:])
            }
            let good = try await get("/inApps/v1/transactions/\(id)", try fixture.token())
            #expect(good.status == .ok)
            let signed = try #require(try decode(TransactionInfoResponse.self, good).signedTransactionInfo)
            #expect(try await verifier.verifyTransaction(signed).payload.transactionId == id)
            for (label, token) in [("none", nil), ("audience", try fixture.token(audience: "someone-else")),
                                   ("bundle", try fixture.token(bundleId: "com.other")), ("lifetime", try fixture.token(lifetime: 3700)),
                                   ("expired", try fixture.token(issuedAt: Date().addingTimeInterval(-600))),
                                   ("kid", try fixture.token(keyId: "OTHER")), ("key", try fixture.token(key: other))] as [(String, String?)] {
                let response = try await get("/inApps/v1/transactions/\(id)", token)
                #expect(response.status == .unauthorized, "\(label)")
                #expect(response.headers[.contentType] != "application/json", "\(label)")
            }
            let missing = try await get("/inApps/v1/transactions/9999999999", try fixture.token())
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType] == "application/json")
            #expect(apiError(missing) == 4_040_010)
            let invalid = try await get("/inApps/v1/transactions/abc", try fixture.token())
            #expect(apiError(invalid) == 4_000_006)
        }
    }

    @Test("History pages by 20 with revision, and filters")
    func historyPaging() async throws {
        try await fixture.engine.createAccount("dave")
        var first = ""
        // Products bought again and again (a non-consumable is bought once: buying it again answers that transaction).
        for index in 0..<45 {
            guard case .purchased(_, let id, _) = try await fixture.engine.purchase(account: "dave", device: "d", productId: index % 3 == 0 ? "com.revenuecat.non_renewable" : "com.revenuecat.consumable") else {
                Issue.record("purchase failed"); return
            }
            if index == 0 { first = id }
        }
        let firstId = first
        try await fixture.application().test(.live) { client in
            var revision: String?
            var pages: [Int] = []
            var seen: Set<String> = []
            repeat {
                let path = "/inApps/v2/history/\(firstId)" + (revision.map { "?revision=\($0)" } ?? "")
                let page = try decode(HistoryResponse.self, try await client.execute(uri: path, method: .get, headers: [.authorization: "Bearer \(try fixture.token())"]))
                let signed = page.signedTransactions ?? []
                pages.append(signed.count)
                for jws in signed { seen.insert(try await verifier.verifyTransaction(jws).payload.transactionId ?? "") }
                revision = page.hasMore == true ? page.revision : nil
            } while revision != nil
            #expect(pages == [20, 20, 5])
            #expect(seen.count == 45)
            let consumables = try decode(HistoryResponse.self, try await client.execute(uri: "/inApps/v2/history/\(firstId)?productType=CONSUMABLE", method: .get,
                                                                                        headers: [.authorization: "Bearer \(try fixture.token())"]))
            #expect(consumables.signedTransactions?.count == 20)
            #expect(consumables.hasMore == true)
            let badRevision = try await client.execute(uri: "/inApps/v2/history/\(firstId)?revision=zzz", method: .get,
                                                       headers: [.authorization: "Bearer \(try fixture.token())"])
            #expect(apiError(badRevision) == 4_000_005)
        }
    }

    @Test("History lists transactions in the order they last changed; a revision kept from the last page brings a later purchase and a refund of an old one, and nothing else")
    func historyByChange() async throws {
        try await fixture.engine.createAccount("erin")
        var bought: [String] = []
        for product in ["lifetime", "com.revenuecat.consumable", "com.revenuecat.consumable"] {
            guard case .purchased(_, let id, _) = try await fixture.engine.purchase(account: "erin", device: "d", productId: product) else {
                Issue.record("purchase failed"); return
            }
            bought.append(id)
        }
        let ids = bought
        #expect(try await fixture.engine.refund(ids[0]))
        try await fixture.engine.advanceClock(by: 60)
        let auth: HTTPFields = [.authorization: "Bearer \(try fixture.token())"]
        try await fixture.application().test(.live) { client in
            func page(_ query: String) async throws -> (ids: [String], revision: String, hasMore: Bool) {
                let body = try decode(HistoryResponse.self, try await client.execute(uri: "/inApps/v2/history/\(ids[1])\(query)", method: .get, headers: auth))
                var listed: [String] = []
                for jws in body.signedTransactions ?? [] { listed.append(try await verifier.verifyTransaction(jws).payload.transactionId ?? "") }
                return (listed, try #require(body.revision), try #require(body.hasMore as Bool?))
            }
            let all = try await page("")
            #expect(all.ids == [ids[1], ids[2], ids[0]], "the refunded purchase changed last")
            #expect(all.hasMore == false)
            #expect(try await page("?sort=DESCENDING").ids == [ids[0], ids[2], ids[1]])
            // Nothing changed since: an empty page that hands the same revision back.
            let unchanged = try await page("?revision=\(all.revision)")
            #expect(unchanged.ids.isEmpty && unchanged.revision == all.revision && unchanged.hasMore == false)
            guard case .purchased(_, let later, _) = try await fixture.engine.purchase(account: "erin", device: "d", productId: "com.revenuecat.consumable") else {
                Issue.record("purchase failed"); return
            }
            #expect(try await fixture.engine.refund(ids[1]))
            let since = try await page("?revision=\(all.revision)")
            #expect(since.ids == [later, ids[1]], "what changed since the kept revision, in the order it changed")
            // The purchase refunded first changes again: it moves in the history, not in the refund history.
            #expect(try await fixture.engine.setAppAccountToken(originalTransactionId: ids[0], UUID()) == .set)
            #expect(try await page("").ids.last == ids[0])
            let refunds = try decode(RefundHistoryResponse.self, try await client.execute(uri: "/inApps/v2/refund/lookup/\(ids[1])", method: .get, headers: auth))
            var refunded: [String] = []
            for jws in refunds.signedTransactions ?? [] { refunded.append(try await verifier.verifyTransaction(jws).payload.transactionId ?? "") }
            #expect(refunded == [ids[0], ids[1]], "Refund History is by revocationDate")
            let descending = try await page("?sort=DESCENDING")
            let mixed = try await client.execute(uri: "/inApps/v2/history/\(ids[1])?revision=\(descending.revision)", method: .get, headers: auth)
            #expect(apiError(mixed) == 4_000_005, "a revision read descending is refused ascending")
            let old = try await client.execute(uri: "/inApps/v2/history/\(ids[1])?revision=\(Base64.urlEncode(Array("o:3".utf8)))", method: .get, headers: auth)
            #expect(apiError(old) == 4_000_005, "a position is not a revision")
        }
    }

    @Test("A state file from before revisions loads in minted order, each transaction numbered apart (so no page boundary can fall between equal revisions)")
    func historyFromOlderState() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sim-\(UUID().uuidString)")
        let catalog = try SimulatorCatalog(storeKit: nil, settings: .demo)
        var minted: [String] = []
        do {
            let engine = try StoreEngine(catalog: catalog, minter: Minter(authority: sharedAuthority), dataDirectory: directory)
            try await engine.createAccount("fay")
            for _ in 0..<25 {
                guard case .purchased(_, let id, _) = try await engine.purchase(account: "fay", device: "d", productId: "com.example.iapkit.coins.100") else {
                    Issue.record("purchase failed"); return
                }
                minted.append(id)
            }
        }
        // Take every revision out, as a state file written before them has none.
        let file = directory.appendingPathComponent("state.json")
        var state = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        var transactions = try #require(state["transactions"] as? [String: [String: Any]])
        for id in transactions.keys { transactions[id]?["revision"] = nil }
        state["transactions"] = transactions
        try JSONSerialization.data(withJSONObject: state).write(to: file)
        let engine = try StoreEngine(catalog: catalog, minter: Minter(authority: sharedAuthority), dataDirectory: directory)
        #expect(await engine.changes(containing: minted[0]).map(\.payload.transactionId) == minted)
        #expect(Set(await engine.changes(containing: minted[0]).map(\.revision)).count == 25, "every transaction numbered apart")
    }


    @Test("Apple's parameter errors and ids: productType 4000022, start not before end 4000013, a status that is no number 4000031, both filters 4000019, no notification URL 4040007; an appTransactionId names its customer for history and statuses, and is 4000048 for Get Transaction Info")
    func parameterErrorsAndAppTransactionIds() async throws {
        try await fixture.engine.createAccount("erin")
        guard case .purchased(_, let firstId, _) = try await fixture.engine.purchase(account: "erin", device: "d", productId: "lifetime") else {
            Issue.record("purchase failed"); return
        }
        let appTransactionId = try #require(try await fixture.engine.appTransaction(containing: firstId)?.appTransactionId)
        try await fixture.application().test(.live) { client in
            let auth: HTTPFields = [.authorization: "Bearer \(try fixture.token())", .contentType: "application/json"]
            func code(_ path: String, _ method: HTTPRequest.Method = .get, _ body: (any Encodable)? = nil) async throws -> Int? {
                apiError(try await client.execute(uri: path, method: method, headers: auth, body: try body.map { try encoded($0) }))
            }
            #expect(try await code("/inApps/v2/history/\(firstId)?productType=BOGUS") == 4_000_022)
            #expect(try await code("/inApps/v2/history/\(firstId)?startDate=2000&endDate=1000") == 4_000_013)
            #expect(try await code("/inApps/v2/history/\(firstId)?startDate=1000&endDate=1000") == 4_000_013)
            #expect(try await code("/inApps/v2/history/\(firstId)?startDate=nan") == 4_000_015)
            #expect(try await code("/inApps/v1/subscriptions/\(firstId)?status=ACTIVE") == 4_000_031)
            var both = NotificationHistoryRequest()
            (both.startDate, both.endDate, both.transactionId, both.notificationType) = (Date() - 86_400, Date(), firstId, .refund)
            #expect(try await code("/inApps/v1/notifications/history", .post, both) == 4_000_019)
            #expect(try await code("/inApps/v1/notifications/test", .post) == 4_040_007, "the simulator here has no notification URL")
            // An app transaction id: the customer's history, as with any of their transaction ids; not a transaction.
            let history = try decode(HistoryResponse.self, try await client.execute(uri: "/inApps/v2/history/\(appTransactionId)", method: .get, headers: auth))
            #expect(history.signedTransactions?.count == 1, "\(history)")
            let statuses = try await client.execute(uri: "/inApps/v1/subscriptions/\(appTransactionId)", method: .get, headers: auth)
            #expect(statuses.status == .ok)
            #expect(try await code("/inApps/v1/transactions/\(appTransactionId)") == 4_000_048)
            var extend = ExtendRenewalDateRequest()
            (extend.extendByDays, extend.extendReasonCode, extend.requestIdentifier) = (1, 1, "r")
            #expect(try await code("/inApps/v1/subscriptions/extend/not-an-id", .put, extend) == 4_000_008)
        }
    }

    @Test("Apple's Python App Store Server API client works against the simulator")
    func applePythonClient() async throws {
        guard let python = ProcessInfo.processInfo.environment["IAPKIT_PYTHON"] else {
            Issue.record("IAPKIT_PYTHON is not set: run the suite with scripts/test, which installs Apple's library")
            return
        }
        let annual = "com.revenuecat.annual_39.99_no_trial"
        for account in ["erin", "fay", "gus"] { try await fixture.engine.createAccount(account) }
        // Fay is in Erin's family: she gets a FAMILY_SHARED copy of Erin's annual plan. Gus's monthly plan renews.
        #expect(try await fixture.engine.setFamily(organizer: "erin", members: ["fay"]))
        guard case .purchased(_, let subscription, _) = try await fixture.engine.purchase(account: "erin", device: "d", productId: annual),
              case .purchased(_, let consumable, _) = try await fixture.engine.purchase(account: "erin", device: "d", productId: "com.revenuecat.consumable"),
              case .purchased(_, let monthly, _) = try await fixture.engine.purchase(account: "gus", device: "g", productId: "com.revenuecat.monthly_4.99.1_week_intro") else {
            Issue.record("purchase failed"); return
        }
        try await fixture.engine.advanceClock(by: 960)  // past the monthly plan's free three months (15 minutes in sandbox)
        let recorded = await fixture.engine.recordedTransactions()
        let renewal = try #require(recorded.first { $0.payload.originalTransactionId == monthly && $0.payload.transactionId != monthly }?.payload.transactionId)
        let familyCopy = try #require(recorded.first { $0.account == "fay" && $0.payload.productId == annual }?.payload.transactionId)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-api-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyPath = directory.appendingPathComponent("key.p8").path
        try Data(fixture.apiKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/apple_library_api.py").path

        try await fixture.application().test(.live) { client in
            let port = try #require(client.port)
            let run = try await Subprocess.run(python, [script, "http://127.0.0.1:\(port)", keyPath, fixture.keyId, fixture.issuerId, "com.revenuecat", subscription, subscription,
                                                        renewal, familyCopy, consumable, annual])
            let output = Data(run.stdout.utf8)
            let results = try #require(try? JSONDecoder().decode(AppleAPIResults.self, from: output), "\(String(decoding: output, as: UTF8.self))")
            let signed = try #require(results.transaction?.value?.signed, "\(String(describing: results.transaction))")
            let transaction = try await verifier.verifyTransaction(signed).payload
            #expect(transaction.transactionId == subscription)
            #expect(results.missingTransaction?.apiError == 4_040_010)
            #expect(results.history?.value?.pages == [2])
            #expect(results.historyConsumables?.value == 1)
            #expect(results.statuses?.value?.first?.statuses == [1])
            #expect(results.refunds?.value == 0)
            #expect(results.extend?.value == true)
            #expect(results.badExtend?.apiError == 4_000_009)
            #expect(results.setToken?.value == "ok")
            #expect(results.lookup?.value == 0)

            // API 1.12–1.21 and Apple's codes around them.
            #expect(results.historyV1?.value == 2, "v1 lists the unfinished consumable: \(String(describing: results.historyV1))")
            #expect(results.historyRevoked?.value == 0, "revoked=True, as Python spells it: \(String(describing: results.historyRevoked))")
            #expect(results.historyNotRevoked?.value == 2, "\(String(describing: results.historyNotRevoked))")
            #expect(results.setTokenOnRenewal?.apiError == 4_000_187, "\(String(describing: results.setTokenOnRenewal))")
            #expect(results.setTokenOnFamilyCopy?.apiError == 4_000_185, "\(String(describing: results.setTokenOnFamilyCopy))")
            #expect(results.extendFamilyCopy?.apiError == 4_030_007, "\(String(describing: results.extendFamilyCopy))")
            let appTransaction = try #require(results.appTransaction?.value, "\(String(describing: results.appTransaction))")
            let first = try await verifier.verifyAppTransaction(appTransaction.signed).payload
            let again = try await verifier.verifyAppTransaction(appTransaction.byAppTransactionId).payload
            #expect(first.appTransactionId != nil && first.appTransactionId == again.appTransactionId)
            #expect(transaction.appTransactionId == first.appTransactionId, "every transaction carries its customer's appTransactionId")
            #expect(first.bundleId == "com.revenuecat")
            #expect(results.missingAppTransaction?.apiError == 4_040_019)
            #expect(results.consumption?.value == "ok", "Send Consumption Information (API 1.19): \(String(describing: results.consumption))")
            #expect(results.consumptionWithoutConsent?.apiError == 4_000_035)
            #expect(results.consumptionPercentageOfSubscription?.apiError == 4_000_209)
            #expect(results.consumptionOfFamilyCopy?.apiError == 4_000_185)
            #expect(results.consumptionOfAppTransaction?.apiError == 4_000_048, "\(String(describing: results.consumptionOfAppTransaction))")
            #expect(results.finish?.value == "ok", "\(String(describing: results.finish))")
            #expect(results.missingFinish?.apiError == 4_040_010)
            #expect(results.historyV1AfterFinish?.value == 1, "a finished consumable leaves v1's history")
            #expect(await fixture.engine.recordedTransactions().first { $0.payload.transactionId == consumable }?.unfinishedOn.isEmpty == true)
            let mass = try #require(results.massExtend?.value, "\(String(describing: results.massExtend))")
            #expect(mass.requestIdentifier == true)
            #expect(mass.complete == true)
            #expect(mass.completeDate == true)
            // Erin's own annual plan is extended; Fay's copy is not the purchaser's and is left alone.
            #expect(mass.succeeded == 1, "\(mass)")
            #expect(results.missingMassExtendStatus?.apiError == 4_040_009)
            #expect(results.badMassExtend?.apiError == 4_000_023)
        }
    }
}

@Suite("Seeded faults on the simulator's endpoints")
struct FaultTests {
    @Test("Injected 5xx, 21005 and latency follow the seed: the same plan gives the same faults")
    func seededFaults() async throws {
        let fixture = try SimulatorFixture()
        try await fixture.engine.createAccount("f")
        guard case .purchased(_, _, let receipt?) = try await fixture.engine.purchase(account: "f", device: "d", productId: "lifetime") else {
            Issue.record("purchase failed"); return
        }
        let body = try jsonBody(["receipt-data": Base64.standardEncode(receipt)])
        try await fixture.application().test(.live) { client in
            func run() async throws -> [String] {
                var outcomes: [String] = []
                for _ in 0..<40 {
                    let response = try await client.execute(uri: "/sandbox/verifyReceipt", method: .post, body: body)
                    if response.status != .ok { outcomes.append(String(response.status.code)); continue }
                    outcomes.append(String((try? decode(VerifyReceiptResponse.self, response))?.status.rawValue ?? -1))
                }
                return outcomes
            }
            let plan = #"{"seed":42,"rules":[{"pathPrefix":"/sandbox/verifyReceipt","errorRate":0.3,"errorStatus":502,"status21005Rate":0.5}]}"#
            _ = try await client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(string: plan))
            let first = try await run()
            _ = try await client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(string: plan))
            let second = try await run()
            #expect(first == second, "same seed, same faults")
            #expect(first.contains("502") && first.contains("21005") && first.contains("0"), "\(first)")
            let bad = try await client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(string: #"{"seed":1,"rules":[{"pathPrefix":"/","errorRate":2}]}"#))
            #expect(bad.status == .badRequest)

            _ = try await client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(string: #"{"seed":1,"rules":[{"pathPrefix":"/sandbox","latencyMilliseconds":300}]}"#))
            let started = ContinuousClock.now
            let slow = try await client.execute(uri: "/sandbox/verifyReceipt", method: .post, body: body)
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            #expect(try decode(VerifyReceiptResponse.self, slow).status == .valid)
            _ = try await client.execute(uri: "/sim/faults", method: .delete)
            #expect(try decode(VerifyReceiptResponse.self, try await client.execute(uri: "/sandbox/verifyReceipt", method: .post, body: body)).status == .valid)
        }
    }
}

@Suite("Dropped connections")
struct DroppedConnectionTests {
    @Test("A dropped connection reaches the client as a failed request, never as an answer")
    func dropped() async throws {
        let fixture = try SimulatorFixture()
        try await fixture.application().test(.live) { client in
            _ = try await client.execute(uri: "/sim/faults", method: .post,
                                         body: ByteBuffer(string: #"{"seed":3,"rules":[{"pathPrefix":"/verifyReceipt","dropRate":1}]}"#))
            let port = try #require(client.port)
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/verifyReceipt")!)
            request.httpMethod = "POST"
            request.httpBody = Data(#"{"receipt-data":"AAAA"}"#.utf8)
            request.timeoutInterval = 10
            do {
                let (data, _) = try await URLSession.shared.data(for: request)
                Issue.record("a dropped connection produced \(data.count) bytes of answer")
            } catch {
                // Expected: the connection closed before the promised body.
            }
            // Control: the same request without the fault gets Apple's answer for a malformed receipt.
            _ = try await client.execute(uri: "/sim/faults", method: .delete)
            let (data, _) = try await URLSession.shared.data(for: request)
            #expect(try AppStoreJSON.decoder().decode(VerifyReceiptResponse.self, from: data).status.rawValue == 21002)
        }
    }

    @Test("Apple's API paths answer a body they cannot read with Apple's error body (4000000); the device routes keep their own message")
    func appleErrorBody() async throws {
        let fixture = try SimulatorFixture()
        try await fixture.application().test(.router) { client in
            let auth: HTTPFields = [.authorization: "Bearer \(try fixture.token())", .contentType: "application/json"]
            let bad = try await client.execute(uri: "/inApps/v1/notifications/history", method: .post, headers: auth, body: ByteBuffer(string: "{not json"))
            #expect(bad.status == .badRequest)
            let body = try JSONDecoder().decode(APIErrorBody.self, from: Data(bad.body.readableBytesView))
            #expect(body.errorCode == .generalBadRequest && !body.errorMessage.isEmpty)
            let extend = try await client.execute(uri: "/inApps/v1/subscriptions/extend/mass", method: .post, headers: auth, body: ByteBuffer(string: "[]"))
            #expect(try JSONDecoder().decode(APIErrorBody.self, from: Data(extend.body.readableBytesView)).errorCode == .generalBadRequest, "a body of another shape")
            let device = try await client.execute(uri: "/sim/purchases", method: .post, body: ByteBuffer(string: "{not json"))
            #expect(device.status == .badRequest)
            #expect((try? JSONDecoder().decode(APIErrorBody.self, from: Data(device.body.readableBytesView)))?.errorCode == nil, "the simulator's own routes are not Apple's")
        }
    }
}
