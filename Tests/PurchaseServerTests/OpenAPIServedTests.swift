import Foundation
import HummingbirdTesting
import PurchaseServer
import Testing

@Suite("GET /openapi.json serves the generated document kept in the repository", .timeLimit(.minutes(3)))
struct OpenAPIServedTests {
    @Test("The body is Sources/PurchaseServer/Resources/openapi.json byte for byte, as JSON, to anyone")
    func served() async throws {
        let kept = try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/PurchaseServer/Resources/openapi.json"))
        #expect(kept.count > 10_000, "the generated document, not a placeholder")
        try await LoneServer.run(try LoneServer.configuration()) { client async throws in
            for _ in 0..<2 {
                let response = try await client.execute(uri: "/openapi.json", method: .get)
                #expect(response.status == .ok && response.headers[.contentType] == "application/json")
                #expect(Data(buffer: response.body) == kept, "the server serves the resource the build copied: rebuild after `iap openapi`")
            }
        }
    }
}
