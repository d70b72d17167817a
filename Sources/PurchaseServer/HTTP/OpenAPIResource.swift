import Foundation
import Hummingbird
import PurchaseAPI

/// `GET /openapi.json`: the document `iap openapi` generates from the contract's types (docs/API.md), a resource of this
/// module, read once.
enum OpenAPIResource {
    static let document: Result<ByteBuffer, APIError> = load()

    static func response() throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: try document.get()))
    }

    private static func load() -> Result<ByteBuffer, APIError> {
        let missing = APIError(.notFound, code: .notFound,
                               "the OpenAPI document ships in IAPKit_PurchaseServer.resources beside the server's binary, which is missing")
        #if os(Linux)
        // Bundle.module stops the process when its bundle is missing (a binary installed without the directory SwiftPM
        // writes beside it): this route refuses instead, as AppleRoots does for Apple's roots.
        let directory = Bundle.main.bundleURL.appendingPathComponent("IAPKit_PurchaseServer.resources")
        guard FileManager.default.fileExists(atPath: directory.path) else { return .failure(missing) }
        #endif
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
              let data = FileManager.default.contents(atPath: url.path) else { return .failure(missing) }
        return .success(ByteBuffer(bytes: data))
    }
}
