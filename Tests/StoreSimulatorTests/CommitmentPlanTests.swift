import AppStoreFormats
import AppStoreTrust
import Foundation
import StoreSimulator
import Testing

@Suite("Monthly plans with a 12-month commitment (API 1.21), as Apple's lifecycle article tells them")
struct CommitmentPlanTests {
    static let plan = "com.revenuecat.sampleapp.monthly.12mocommitment"
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.revenuecat"))

    func engine() throws -> StoreEngine {
        try StoreEngine(catalog: SimulatorCatalog(storeKit: CatalogTests.storeKit(), settings: CatalogSettings(bundleId: "com.revenuecat", appAppleId: 42)),
                        minter: Minter(authority: sharedAuthority))
    }

    struct Told {
        var type: NotificationTypeV2
        var subtype: NotificationSubtype?
        var transaction: JWSTransactionDecodedPayload
        var renewal: JWSRenewalInfoDecodedPayload
        var signedTransaction: String
        var signedRenewal: String
        var period: Int? { transaction.commitmentInfo?.decoded(as: TransactionCommitmentInfo.self)?.billingPeriodNumber }
        var next: RenewalCommitmentInfo? { renewal.commitmentInfo?.decoded(as: RenewalCommitmentInfo.self) }
    }

    func told(_ store: StoreEngine, since seen: inout Int) async throws -> [Told] {
        let all = await store.notifications()
        defer { seen = all.count }
        var result: [Told] = []
        for record in all.dropFirst(seen) {
            let payload = try await verifier.verifyNotification(record.signedPayload).payload
            let signedTransaction = try #require(payload.data?.signedTransactionInfo), signedRenewal = try #require(payload.data?.signedRenewalInfo)
            result.append(Told(type: payload.notificationType!, subtype: payload.subtype, transaction: try await verifier.verifyTransaction(signedTransaction).payload,
                               renewal: try await verifier.verifyRenewalInfo(signedRenewal).payload, signedTransaction: signedTransaction, signedRenewal: signedRenewal))
        }
        return result
    }

    @Test("Twelve monthly payments, numbered; cancelling keeps them coming (commitmentAutoRenewStatus off, autoRenewStatus on) and EXPIRED follows the twelfth")
    func cancelledCommitment() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("mia")
        guard case .purchased(_, let original, _) = try await store.purchase(account: "mia", device: "d", productId: Self.plan, billingPlanType: .monthly) else {
            Issue.record("purchase failed"); return
        }
        let first = try #require(try await told(store, since: &seen).first)
        #expect(first.type == .subscribed && first.transaction.transactionId == original)
        #expect(first.transaction.billingPlanType == .monthly && first.transaction.price == 500, "0.50 a month")
        let info = try #require(first.transaction.commitmentInfo?.decoded(as: TransactionCommitmentInfo.self))
        #expect(info.billingPeriodNumber == 1 && info.totalBillingPeriods == 12 && info.commitmentPrice == 6000)
        let month = first.transaction.expiresDate!.timeIntervalSince(first.transaction.purchaseDate!)
        #expect(abs(month - 300) < 1, "a sandbox month")
        #expect(abs(info.commitmentExpiresDate!.timeIntervalSince(first.transaction.purchaseDate!) - 3600) < 1)
        #expect(first.renewal.renewalBillingPlanType == .monthly && first.renewal.autoRenewStatus == .on)
        #expect(first.next?.commitmentAutoRenewStatus == .on && first.next?.commitmentRenewalDate == info.commitmentExpiresDate)

        try await store.advanceClock(by: 4 * 300)
        #expect(try await told(store, since: &seen).map { $0.period } == [2, 3, 4, 5])
        #expect(try await store.setAutoRenew(originalTransactionId: original, enabled: false))
        let cancelled = try #require(try await told(store, since: &seen).first)
        #expect(cancelled.type == .didChangeRenewalStatus && cancelled.subtype == .autoRenewDisabled)
        #expect(cancelled.renewal.autoRenewStatus == .on && cancelled.next?.commitmentAutoRenewStatus == .off, "the payments committed to continue")
        try await store.advanceClock(by: 8 * 300)
        let rest = try await told(store, since: &seen)
        #expect(rest.map(\.type) == Array(repeating: .didRenew, count: 7) + [.expired], "\(rest.map(\.type))")
        #expect(rest.dropLast().map { $0.period } == Array(6...12))
        #expect(rest.last?.subtype == .voluntary)

        // Apple's own library takes the commitment's payloads.
        if let lines = try await AppleLibraryTests.appleVerify([("transaction", rest[0].signedTransaction), ("renewal", rest[0].signedRenewal)], bundleId: "com.revenuecat") {
            #expect(lines.first?["commitmentInfo"]?["billingPeriodNumber"]?.int == 6, "\(lines)")
            #expect(lines.last?["commitmentInfo"]?["commitmentAutoRenewStatus"]?.int == 0, "\(lines)")
        }
    }

    @Test("A kept commitment starts again at payment 1; paid up front, the year is one period with no commitment; no monthly plan, no monthly purchase")
    func keptAndUpfront() async throws {
        let store = try engine()
        var seen = 0
        try await store.createAccount("kai")
        guard case .purchased = try await store.purchase(account: "kai", device: "d", productId: Self.plan, billingPlanType: .monthly) else { Issue.record("failed"); return }
        try await store.advanceClock(by: 12 * 300)
        let renewals = try await told(store, since: &seen).dropFirst()
        #expect(renewals.map { $0.period } == Array(2...12) + [1], "\(renewals.map { $0.period })")
        let again = try #require(renewals.last?.transaction.commitmentInfo?.decoded(as: TransactionCommitmentInfo.self))
        #expect(abs(again.commitmentExpiresDate!.timeIntervalSince(renewals.last!.transaction.purchaseDate!) - 3600) < 1, "a new 12 months")

        try await store.createAccount("uma")
        guard case .purchased = try await store.purchase(account: "uma", device: "d", productId: Self.plan) else { Issue.record("failed"); return }
        let upfront = try #require(try await told(store, since: &seen).first)
        #expect(upfront.transaction.billingPlanType == .billedUpfront && upfront.transaction.commitmentInfo == nil)
        #expect(upfront.renewal.renewalBillingPlanType == .billedUpfront && upfront.renewal.commitmentInfo == nil)
        #expect(upfront.transaction.offerDiscountType == .freeTrial, "the up-front plan's introductory month (a monthly plan takes none in the simulator)")
        #expect(try await store.purchase(account: "uma", device: "d", productId: "com.revenuecat.monthly_4.99.1_week_intro", billingPlanType: .monthly)
                == .failed(reason: "com.revenuecat.monthly_4.99.1_week_intro has no MONTHLY billing plan"))
    }
}
