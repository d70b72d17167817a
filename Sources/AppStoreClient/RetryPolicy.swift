import Foundation

/// How hard a client tries before saying Apple is unavailable: attempts, exponential backoff with jitter capped at
/// `maxDelay`, a `Retry-After` from Apple honoured up to `maxDelay`, and a timeout per attempt.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts per call, the first included.
    public var attempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration
    /// How long one attempt may take.
    public var timeout: Duration

    public init(attempts: Int = 4, baseDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(8), timeout: Duration = .seconds(10)) {
        self.attempts = max(1, attempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.timeout = timeout
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1): Apple's `Retry-After` when it gave one,
    /// otherwise base × 2^(attempt−1) with ±25 % jitter; never more than `maxDelay`.
    public func delay(after attempt: Int, retryAfter: Duration? = nil) -> Duration {
        if let retryAfter { return min(retryAfter, maxDelay) }
        let exponential = baseDelay * (1 << min(attempt - 1, 20))
        let jitter = Double.random(in: 0.75...1.25)
        return min(exponential * jitter, maxDelay)
    }

    /// Reads a `Retry-After` header: delta-seconds, or an HTTP date.
    static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1000)))
    }
}
