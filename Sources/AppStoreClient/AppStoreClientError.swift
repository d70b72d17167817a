import AppStoreFormats

/// Why a call to Apple (or the simulator) did not give an answer to act on, with a stable `code`.
public struct AppStoreClientError: CodedError {
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Unreachable, timed out, or kept failing with 5xx / 429 / 21005 after every retry: try again later.
        public static let unavailable = Self(rawValue: "apple_unavailable")
        /// Apple refused the request (a 4xx with an error body, or a verifyReceipt status that retrying cannot change).
        public static let rejected = Self(rawValue: "apple_rejected")
        /// The API key was refused (401).
        public static let unauthorized = Self(rawValue: "apple_unauthorized")
        /// The answer was not what Apple's documentation describes.
        public static let invalidResponse = Self(rawValue: "apple_invalid_response")
    }

    public let code: Code
    public let message: String
    /// Apple's error code, for `rejected` Server API answers.
    public let apiErrorCode: APIErrorCode?
    /// verifyReceipt's status, for `rejected` receipts.
    public let receiptStatus: VerifyReceiptStatus?

    public init(_ code: Code, _ message: String, apiErrorCode: APIErrorCode? = nil, receiptStatus: VerifyReceiptStatus? = nil) {
        self.code = code
        self.message = message
        self.apiErrorCode = apiErrorCode
        self.receiptStatus = receiptStatus
    }

}
