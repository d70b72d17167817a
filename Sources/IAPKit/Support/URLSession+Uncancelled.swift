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
    /// Answers over `limit` bytes are refused (``PurchaseFailure/Code/responseTooLarge``) before anything parses them.
    func uncancelledData(for request: URLRequest, limit: Int = 8 << 20) async throws -> (Data, URLResponse) {
        let (data, response) = try await Task { try await self.data(for: request) }.value
        guard data.count <= limit else {
            throw PurchaseFailure(.responseTooLarge, "\(request.url?.path ?? "an answer") sent \(data.count) bytes; the limit is \(limit)")
        }
        return (data, response)
    }
}
