import Foundation
import Testing

@Suite("External purchase token notifications reach the server and are kept")
struct ExternalPurchaseNotificationTests {
    @Test("EXTERNAL_PURCHASE_TOKEN (no data, the token instead) is verified, stored once and listed for the operator")
    func stored() async throws {
        try await System.run { system in
            let created = try await system.device(.post, "/sim/external-purchase-tokens", ["tokenType": "ACQUISITION"])
            #expect((created["externalPurchaseId"] as? String)?.hasPrefix("SANDBOX") == true)
            let listed = try #require(try await system.admin(.get, "/admin/notifications?payload=true").1["notifications"] as? [[String: Any]])
            let token = try #require(listed.first { $0["notificationType"] as? String == "EXTERNAL_PURCHASE_TOKEN" }, "\(listed)")
            #expect(token["subtype"] as? String == "CREATED")
            #expect((token["signedPayload"] as? String)?.isEmpty == false)
            // Ten sandbox days without a report: UNREPORTED follows, also kept.
            try await system.advance(by: 3 * 60 * 10 / 7 + 5)
            let later = try #require(try await system.admin(.get, "/admin/notifications").1["notifications"] as? [[String: Any]])
            #expect(later.filter { $0["notificationType"] as? String == "EXTERNAL_PURCHASE_TOKEN" }.compactMap { $0["subtype"] as? String }.sorted() == ["CREATED", "UNREPORTED"])
        }
    }
}
