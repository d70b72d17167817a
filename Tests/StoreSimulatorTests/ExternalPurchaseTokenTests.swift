import AppStoreFormats
import AppStoreTrust
import Foundation
import StoreSimulator
import Testing

@Suite("External purchase tokens: CREATED, monthly reminders and UNREPORTED, as Apple sends them")
struct ExternalPurchaseTokenTests {
    let verifier = SignedDataVerifier(.init(roots: try! simulatorRoots(), bundleId: "com.example.iapkit"))

    /// The notifications since `seen`, verified: subtype and token.
    func told(_ store: StoreEngine, since seen: inout Int) async throws -> [(NotificationSubtype?, ExternalPurchaseToken?, String)] {
        let all = await store.notifications()
        defer { seen = all.count }
        var result: [(NotificationSubtype?, ExternalPurchaseToken?, String)] = []
        for record in all.dropFirst(seen) {
            let payload = try await verifier.verifyNotification(record.signedPayload).payload
            #expect(payload.notificationType == .externalPurchaseToken && payload.data == nil, "no data beside the token")
            result.append((payload.subtype, payload.externalPurchaseToken, record.signedPayload))
        }
        return result
    }

    @Test("A custom-link token: CREATED at once, UNREPORTED after 10 days without a report, ACTIVE_TOKEN_REMINDER each month it is active; a reported token gets no UNREPORTED")
    func lifecycle() async throws {
        let store = try StoreEngine(catalog: SimulatorCatalog(storeKit: nil, settings: .demo), minter: Minter(authority: sharedAuthority))
        var seen = 0
        let id = try await store.createExternalPurchaseToken(tokenType: .acquisition)
        #expect(id.hasPrefix("SANDBOX"), "sandbox ids say so: servers tell the environment by it")
        let created = try await told(store, since: &seen)
        #expect(created.map(\.0) == [.created])
        let token = try #require(created.first?.1)
        #expect(token.externalPurchaseId == id && token.tokenType == .acquisition && token.bundleId == "com.example.iapkit" && token.appAppleId == 1_234_567_890)
        #expect(token.tokenExpirationDate != nil && token.tokenCreationDate != nil)

        let plain = try await store.createExternalPurchaseToken()
        #expect(try await told(store, since: &seen).isEmpty, "Apple announces only custom-link tokens")
        #expect(try await store.reportExternalPurchaseToken(plain))
        #expect(try await !store.reportExternalPurchaseToken("nope"))

        // Sandbox days are a seventh of a 3-minute week; a month is 5 minutes.
        try await store.advanceClock(by: 3 * 60 * 10 / 7 + 5)
        let unreported = try await told(store, since: &seen)
        #expect(unreported.map(\.0) == [.unreported] && unreported.first?.1?.externalPurchaseId == id, "only the unreported one")
        try await store.advanceClock(by: 5 * 60)
        #expect(try await told(store, since: &seen).map(\.0) == [.activeTokenReminder])
        // Past its three months: no more reminders.
        try await store.advanceClock(by: 20 * 60)
        #expect(try await told(store, since: &seen).map(\.0) == [.activeTokenReminder], "the second month's; none at or after expiry")

        // Apple's own verifier takes them (its 3.1.2 keeps CREATED as a raw subtype).
        if let lines = try await AppleLibraryTests.appleVerify([("notification", created[0].2), ("notification", unreported[0].2)], bundleId: "com.example.iapkit") {
            #expect(lines.allSatisfy { $0["error"] == nil && $0["notificationType"]?.string == "EXTERNAL_PURCHASE_TOKEN" }, "\(lines)")
        }
    }
}
