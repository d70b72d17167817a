import AppStoreFormats
import Foundation
@testable import PurchaseLedger
import Testing

/// A device's renewal info carries no status: were it to date the series' status, that status would look later than
/// Apple signed it (the seeded history explorer's seed 109 found the loss this causes). It is dated apart.
@Suite("A device's renewal info never dates the App Store's status later")
struct DeviceRenewalStatusTests {
    @Test("A refund reversed without its notification: a device's later renewal info does not make the old revoked status outdate the period Apple signed again",
          arguments: StoreKind.allCases)
    func revokedStatusStaysOlder(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("rev-")
        let start = Date().addingTimeInterval(-600)
        let plan = transaction(Demo.monthly, type: .autoRenewableSubscription, purchased: start, expires: start.addingTimeInterval(86_400))
        _ = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: plan, source: .signedTransaction))

        // Apple refunds the period (REFUND, status revoked), then reverses the refund; REFUND_REVERSED never arrives,
        // but the device uploads the period as Apple signs it now, unrevoked.
        var refunded = plan
        refunded.revocationDate = start.addingTimeInterval(60)
        refunded.signedDate = start.addingTimeInterval(60)
        var renewal = JWSRenewalInfoDecodedPayload()
        renewal.originalTransactionId = plan.originalTransactionId
        renewal.productId = Demo.monthly
        renewal.autoRenewProductId = Demo.monthly
        renewal.autoRenewStatus = .on
        renewal.environment = .sandbox
        renewal.signedDate = start.addingTimeInterval(60)
        var refund = NotificationEvent(notificationUUID: uniqueId(), type: .refund, subtype: nil, signedDate: start.addingTimeInterval(60),
                                       signedPayload: "x", transaction: refunded, renewal: renewal)
        refund.status = .revoked
        _ = try await ledger.apply(refund)
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro") == nil, "refunded")
        var reinstated = plan
        reinstated.signedDate = start.addingTimeInterval(120)
        _ = try await ledger.submit(PurchaseSubmission(accountId: account, transaction: reinstated, source: .signedTransaction))
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro") != nil, "Apple signed the period again, unrevoked")

        // The device's renewal info, signed later still: it says nothing of the status, so it must not date it.
        var device = renewal
        device.autoRenewStatus = .off
        device.signedDate = start.addingTimeInterval(180)
        #expect(try await ledger.applyDeviceRenewalInfo(device, accountId: account) == .applied)
        let shown = try await ledger.entitlements(accountId: account).entitlement("pro")
        #expect(shown != nil, "the reinstated period still grants")
        #expect(shown?.renewal?.autoRenewStatus == .off, "the device's renewal info is shown")

        // Apple's REFUND_REVERSED, signed before the device's renewal info and delivered after it: its status still applies.
        var reversalRenewal = renewal
        reversalRenewal.signedDate = start.addingTimeInterval(150)
        var reversal = NotificationEvent(notificationUUID: uniqueId(), type: .refundReversed, subtype: nil, signedDate: start.addingTimeInterval(150),
                                         signedPayload: "x", transaction: reinstated, renewal: reversalRenewal)
        reversal.status = .active
        _ = try await ledger.apply(reversal)
        #expect(try await ledger.series(originalTransactionId: plan.originalTransactionId ?? "")?.status?.status == .active,
                "the status Apple signed before the device's renewal info is not refused as older")
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro")?.renewal?.autoRenewStatus == .off,
                "and the device's later renewal info stays shown: the older news' auto-renew on does not replace it")
        #expect(try await ledger.entitlements(accountId: account).entitlement("pro") != nil)
    }
}
