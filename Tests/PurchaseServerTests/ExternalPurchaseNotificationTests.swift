import Foundation
import IAPTestSupport
import PurchaseAPI
import Testing

@Suite("External purchase token notifications reach the server and are kept")
struct ExternalPurchaseNotificationTests {
    @Test("EXTERNAL_PURCHASE_TOKEN (no data, the token instead) is verified, stored once and listed for the operator")
    func stored() async throws {
        try await System.run { system in
            let created = try decode(SimExternalPurchaseToken.self, await system.device(.post, "/sim/external-purchase-tokens", ["tokenType": "ACQUISITION"]))
            #expect(created.externalPurchaseId?.hasPrefix("SANDBOX") == true)
            let listed = try decode(NotificationsReply.self, await system.admin(.get, "/admin/notifications?payload=true").1).notifications
            let token = try #require(listed.first { $0.notificationType == "EXTERNAL_PURCHASE_TOKEN" }, "\(listed)")
            #expect(token.subtype == "CREATED")
            #expect(token.signedPayload?.isEmpty == false)
            // Ten sandbox days without a report: UNREPORTED follows, also kept.
            try await system.advance(by: 3 * 60 * 10 / 7 + 5)
            let later = try decode(NotificationsReply.self, await system.admin(.get, "/admin/notifications").1).notifications
            #expect(later.filter { $0.notificationType == "EXTERNAL_PURCHASE_TOKEN" }.compactMap(\.subtype).sorted() == ["CREATED", "UNREPORTED"])
        }
    }
}
