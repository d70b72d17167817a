import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One HTTP exchange with retries: network failures, timeouts, 429 and 5xx are retried by the policy; any other
/// status is the caller's to judge.
struct Transport: Sendable {
    let client: HTTPClient
    let policy: RetryPolicy
    /// Largest answer read (Apple's largest, a full history page or verifyReceipt with many transactions, is far smaller).
    let maxResponseBytes = 8 << 20

    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    /// Sends what `makeRequest` builds (called again for each attempt, e.g. to refresh a token).
    func send(_ makeRequest: @Sendable () throws -> HTTPClientRequest) async throws -> Answer {
        var lastProblem = "no attempt made"
        for attempt in 1...policy.attempts {
            var retryAfter: Duration?
            do {
                let response = try await client.execute(try makeRequest(), timeout: .milliseconds(Int64(policy.timeout / .milliseconds(1))))
                let body = Array(try await response.body.collect(upTo: maxResponseBytes).readableBytesView)
                let status = Int(response.status.code)
                guard status == 429 || (500...599).contains(status) else { return Answer(status: status, headers: response.headers, body: body) }
                lastProblem = "HTTP \(status)"
                retryAfter = RetryPolicy.retryAfter(response.headers.first(name: "Retry-After"))
            } catch let error as AppStoreClientError {
                throw error
            } catch {
                lastProblem = "\(error)"
            }
            if attempt < policy.attempts { try await Task.sleep(for: policy.delay(after: attempt, retryAfter: retryAfter)) }
        }
        throw AppStoreClientError(.unavailable, "no answer after \(policy.attempts) attempts: \(lastProblem)")
    }
}
