import AppStoreFormats
import AsyncHTTPClient
import Foundation
import NIOCore

/// Apple's deprecated `verifyReceipt`, the way Apple says to call it: production first; 21007 (a sandbox receipt) →
/// the sandbox URL; 21008 (a production receipt sent to sandbox) → back to production; 21005 and `is-retryable`
/// answers retried with backoff, then reported as Apple being unavailable; 21002 retried, then reported as a rejected
/// receipt.
public struct VerifyReceiptClient: Sendable {
    public static let productionURL = "https://buy.itunes.apple.com/verifyReceipt"
    public static let sandboxURL = "https://sandbox.itunes.apple.com/verifyReceipt"

    public let productionURL: String
    public let sandboxURL: String
    /// The app's shared secret (needed for auto-renewable subscriptions).
    public let sharedSecret: String?
    let transport: Transport

    /// A client for Apple's two URLs, or the simulator's.
    public init(productionURL: String = Self.productionURL, sandboxURL: String = Self.sandboxURL, sharedSecret: String?,
                policy: RetryPolicy = RetryPolicy(), httpClient: HTTPClient = .shared) {
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.sharedSecret = sharedSecret
        transport = Transport(client: httpClient, policy: policy)
    }

    /// Verifies a base64 receipt. Returns Apple's answer when its status is 0; throws `rejected` with the status for
    /// a receipt Apple refuses, `unavailable` when Apple cannot answer.
    /// `once`: the receipt is sent once (to each URL Apple's 21007/21008 name), nothing is retried, and 21002 is
    /// taken at its word — for data that is likely junk (it did not even parse as a receipt), which must not cost
    /// Apple a call per retry.
    public func verify(receiptData: String, excludeOldTransactions: Bool = false, once: Bool = false) async throws -> VerifyReceiptResponse {
        let body = try JSONEncoder().encode(VerifyReceiptRequest(receiptData: receiptData, password: sharedSecret,
                                                                 excludeOldTransactions: excludeOldTransactions ? true : nil))
        var url = productionURL
        var hops = 0
        var temporaryFailures = 0
        let transport = once ? Transport(client: self.transport.client, policy: RetryPolicy(attempts: 1, timeout: self.transport.policy.timeout)) : self.transport
        while true {
            let target = url
            let answer = try await transport.send {
                var request = HTTPClientRequest(url: target)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
                return request
            }
            guard (200..<300).contains(answer.status) else {
                throw AppStoreClientError(.rejected, "verifyReceipt answered HTTP \(answer.status)")
            }
            let response: VerifyReceiptResponse
            do { response = try AppStoreJSON.decoder().decode(VerifyReceiptResponse.self, from: Data(answer.body)) } catch {
                throw AppStoreClientError(.invalidResponse, "verifyReceipt answered JSON of another shape")
            }
            switch response.status {
            case .valid:
                return response
            case .sandboxReceiptSentToProduction where hops < 2:
                url = sandboxURL
                hops += 1
            case .productionReceiptSentToSandbox where hops < 2:
                url = productionURL
                hops += 1
            case _ where response.status.isTemporary || response.isRetryable == true:
                temporaryFailures += 1
                guard temporaryFailures < transport.policy.attempts else {
                    // 21002 is "malformed, or a temporary issue": once retries are spent, the receipt is the likelier cause.
                    let code: AppStoreClientError.Code = response.status == .malformedReceiptData ? .rejected : .unavailable
                    throw AppStoreClientError(code, "verifyReceipt kept answering \(response.status.rawValue)", receiptStatus: response.status)
                }
                try await Task.sleep(for: transport.policy.delay(after: temporaryFailures))
            default:
                throw AppStoreClientError(.rejected, "verifyReceipt refused the receipt with status \(response.status.rawValue)", receiptStatus: response.status)
            }
        }
    }
}
