import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSession {
    /// `data(for:)` that task cancellation does not reach: the request runs to its answer or its timeout.
    ///
    /// On Linux, cancelling an in-flight `URLSessionTask` can crash inside FoundationNetworking
    /// (`_ProtocolClient.urlProtocol(_:didFailWithError:)`, seen here when `PurchaseClient.stop()` cancelled a poll).
    /// Every request here has a timeout, so letting one finish costs at most that long.
    func uncancelledData(for request: URLRequest) async throws -> (Data, URLResponse) {
        try await Task { try await self.data(for: request) }.value
    }
}
