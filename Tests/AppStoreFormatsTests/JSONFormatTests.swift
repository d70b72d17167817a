import AppStoreFormats
import Foundation
import Testing

@Suite("JSON formats: JWS payloads, verifyReceipt, Server API")
struct JSONFormatTests {
    @Test("Unknown enum values are kept, not rejected")
    func unknownEnumsKept() throws {
        let json = #"{"type":"Super-Renewable","offerType":9,"environment":"Mars","inAppOwnershipType":"BORROWED","transactionReason":"GIFT"}"#
        let payload = try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(json.utf8), what: "test")
        #expect(payload.type?.rawValue == "Super-Renewable")
        #expect(payload.offerType?.rawValue == 9)
        #expect(payload.environment?.rawValue == "Mars")
        let again = try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: AppStoreJSON.encoder().encode(payload), what: "test")
        #expect(again == payload)
    }

    @Test("Advanced Commerce and commitment info (API 1.21) are kept as Apple sent them, nested objects included")
    func unmodelledObjectsKept() throws {
        let json = #"{"advancedCommerceInfo":{"requestReferenceId":"ref-1","taxCode":"C003-00-2","items":[{"SKU":"sku.one","price":4990,"refunds":[]}],"estimatedTax":123,"descriptors":{"displayName":"One"}},"commitmentInfo":{"commitmentExpiresDate":1769817600000,"commitmentPrice":47880,"billingPeriodNumber":3},"billingPlanType":"MONTHLY","transactionId":"2000000000000001"}"#
        let payload = try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(json.utf8), what: "test")
        #expect(payload.advancedCommerceInfo?["requestReferenceId"] == .string("ref-1"))
        #expect(payload.advancedCommerceInfo?["items"] == .array([.object(["SKU": .string("sku.one"), "price": .number(4990), "refunds": .array([])])]))
        #expect(payload.commitmentInfo?["billingPeriodNumber"] == .number(3))
        let written = try AppStoreJSON.encoder(sortedKeys: true).encode(payload)
        let original = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary
        #expect(try JSONSerialization.jsonObject(with: written) as? NSDictionary == original, "nothing lost in writing it back")
        let renewal = try AppStoreJSON.decode(JWSRenewalInfoDecodedPayload.self, from: Array(#"{"commitmentInfo":{"commitmentRenewalPrice":47880},"advancedCommerceInfo":{"consistencyToken":"abc"}}"#.utf8), what: "test")
        #expect(renewal.commitmentInfo?["commitmentRenewalPrice"] == .number(47880) && renewal.advancedCommerceInfo?["consistencyToken"] == .string("abc"))
        #expect(NotificationTypeV2(rawValue: "PRICE_CHANGE") == .priceChange)
        // Hostile nesting is refused, never a stack overflow.
        let deep = #"{"advancedCommerceInfo":"# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"
        #expect(throws: (any Error).self) { try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(deep.utf8), what: "test") }
    }

    @Test("verifyReceipt's _ms dates write back to the same milliseconds (rounding down once wrote 2097610912 as …911)")
    func legacyMillisecondsRoundTrip() throws {
        let json = #"{"status":0,"latest_receipt_info":[{"original_purchase_date_ms":"2097610912","purchase_date_ms":"1594755206999"}]}"#
        let response = try AppStoreJSON.decode(VerifyReceiptResponse.self, from: Array(json.utf8), what: "test")
        let written = String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(response), as: UTF8.self)
        #expect(written.contains(#""original_purchase_date_ms":"2097610912""#), "\(written)")
        #expect(written.contains(#""purchase_date_ms":"1594755206999""#))
    }

    @Test("A date beyond the clamp writes its Pacific time at the clamp's offset, so writing it again gives the same text (found by the fuzzer)")
    func clampedPacificDate() throws {
        // 1.59 × 10¹⁵ ms falls in Pacific standard time, the 10¹⁵ ms it is clamped to in daylight saving time.
        let json = #"{"status":0,"latest_receipt_info":[{"expires_date_ms":"1594764475386000"}]}"#
        let response = try AppStoreJSON.decode(VerifyReceiptResponse.self, from: Array(json.utf8), what: "test")
        let once = try AppStoreJSON.encoder(sortedKeys: true).encode(response)
        let twice = try AppStoreJSON.encoder(sortedKeys: true).encode(try AppStoreJSON.decode(VerifyReceiptResponse.self, from: Array(once), what: "test"))
        #expect(once == twice, "\(String(decoding: once, as: UTF8.self))")
        #expect(String(decoding: once, as: UTF8.self).contains("33658-09-26 18:46:40 America/Los_Angeles"))
    }

    @Test("Fractional millisecond dates decode; encoding writes whole milliseconds and omits absent fields")
    func datesAndOmission() throws {
        let json = #"{"purchaseDate":1697679936049.7297,"signedDate":1739161772561,"quantity":1}"#
        let payload = try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(json.utf8), what: "test")
        #expect(abs(payload.purchaseDate!.timeIntervalSince1970 - 1_697_679_936.0497297) < 1e-6)
        #expect(payload.signedDate == Date(timeIntervalSince1970: 1_739_161_772.561))
        let encoded = String(decoding: try AppStoreJSON.encoder(sortedKeys: true).encode(payload), as: UTF8.self)
        #expect(encoded == #"{"purchaseDate":1697679936050,"quantity":1,"signedDate":1739161772561}"#)
    }

    @Test("UUIDs are written in lower case as Apple writes them, and read in either case")
    func uuidsLowerCase() throws {
        let token = try #require(UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138"))
        var payload = JWSTransactionDecodedPayload()
        payload.appAccountToken = token
        payload.deviceVerificationNonce = token
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.appAccountToken = token
        for encoded in [try AppStoreJSON.encoder(sortedKeys: true).encode(payload), try AppStoreJSON.encoder().encode(renewal),
                        try AppStoreJSON.encoder().encode(UpdateAppAccountTokenRequest(appAccountToken: token))] {
            let text = String(decoding: encoded, as: UTF8.self)
            #expect(text.contains("7e3fb20b-4cdb-47cc-936d-99d65f608138"), "\(text)")
            #expect(!text.contains("7E3FB20B"), "\(text)")
        }
        let upper = #"{"appAccountToken":"7E3FB20B-4CDB-47CC-936D-99D65F608138"}"#
        #expect(try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(upper.utf8), what: "t").appAccountToken == token)
        let lower = #"{"appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138"}"#
        #expect(try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(lower.utf8), what: "t").appAccountToken == token)
    }

    @Test("A notification names its environment from data, summary or external purchase token")
    func notificationEnvironment() throws {
        let withData = try AppStoreJSON.decode(ResponseBodyV2DecodedPayload.self, from: Array(#"{"notificationType":"DID_RENEW","data":{"environment":"Sandbox","bundleId":"a","appAppleId":1}}"#.utf8), what: "t")
        #expect(withData.environment == .sandbox)
        #expect(withData.notificationType == .didRenew)
        let summary = try AppStoreJSON.decode(ResponseBodyV2DecodedPayload.self, from: Array(#"{"notificationType":"RENEWAL_EXTENSION","subtype":"SUMMARY","summary":{"environment":"Production","bundleId":"b","succeededCount":3}}"#.utf8), what: "t")
        #expect(summary.environment == .production)
        #expect(summary.bundleId == "b")
        let token = try AppStoreJSON.decode(ResponseBodyV2DecodedPayload.self, from: Array(#"{"notificationType":"EXTERNAL_PURCHASE_TOKEN","externalPurchaseToken":{"externalPurchaseId":"SANDBOX_123","bundleId":"c"}}"#.utf8), what: "t")
        #expect(token.environment == .sandbox)
    }

    @Test("verifyReceipt quirks: numbers and booleans as strings, hyphenated is-retryable, date triples")
    func verifyReceiptQuirks() throws {
        let json = #"""
        {"status":21100,"is-retryable":"true","environment":"Sandbox",
         "latest_receipt_info":[{"quantity":"1","transaction_id":"7","is_trial_period":"false","is_upgraded":"true",
           "purchase_date":"2020-07-14 19:36:40 Etc/GMT","purchase_date_ms":"1594755400000","purchase_date_pst":"2020-07-14 12:36:40 America/Los_Angeles"}],
         "pending_renewal_info":[{"auto_renew_status":"0","is_in_billing_retry_period":"1","expiration_intent":"2"}]}
        """#
        let response = try AppStoreJSON.decode(VerifyReceiptResponse.self, from: Array(json.utf8), what: "t")
        #expect(response.status.rawValue == 21100)
        #expect(response.status.isTemporary)
        #expect(response.isRetryable == true)
        let info = try #require(response.latestReceiptInfo?.first)
        #expect(info.quantity == 1)
        #expect(info.isTrialPeriod == false)
        #expect(info.isUpgraded == true)
        #expect(info.purchaseDate == Date(timeIntervalSince1970: 1_594_755_400))
        #expect(response.pendingRenewalInfo?.first?.autoRenewStatus == false)
        #expect(response.pendingRenewalInfo?.first?.isInBillingRetryPeriod == true)

        let encoded = try JSONSerialization.jsonObject(with: AppStoreJSON.encoder().encode(response)) as! [String: Any]
        #expect(encoded["is-retryable"] as? Bool == true)
        let element = (encoded["latest_receipt_info"] as! [[String: Any]])[0]
        #expect(element["quantity"] as? String == "1")
        #expect(element["purchase_date_ms"] as? String == "1594755400000")
        #expect(element["purchase_date_pst"] as? String == "2020-07-14 12:36:40 America/Los_Angeles")
        #expect(element["is_upgraded"] as? String == "true")
        #expect((encoded["pending_renewal_info"] as! [[String: Any]])[0]["auto_renew_status"] as? String == "0")
    }

    @Test("A verifyReceipt request uses Apple's hyphenated keys")
    func verifyReceiptRequest() throws {
        let request = VerifyReceiptRequest(receiptData: "MIIT", password: "s3cret", excludeOldTransactions: true)
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as! [String: Any]
        #expect(object["receipt-data"] as? String == "MIIT")
        #expect(object["exclude-old-transactions"] as? Bool == true)
        #expect(try JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(#"{"receipt-data":"x","exclude-old-transactions":"true"}"#.utf8)).excludeOldTransactions == true)
    }

    @Test("Server API error bodies keep unknown codes and map to their HTTP status")
    func apiErrors() throws {
        let body = try AppStoreJSON.decode(APIErrorBody.self, from: Array(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#.utf8), what: "t")
        #expect(body.errorCode == .transactionIdNotFound)
        #expect(body.httpStatus == 404)
        let unknown = try AppStoreJSON.decode(APIErrorBody.self, from: Array(#"{"errorCode":4299999,"errorMessage":"new"}"#.utf8), what: "t")
        #expect(unknown.errorCode.rawValue == 4_299_999)
        #expect(unknown.httpStatus == 429)
        let history = try AppStoreJSON.decode(HistoryResponse.self, from: Array(#"{"revision":"r1","hasMore":true,"environment":"Sandbox","signedTransactions":["a.b.c"]}"#.utf8), what: "t")
        #expect(history.hasMore == true)
        #expect(history.signedTransactions == ["a.b.c"])
    }

    @Test("A malformed payload is a typed error naming the field")
    func malformedIsTyped() {
        #expect(throws: AppStoreError(.malformed, "")) {
            _ = try AppStoreJSON.decode(JWSTransactionDecodedPayload.self, from: Array(#"{"quantity":"many"}"#.utf8), what: "t")
        }
    }
}
