import AppStoreFormats
import AppStoreTrust
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import StoreSimulator
import Testing

/// The Advanced Commerce API in the simulator: requests signed by Apple's own creator sold as they say, the server's
/// changes told with METADATA_UPDATE, PRICE_CHANGE and MIGRATION, Apple's library reading every payload.
@Suite("Advanced Commerce API: Apple's signed requests sold as they say; metadata, price, migration, cancel and revoke")
struct AdvancedCommerceTests {
    static let generic = "com.example.iapkit.ac.subscription"
    static let oneTime = "com.example.iapkit.ac.onetime"
    static let monthly = "com.example.iapkit.pro.monthly"
    let key = P256.Signing.PrivateKey()
    let keyId = "ACKEY00001"
    let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.example.iapkit"))

    /// What Apple's creator signs (scripts/apple_library_advanced_commerce.py).
    func appleRequests(token: UUID) async throws -> [String: String] {
        guard let python = ProcessInfo.processInfo.environment["IAPKIT_PYTHON"] else {
            throw SimulatorError.catalog("IAPKIT_PYTHON is not set: run the suite with scripts/test, which installs Apple's library")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iapkit-ac-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyPath = directory.appendingPathComponent("key.p8").path, otherPath = directory.appendingPathComponent("other.p8").path
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherPath))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/apple_library_advanced_commerce.py").path
        let run = try await Subprocess.run(python, [script, keyPath, keyId, issuerId, "com.example.iapkit", token.uuidString.lowercased(), otherPath])
        #expect(run.status == 0, "\(run.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: String], "\(run.stdout)")
    }

    func engine() throws -> StoreEngine {
        try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority),
                        frozenClock: Date(timeIntervalSince1970: 1_790_000_000))
    }

    func application(_ engine: StoreEngine) -> some ApplicationProtocol {
        SimulatorServer.application(.init(engine: engine, authenticator: APIAuthenticator(keyId: keyId, issuerId: issuerId, publicKey: key.publicKey,
                                                                                        bundleId: "com.example.iapkit")), port: 0)
    }

    func token() throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyId)","typ":"JWT"}"#
        let iat = Int(Date().timeIntervalSince1970)
        let claims = #"{"iss":"\#(issuerId)","iat":\#(iat),"exp":\#(iat + 300),"aud":"appstoreconnect-v1","bid":"com.example.iapkit"}"#
        let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(claims.utf8))
        return input + "." + Base64.urlEncode(try key.signature(for: Array(input.utf8)).rawRepresentation)
    }

    /// Calls `/advancedCommerce/v1/{path}/{transactionId}` with a body built as JSON objects (many of them what Apple
    /// refuses: an unknown field, prices that overflow, two changes of one SKU); the status and Apple's error answered.
    func call(_ client: some TestClientProtocol, _ path: String, _ transactionId: String, _ body: [String: Any]) async throws -> (HTTPResponse.Status, APIAnswer) {
        let response = try await client.execute(uri: "/advancedCommerce/v1/\(path)/\(transactionId)", method: .post,
                                                headers: [.authorization: "Bearer \(try token())", .contentType: "application/json"], body: jsonBody(body))
        return (response.status, APIAnswer(response))
    }

    func requestInfo(_ id: UUID = UUID(), consistencyToken: String? = nil) -> [String: String] {
        var info = ["requestReferenceId": id.uuidString.lowercased()]
        if let consistencyToken { info["consistencyToken"] = consistencyToken }
        return info
    }

    /// The notifications minted since `seen`, verified: type, transaction and renewal info (renewal info nil for one-time charges).
    func told(_ engine: StoreEngine, since seen: inout Int) async throws -> [(type: NotificationTypeV2, subtype: NotificationSubtype?, signed: String,
                                                                         transaction: JWSTransactionDecodedPayload, renewal: JWSRenewalInfoDecodedPayload?)] {
        let all = await engine.notifications()
        defer { seen = all.count }
        var result: [(NotificationTypeV2, NotificationSubtype?, String, JWSTransactionDecodedPayload, JWSRenewalInfoDecodedPayload?)] = []
        for record in all.dropFirst(seen) {
            let payload = try await verifier.verifyNotification(record.signedPayload).payload
            let transaction = try await verifier.verifyTransaction(try #require(payload.data?.signedTransactionInfo)).payload
            var renewal: JWSRenewalInfoDecodedPayload?
            if let signed = payload.data?.signedRenewalInfo { renewal = try await verifier.verifyRenewalInfo(signed).payload }
            result.append((payload.notificationType!, payload.subtype, record.signedPayload, transaction, renewal))
        }
        return result
    }

    @Test("CREATE_SUBSCRIPTION and CREATE_ONE_TIME_CHARGE from Apple's creator: charged the items' prices, the offer for three periods, names and SKUs in advancedCommerceInfo; another key, a reused nonce, the generic product without a request and a request on an ordinary product refused")
    func inAppRequests() async throws {
        let store = try engine()
        let token = UUID()
        let signed = try await appleRequests(token: token)
        let subscription = try #require(signed["subscription"]), otherKey = try #require(signed["otherKey"]), oneTimeCharge = try #require(signed["oneTime"])
        try await application(store).test(.router) { client in
            for id in ["ann", "bob"] { _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": id])) }
            func buy(_ account: String, _ product: String, _ data: String?) async throws -> SimulatedPurchaseAnswer {
                let body = SimPurchaseRequest(account: account, productId: product, withReceipt: false, advancedCommerceData: data)
                return try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(body)))
            }
            #expect(try await buy("ann", Self.generic, nil).status == "failed", "the generic product is sold only with a request")
            #expect(try await buy("ann", Self.generic, otherKey).status == "failed", "signed with another key")
            #expect(try await buy("ann", Self.monthly, subscription).status == "failed", "an ordinary product")
            let bought = try await buy("ann", Self.generic, subscription)
            #expect(bought.status == "purchased", "\(bought)")
            #expect(try await buy("bob", Self.generic, subscription).status == "failed", "the nonce was used")

            var seen = 0
            let subscribed = try #require(try await told(store, since: &seen).first)
            #expect(subscribed.type == .subscribed && subscribed.subtype == .initialBuy)
            let transaction = subscribed.transaction
            #expect(transaction.productId == Self.generic && transaction.price == 9990 + 2990 && transaction.currency == "USD")
            #expect(transaction.appAccountToken == token, "the request's appAccountToken")
            #expect(abs(transaction.expiresDate!.timeIntervalSince(transaction.purchaseDate!) - 300) < 1, "the request's P1M, a sandbox month")
            let info = try #require(transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self))
            #expect(info.items?.map(\.sku) == ["news.basic", "news.sports"] && info.items?.map(\.price) == [9990, 2990])
            #expect(info.items?.last?.offer?.periodCount == 3 && info.period == "P1M" && info.descriptors?.displayName == "News+")
            #expect(info.requestReferenceId == signed["subscriptionRequestReferenceId"] && info.taxCode == "C003-00-2" && info.taxExclusivePrice == 12980)
            let renewal = try #require(subscribed.renewal)
            let next = try #require(renewal.advancedCommerceInfo?.decoded(as: AdvancedCommerceRenewalInfo.self))
            #expect(renewal.renewalPrice == 12980 && next.items?.last?.offer?.periodCount == 2 && next.consistencyToken?.isEmpty == false)

            // Three periods at the offer, then the item's own price.
            try await store.advanceClock(by: 3 * 300 + 1)
            let renewals = try await told(store, since: &seen)
            #expect(renewals.map(\.type) == [.didRenew, .didRenew, .didRenew])
            #expect(renewals.map(\.transaction.price) == [12980, 12980, 13980], "\(renewals.map(\.transaction.price))")

            let charge = try await buy("bob", Self.oneTime, oneTimeCharge)
            #expect(charge.status == "purchased", "\(charge)")
            let oneTime = try #require(try await told(store, since: &seen).first)
            #expect(oneTime.type == .oneTimeCharge && oneTime.transaction.price == 1990 && oneTime.transaction.type == .consumable)
            #expect(oneTime.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self)?.items?.first?.sku == "article.42")

            // Apple's library reads what the simulator signed, Advanced Commerce fields included.
            let signedTransaction = try #require(bought.signedTransaction)
            if let lines = try await AppleLibraryTests.appleVerify([("notification", subscribed.signed), ("notification", oneTime.signed), ("transaction", signedTransaction)],
                                                                   bundleId: "com.example.iapkit") {
                #expect(lines.prefix(2).map { $0["notificationType"]?.string } == ["SUBSCRIBED", "ONE_TIME_CHARGE"], "\(lines)")
                let info = lines.last?["advancedCommerceInfo"]
                let items = info?["items"]?.array
                #expect(items?.compactMap { $0["SKU"]?.string } == ["news.basic", "news.sports"], "Apple's AdvancedCommerceTransactionInfo: \(lines.last ?? [:])")
                #expect(items?.last?["offer"]?["periodCount"]?.int == 3 && info?["period"]?.string == "P1M")
            }
        }
    }

    @Test("The server's changes: METADATA_UPDATE now and at the next renewal, PRICE_CHANGE from the next renewal, a retry answered once, a stale consistency token and a reused request id refused, cancel, revoke with REFUND")
    func serverChanges() async throws {
        let store = try engine()
        let token = UUID()
        let signed = try await appleRequests(token: token)
        let subscription = try #require(signed["subscription"])
        try await application(store).test(.router) { client in
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann"]))
            let bought = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(
                SimPurchaseRequest(account: "ann", productId: Self.generic, advancedCommerceData: subscription))))
            let original = try #require(bought.transactionId)
            var seen = 0
            let first = try #require(try await told(store, since: &seen).first?.renewal?.advancedCommerceInfo?.decoded(as: AdvancedCommerceRenewalInfo.self))

            #expect(try await call(client, "subscription/changeMetadata", "999", ["requestInfo": requestInfo()]).0 == .notFound)
            let stale = try await call(client, "subscription/changeMetadata", original, [
                "requestInfo": requestInfo(consistencyToken: "1.9.stale"), "descriptors": ["displayName": "News Max", "effective": "IMMEDIATELY"]])
            #expect(stale.0 == .badRequest && stale.1.errorCode == 4_000_082)
            let long = try await call(client, "subscription/changeMetadata", original, [
                "requestInfo": requestInfo(), "descriptors": ["displayName": String(repeating: "x", count: 31), "effective": "IMMEDIATELY"]])
            #expect(long.1.errorCode == 4_000_089, "display names are at most 30 characters")

            let change: [String: Any] = [
                "requestInfo": requestInfo(consistencyToken: first.consistencyToken),
                "descriptors": ["displayName": "News Max", "effective": "IMMEDIATELY"],
                "items": [["currentSKU": "news.sports", "SKU": "news.sports.live", "displayName": "Sports Live", "effective": "NEXT_BILL_CYCLE"]]]
            let changed = try await call(client, "subscription/changeMetadata", original, change)
            #expect(changed.0 == .ok, "\(changed.1)")
            let retried = try await call(client, "subscription/changeMetadata", original, change)
            #expect(retried.0 == .ok, "the same request again (a retry after a timeout)")
            var reused = change
            reused["descriptors"] = ["displayName": "Other", "effective": "IMMEDIATELY"]
            #expect(try await call(client, "subscription/changeMetadata", original, reused).1.errorCode == 4_000_097)
            let update = try await told(store, since: &seen)
            #expect(update.map(\.type) == [.metadataUpdate], "told once: \(update.map(\.type))")
            let now = try #require(update.first?.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self))
            let later = try #require(update.first?.renewal?.advancedCommerceInfo?.decoded(as: AdvancedCommerceRenewalInfo.self))
            #expect(now.descriptors?.displayName == "News Max" && now.items?.last?.sku == "news.sports", "the SKU changes at the next bill cycle")
            #expect(later.items?.last?.sku == "news.sports.live" && later.consistencyToken != first.consistencyToken)

            let raise = try await call(client, "subscription/changePrice", original, [
                "requestInfo": requestInfo(), "items": [["SKU": "news.basic", "price": 11990, "dependentSKUs": ["news.sports"]]]])
            #expect(raise.0 == .ok, "\(raise.1)")
            let priced = try #require(try await told(store, since: &seen).first)
            #expect(priced.type == .priceChange)
            let increase = priced.renewal?.advancedCommerceInfo?.decoded(as: AdvancedCommerceRenewalInfo.self)?.items?.first?.priceIncreaseInfo
            #expect(increase?.price == 11990 && increase?.status == "SCHEDULED" && increase?.dependentSKUs == ["news.sports"])
            #expect(priced.renewal?.renewalPrice == Int64(14_980), "11.99 + the offer's 2.99")
            try await store.advanceClock(by: 300)
            let renewed = try #require(try await told(store, since: &seen).first)
            #expect(renewed.type == .didRenew && renewed.transaction.price == 11990 + 2990)
            #expect(renewed.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self)?.items?.last?.sku == "news.sports.live")
            // Less than a day before the renewal: too late for a price change.
            try await store.advanceClock(by: 290)
            let late = try await call(client, "subscription/changePrice", original, ["requestInfo": requestInfo(), "items": [["SKU": "news.basic", "price": 1]]])
            #expect(late.1.errorCode == 4_030_010, "\(late.1)")

            #expect(try await call(client, "subscription/cancel", original, ["requestInfo": requestInfo()]).0 == .ok)
            let cancelled = try #require(try await told(store, since: &seen).first)
            #expect(cancelled.type == .didChangeRenewalStatus && cancelled.subtype == .autoRenewDisabled && cancelled.renewal?.autoRenewStatus == .off)
            let revoked = try await call(client, "subscription/revoke", original, [
                "requestInfo": requestInfo(), "refundRiskingPreference": true, "refundType": "FULL", "refundReason": "LEGAL"])
            #expect(revoked.0 == .ok, "\(revoked.1)")
            let refund = try #require(try await told(store, since: &seen).first)
            #expect(refund.type == .refund && refund.transaction.revocationDate != nil && refund.transaction.revocationType == .refundFull)
            let refunded = refund.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self)?.items?.first
            #expect(refunded?.refunds?.first?.refundAmount == 11990 && refunded?.refunds?.first?.refundType == "FULL" && refunded?.revocationDate != nil)
            #expect(try await call(client, "subscription/revoke", original, [
                "requestInfo": requestInfo(), "refundRiskingPreference": true, "refundType": "FULL", "refundReason": "LEGAL"]).1.errorCode == 4_000_186)

            if let lines = try await AppleLibraryTests.appleVerify(update.map { ("notification", $0.signed) } + [("notification", priced.signed), ("notification", refund.signed)],
                                                                   bundleId: "com.example.iapkit") {
                #expect(lines.map { $0["notificationType"]?.string } == ["METADATA_UPDATE", "PRICE_CHANGE", "REFUND"], "\(lines)")
            }
        }
    }

    @Test("Refused without harm: prices that would overflow, a SKU twice, a second price change under way, another storefront, a second subscription by migration; a simulated refund decline changes nothing; StoreKit's wrapped request taken")
    func refusals() async throws {
        let store = try engine()
        let signer = AdvancedCommerceTestSigner(key: key, keyId: keyId, issuerId: issuerId)
        try await application(store).test(.router) { client in
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann"]))
            var huge = AdvancedCommerceInAppRequest(operation: AdvancedCommerceInAppRequest.createSubscription, requestInfo: .init(requestReferenceId: UUID().uuidString),
                                                    currency: "USD", taxCode: "C003-00-2")
            huge.descriptors = .init(description: "All", displayName: "All")
            huge.period = "P1M"
            huge.items = [.init(sku: "a", description: "A", displayName: "A", price: 5_000_000_000_000_000_000),
                          .init(sku: "b", description: "B", displayName: "B", price: 5_000_000_000_000_000_000)]
            func buy(_ request: AdvancedCommerceInAppRequest, wrapped: Bool = false) async throws -> SimulatedPurchaseAnswer {
                let jws = try signer.sign(request)
                let data = wrapped ? #"{"signatureInfo":{"token":"\#(jws)"}}"# : jws
                return try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(
                    SimPurchaseRequest(account: "ann", productId: Self.generic, advancedCommerceData: data))))
            }
            #expect(try await buy(huge).status == "failed", "prices whose sum overflows")
            var request = huge
            request.requestInfo = .init(requestReferenceId: UUID().uuidString)
            request.items = [.init(sku: "a", description: "A", displayName: "A", price: 1000), .init(sku: "b", description: "B", displayName: "B", price: 2000)]
            let bought = try await buy(request, wrapped: true)
            let original = try #require(bought.transactionId, "StoreKit's wrapper: \(bought)")

            let overflow = try await call(client, "subscription/changePrice", original, [
                "requestInfo": requestInfo(), "items": [["SKU": "a", "price": 5_000_000_000_000_000_000], ["SKU": "b", "price": 5_000_000_000_000_000_000]]])
            #expect(overflow.0 == .badRequest, "\(overflow.1)")
            let twice = try await call(client, "subscription/changeMetadata", original, [
                "requestInfo": requestInfo(), "items": [["currentSKU": "a", "SKU": "b", "effective": "IMMEDIATELY"]]])
            #expect(twice.1.errorCode == 4_000_114, "renamed onto another item's SKU: \(twice.1)")
            let same = try await call(client, "subscription/changeMetadata", original, [
                "requestInfo": requestInfo(), "items": [["currentSKU": "a", "displayName": "X", "effective": "IMMEDIATELY"],
                                                        ["currentSKU": "a", "description": "Y", "effective": "IMMEDIATELY"]]])
            #expect(same.1.errorCode == 4_000_143)
            #expect(try await call(client, "subscription/changePrice", original, ["requestInfo": requestInfo(), "items": [["SKU": "a", "price": 1500]]]).0 == .ok)
            #expect(try await call(client, "subscription/changePrice", original, ["requestInfo": requestInfo(), "items": [["SKU": "a", "price": 1700]]]).1.errorCode == 4_000_205)
            #expect(try await call(client, "subscription/cancel", original, ["requestInfo": requestInfo(), "storefront": "JPN"]).1.errorCode == 4_000_133)
            let many = (0...AdvancedCommerceLimits.maxItems).map { ["currentSKU": "a", "displayName": "X\($0)", "effective": "IMMEDIATELY"] }
            #expect(try await call(client, "subscription/changeMetadata", original, ["requestInfo": requestInfo(), "items": many]).1.errorCode == 4_000_179)
            // 23 characters, 46 code points (e and a combining accent): over 45 as Apple's libraries count.
            let accented = String(repeating: "e\u{301}", count: 23)
            let longer = try await call(client, "subscription/changeMetadata", original, [
                "requestInfo": requestInfo(), "descriptors": ["description": accented, "effective": "IMMEDIATELY"]])
            #expect(longer.1.errorCode == 4_000_088, "\(longer.1)")

            var seen = await store.notifications().count
            let declined = try await call(client, "subscription/revoke", original, [
                "requestInfo": requestInfo(), "refundRiskingPreference": false, "refundType": "FULL", "refundReason": "SIMULATE_REFUND_DECLINE"])
            #expect(declined.0 == .ok)
            let told = try await self.told(store, since: &seen)
            #expect(told.map(\.type) == [.refundDeclined] && told.first?.transaction.revocationDate == nil && told.first?.renewal?.autoRenewStatus == .on)

            // A customer who subscribes to the generic product already cannot get a second subscription by migration.
            let monthly = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(
                SimPurchaseRequest(account: "ann", productId: Self.monthly, withReceipt: false))))
            let migrate = try await call(client, "subscription/migrate", try #require(monthly.transactionId), [
                "requestInfo": requestInfo(), "targetProductId": Self.generic, "taxCode": "C003-00-2",
                "descriptors": ["displayName": "Pro", "description": "Everything"], "items": [["SKU": "pro.all", "displayName": "Pro", "description": "Everything"]]])
            #expect(migrate.1.errorCode == 4_030_009, "\(migrate.1)")
        }
    }

    @Test("REACTIVATE_SUBSCRIPTION turns auto-renew on again (nothing charged); Request Transaction Refund refunds items — revoking all of them revokes the transaction; CUSTOM needs its amount, PRORATED only the latest period")
    func reactivateAndRefund() async throws {
        let store = try engine()
        let signer = AdvancedCommerceTestSigner(key: key, keyId: keyId, issuerId: issuerId)
        try await application(store).test(.router) { client in
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann"]))
            func buy(_ request: AdvancedCommerceInAppRequest) async throws -> SimulatedPurchaseAnswer {
                try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(
                    SimPurchaseRequest(account: "ann", productId: Self.generic, advancedCommerceData: try signer.sign(request)))))
            }
            var create = AdvancedCommerceInAppRequest(operation: AdvancedCommerceInAppRequest.createSubscription, requestInfo: .init(requestReferenceId: UUID().uuidString),
                                                      currency: "USD", taxCode: "C003-00-2")
            create.descriptors = .init(description: "All", displayName: "All")
            create.period = "P1M"
            create.items = [.init(sku: "a", description: "A", displayName: "A", price: 1000), .init(sku: "b", description: "B", displayName: "B", price: 3000)]
            let original = try #require(try await buy(create).transactionId)
            var reactivate = AdvancedCommerceInAppRequest(operation: AdvancedCommerceInAppRequest.reactivateSubscription, requestInfo: .init(requestReferenceId: UUID().uuidString))
            reactivate.transactionId = original
            #expect(try await buy(reactivate).status == "failed", "auto-renew is on: nothing to reactivate")
            #expect(try await call(client, "subscription/cancel", original, ["requestInfo": requestInfo()]).0 == .ok)
            var seen = await store.notifications().count
            // Waiting for a parent, a reactivation would later be bought as something else: refused now instead.
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann", "askToBuy": true]))
            reactivate.requestInfo = .init(requestReferenceId: UUID().uuidString)
            #expect(try await buy(reactivate).reason?.hasPrefix("OperationNotAllowed") == true)
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann", "askToBuy": false]))
            reactivate.requestInfo = .init(requestReferenceId: UUID().uuidString)
            let back = try await buy(reactivate)
            #expect(back.status == "purchased" && back.transactionId == original, "\(back)")
            let told = try await self.told(store, since: &seen)
            #expect(told.map(\.type) == [.didChangeRenewalStatus] && told.first?.subtype == .autoRenewEnabled && told.first?.renewal?.autoRenewStatus == .on)

            func refund(_ items: [[String: Any]]) async throws -> (HTTPResponse.Status, APIAnswer) {
                try await call(client, "transaction/requestRefund", original, ["requestInfo": requestInfo(), "refundRiskingPreference": true, "items": items])
            }
            #expect(try await refund([["SKU": "a", "refundType": "CUSTOM", "refundReason": "OTHER", "revoke": false]]).1.errorCode == 4_000_153)
            #expect(try await refund([["SKU": "a", "refundType": "FULL", "refundReason": "OTHER", "revoke": false, "refundAmount": 5]]).1.errorCode == 4_000_155)
            #expect(try await refund([["SKU": "zz", "refundType": "FULL", "refundReason": "OTHER", "revoke": false]]).1.errorCode == 4_000_122)
            // A period past: prorating is for the latest one.
            try await store.advanceClock(by: 301)
            seen = await store.notifications().count
            #expect(try await refund([["SKU": "a", "refundType": "PRORATED", "refundReason": "OTHER", "revoke": false]]).1.errorCode == 4_000_182)
            #expect(try await refund([["SKU": "a", "refundType": "FULL", "refundReason": "OTHER", "revoke": false],
                                      ["SKU": "b", "refundType": "FULL", "refundReason": "SIMULATE_REFUND_DECLINE", "revoke": false]]).1.errorCode == 4_000_184)
            // Item a refunded in part, kept: the transaction stands (access continues), REFUND tells of the refund.
            #expect(try await refund([["SKU": "a", "refundType": "CUSTOM", "refundReason": "OTHER", "revoke": false, "refundAmount": 400]]).0 == .ok)
            let partial = try #require(try await self.told(store, since: &seen).first)
            #expect(partial.type == .refund && partial.transaction.revocationDate == nil)
            #expect(partial.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self)?.items?.first?.refunds?.first?.refundAmount == 400)
            #expect(try await refund([["SKU": "a", "refundType": "CUSTOM", "refundReason": "OTHER", "revoke": false, "refundAmount": 600]]).0 == .ok)
            _ = try await self.told(store, since: &seen)
            #expect(try await refund([["SKU": "a", "refundType": "FULL", "refundReason": "OTHER", "revoke": false]]).1.errorCode == 4_030_021,
                    "nothing left of a to refund")
            // Both revoked: the transaction is revoked in full.
            #expect(try await refund([["SKU": "a", "refundType": "FULL", "refundReason": "OTHER", "revoke": true],
                                      ["SKU": "b", "refundType": "FULL", "refundReason": "OTHER", "revoke": true]]).1.errorCode == nil)
            let revoked = try #require(try await self.told(store, since: &seen).first)
            #expect(revoked.type == .refund && revoked.transaction.revocationDate != nil, "every item revoked")
            #expect(revoked.transaction.revocationType == .refundFull && revoked.transaction.revocationPercentage == 100_000,
                    "every item revoked is the whole purchase revoked")
            let items = revoked.transaction.advancedCommerceInfo?.decoded(as: AdvancedCommerceTransactionInfo.self)?.items ?? []
            #expect(items.map { ($0.refunds ?? []).reduce(0) { $0 + ($1.refundAmount ?? 0) } } == [1000, 3000], "400 + 600 + 0 of a, all of b: never more than paid")
            #expect(try await refund([["SKU": "a", "refundType": "FULL", "refundReason": "OTHER", "revoke": true]]).1.errorCode == 4_030_021)
        }
    }

    @Test("MIGRATION: an In-App Purchase subscription goes on as the generic product under a new original transaction id naming the old one, keeps its period and price, and migrates once")
    func migration() async throws {
        let store = try engine()
        try await application(store).test(.router) { client in
            _ = try await client.execute(uri: "/sim/accounts", method: .post, body: jsonBody(["id": "ann"]))
            let bought = try decode(SimulatedPurchaseAnswer.self, try await client.execute(uri: "/sim/purchases", method: .post, body: encoded(
                SimPurchaseRequest(account: "ann", productId: Self.monthly, withReceipt: false))))
            let old = try #require(bought.transactionId)
            try await store.advanceClock(by: 180 + 1)  // past the free week: paying 4.99 a month
            var seen = await store.notifications().count
            let latest = try #require(try await store.subscriptionStatuses(containing: old).first?.latest)
            let expiry = try #require(latest.expiresDate)
            let migrate: [String: Any] = [
                "requestInfo": requestInfo(), "targetProductId": Self.generic, "taxCode": "C003-00-2",
                "descriptors": ["displayName": "Pro", "description": "Everything"],
                "items": [["SKU": "pro.all", "displayName": "Pro", "description": "Everything"]]]
            var wrong = migrate
            wrong["targetProductId"] = Self.monthly
            #expect(try await call(client, "subscription/migrate", old, wrong).1.errorCode == 4_000_167)
            let migrated = try await call(client, "subscription/migrate", old, migrate)
            #expect(migrated.0 == .ok, "\(migrated.1)")
            let told = try #require(try await told(store, since: &seen).first)
            #expect(told.type == .migration)
            let transaction = told.transaction
            #expect(transaction.productId == Self.generic && transaction.previousOriginalTransactionId == old)
            #expect(transaction.originalTransactionId == transaction.transactionId && transaction.originalTransactionId != old)
            #expect(transaction.expiresDate == expiry, "the period already paid goes on")
            #expect(told.renewal?.renewalPrice == 4990 && told.renewal?.advancedCommerceInfo?.decoded(as: AdvancedCommerceRenewalInfo.self)?.items?.first?.sku == "pro.all")
            var again = migrate
            again["requestInfo"] = requestInfo()
            #expect(try await call(client, "subscription/migrate", old, again).1.errorCode == 4_000_176)
            // Only the migrated series renews now.
            try await store.advanceClock(by: 300)
            let renewals = try await self.told(store, since: &seen)
            #expect(renewals.map(\.type) == [.didRenew] && renewals.first?.transaction.originalTransactionId == transaction.transactionId, "\(renewals.map(\.type))")
            #expect(renewals.first?.transaction.price == 4990 && renewals.first?.transaction.previousOriginalTransactionId == old)
            if let lines = try await AppleLibraryTests.appleVerify([("notification", told.signed)], bundleId: "com.example.iapkit") {
                #expect(lines.first?["notificationType"]?.string == "MIGRATION", "\(lines)")
            }
        }
    }
}

/// Signs in-app requests as the app's server does (the claims of Apple's creator), with the test's key.
struct AdvancedCommerceTestSigner {
    let key: P256.Signing.PrivateKey
    let keyId: String
    let issuerId: String

    func sign(_ request: AdvancedCommerceInAppRequest) throws -> String {
        let claims = OfferSignatureClaims(iss: issuerId, iat: Date().timeIntervalSince1970.rounded(.down), aud: OfferSignatureClaims.advancedCommerceAudience,
                                          bid: "com.example.iapkit", nonce: UUID().uuidString.lowercased(),
                                          request: Base64.standardEncode(Array(try AppStoreJSON.encoder().encode(request))))
        let header = #"{"alg":"ES256","kid":"\#(keyId)","typ":"JWT"}"#
        let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(try JSONEncoder().encode(claims)))
        return input + "." + Base64.urlEncode(try key.signature(for: Array(input.utf8)).rawRepresentation)
    }
}
