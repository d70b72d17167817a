import Foundation
import AppStoreTrust
import HummingbirdTesting
import PurchaseAPI
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

    @Test("The router serves exactly the operations the contract's endpoint table lists (the document's paths), and nothing else beside the dashboard's pages")
    func routesAreTheTable() async throws {
        let services = try await PurchaseServices.open(try LoneServer.configuration(), roots: TrustRoots())
        let router = buildRouter(services)
        // Hummingbird writes a parameter `:name`; the table and the document write `{name}`.
        let served = Set(router.routes.map { route in
            let path = "/" + route.path.description.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
                .joined(separator: "/")
            return "\(route.method.rawValue) \(path)"
        }.filter { !$0.contains(" /dashboard") })
        let listed = Set(APIEndpoint.all.map { "\($0.method.rawValue.uppercased()) \($0.path)" })
        #expect(served.subtracting(listed).isEmpty, "served but not in the contract's table: \(served.subtracting(listed).sorted())")
        #expect(listed.subtracting(served).isEmpty, "in the table (and the document) but not served: \(listed.subtracting(served).sorted())")
        #expect(listed.count == APIEndpoint.all.count, "an operation listed twice")
        try await services.ledger.store.close()
    }
}
