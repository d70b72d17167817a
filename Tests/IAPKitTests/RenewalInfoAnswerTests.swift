import Foundation
import IAPKit
import Testing

/// The SDK reads a subscription's renewal state typed (issue 32), and answers of servers before it still read.
@Suite("Renewal info in entitlement answers, as the SDK reads them")
struct RenewalInfoAnswerTests {
    @Test("An answer without renewalInfo (an older server's) decodes with none; one with it decodes typed under Apple's names")
    func typedAndTolerant() throws {
        let older = #"""
        {"accountId": "ada", "balances": {}, "entitlements": [
           {"name": "pro", "productId": "pro.monthly", "transactionId": "2", "originalTransactionId": "1", "expiresAt": 1800000000000,
            "state": "active", "environment": "Production"}]}
        """#
        let old = try APIJSON.decoder().decode(EntitlementsReply.self, from: Data(older.utf8))
        let plan = try #require(old.entitlements.entitlement("pro"))
        #expect(plan.renewalInfo == nil && plan.willAutoRenew == nil)

        let newer = #"""
        {"accountId": "ada", "balances": {}, "entitlements": [
           {"name": "pro", "productId": "pro.monthly", "transactionId": "2", "originalTransactionId": "1", "expiresAt": 1800000000000,
            "state": "gracePeriod", "environment": "Production",
            "renewalInfo": {"autoRenewStatus": 0, "autoRenewProductId": "pro.yearly", "expirationIntent": 2,
                            "gracePeriodExpiresDate": 1800600000000, "isInBillingRetryPeriod": true, "priceIncreaseStatus": 0,
                            "signedDate": 1799000000000, "someFieldAppleAddsLater": "x"}},
           {"name": "premium", "productId": "premium", "transactionId": "3", "state": "active", "environment": "Production"}]}
        """#
        let reply = try APIJSON.decoder().decode(EntitlementsReply.self, from: Data(newer.utf8))
        let info = try #require(reply.entitlements.entitlement("pro")?.renewalInfo)
        #expect(info.autoRenewStatus == 0 && info.autoRenewProductId == "pro.yearly")
        #expect(info.expirationIntent == 2 && info.isInBillingRetryPeriod == true && info.priceIncreaseStatus == 0)
        #expect(info.gracePeriodExpiresDate == Date(timeIntervalSince1970: 1_800_600_000))
        #expect(info.signedDate == Date(timeIntervalSince1970: 1_799_000_000))
        #expect(reply.entitlements.entitlement("pro")?.willAutoRenew == false && info.awaitsPriceIncreaseConsent)
        #expect(reply.entitlements.entitlement("premium")?.renewalInfo == nil)
    }

    @Test("A renewalInfo a newer server shapes otherwise is dropped, not a failed answer: the entitlement still grants")
    func malformedRenewalInfoDoesNotFailTheAnswer() throws {
        let json = #"""
        {"accountId": "ada", "balances": {}, "entitlements": [
           {"name": "pro", "productId": "pro.monthly", "transactionId": "2", "state": "active", "environment": "Production",
            "renewalInfo": {"autoRenewStatus": "ON"}}]}
        """#
        let reply = try APIJSON.decoder().decode(EntitlementsReply.self, from: Data(json.utf8))
        #expect(reply.entitlements.has("pro"))
        #expect(reply.entitlements.entitlement("pro")?.renewalInfo == nil)
    }
}
