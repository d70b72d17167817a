import AppStoreFormats
import Foundation
import NIOHTTP1

/// The Retention Messaging API (`/inApps/v1/messaging`, same hosts and key as the Server API): content for Apple's
/// review, default messages, the Get Retention Message URL and its performance test.
extension ServerAPIClient {
    /// Upload Image: a PNG without transparency, 3840 px wide and 160–2160 high (`FULL_SIZE`) or 1024 × 1024 (`BULLET_POINT`).
    public func uploadRetentionImage(_ imageIdentifier: UUID, png: [UInt8], size: ImageSize = .fullSize) async throws {
        _ = try await call(.PUT, "/inApps/v1/messaging/image/\(Self.uuidSegment(imageIdentifier))?imageSize=\(try Self.pathSegment(size.rawValue))",
                           body: png, contentType: "image/png", as: NoContent.self)
    }

    public func deleteRetentionImage(_ imageIdentifier: UUID) async throws {
        _ = try await call(.DELETE, "/inApps/v1/messaging/image/\(Self.uuidSegment(imageIdentifier))", body: nil, as: NoContent.self)
    }

    public func retentionImages() async throws -> GetImageListResponse {
        try await get("/inApps/v1/messaging/image/list", as: GetImageListResponse.self)
    }

    public func uploadRetentionMessage(_ messageIdentifier: UUID, _ message: UploadMessageRequestBody) async throws {
        _ = try await call(.PUT, "/inApps/v1/messaging/message/\(Self.uuidSegment(messageIdentifier))", body: [UInt8](try AppStoreJSON.encoder().encode(message)),
                           as: NoContent.self)
    }

    public func deleteRetentionMessage(_ messageIdentifier: UUID) async throws {
        _ = try await call(.DELETE, "/inApps/v1/messaging/message/\(Self.uuidSegment(messageIdentifier))", body: nil, as: NoContent.self)
    }

    public func retentionMessages() async throws -> GetMessageListResponse {
        try await get("/inApps/v1/messaging/message/list", as: GetMessageListResponse.self)
    }

    /// Configure Default Message: shown for the product and locale when the real-time answer fails or there is none.
    public func configureDefaultRetentionMessage(productId: String, locale: String, messageIdentifier: UUID) async throws {
        let body = try AppStoreJSON.encoder().encode(DefaultConfigurationRequest(messageIdentifier: messageIdentifier))
        _ = try await call(.PUT, try Self.defaultPath(productId, locale), body: [UInt8](body), as: NoContent.self)
    }

    public func deleteDefaultRetentionMessage(productId: String, locale: String) async throws {
        _ = try await call(.DELETE, try Self.defaultPath(productId, locale), body: nil, as: NoContent.self)
    }

    public func defaultRetentionMessage(productId: String, locale: String) async throws -> DefaultConfigurationResponse {
        try await get(try Self.defaultPath(productId, locale), as: DefaultConfigurationResponse.self)
    }

    /// Configure Realtime URL: where this environment's App Store calls Get Retention Message (`https://`, ≤ 256 characters).
    public func configureRealtimeURL(_ url: String) async throws {
        let body = try AppStoreJSON.encoder().encode(RealtimeUrlRequest(realtimeURL: url))
        _ = try await call(.PUT, "/inApps/v1/messaging/realtime/url", body: [UInt8](body), as: NoContent.self)
    }

    public func deleteRealtimeURL() async throws {
        _ = try await call(.DELETE, "/inApps/v1/messaging/realtime/url", body: nil, as: NoContent.self)
    }

    public func realtimeURL() async throws -> RealtimeUrlResponse {
        try await get("/inApps/v1/messaging/realtime/url", as: RealtimeUrlResponse.self)
    }

    /// Initiate Performance Test (sandbox): requests for an active subscription sent to the sandbox URL.
    public func initiatePerformanceTest(originalTransactionId: String) async throws -> PerformanceTestResponse {
        let body = try AppStoreJSON.encoder().encode(PerformanceTestRequest(originalTransactionId: originalTransactionId))
        return try await call(.POST, "/inApps/v1/messaging/performanceTest", body: [UInt8](body), as: PerformanceTestResponse.self)
    }

    public func performanceTestResult(_ requestId: String) async throws -> PerformanceTestResultResponse {
        try await get("/inApps/v1/messaging/performanceTest/result/\(try Self.pathSegment(requestId))", as: PerformanceTestResultResponse.self)
    }

    static func uuidSegment(_ id: UUID) -> String { id.lowercasedString }

    /// Product ids may hold dots; locales a hyphen. Nothing else that could leave the path segment.
    static func defaultPath(_ productId: String, _ locale: String) throws -> String {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "._-"))
        guard !productId.isEmpty, productId.utf8.count <= 200, productId.unicodeScalars.allSatisfy({ allowed.contains($0) }), productId != ".", productId != ".." else {
            throw AppStoreClientError(.rejected, "not a product id: \(productId.prefix(40))")
        }
        return "/inApps/v1/messaging/default/\(productId)/\(try pathSegment(locale))"
    }
}
