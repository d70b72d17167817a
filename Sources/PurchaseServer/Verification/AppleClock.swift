import Foundation

/// How far Apple's clock is ahead of this server's, as far as Apple's own signatures show. What Apple signed at
/// `signedDate` reaches the server no earlier than that, so a server clock reading earlier is behind by at least the
/// difference. The app's answers judge entitlements at the server's time plus that lead
/// (``PurchaseServer/Services/judgementTime()``): a server whose clock is a minute slow would otherwise answer a purchase
/// made a second ago with what the account owned before it, its `purchaseDate` still "in the future".
///
/// The lead is the largest seen in the last 5 to 10 minutes (a clock put right stops being corrected soon after), and
/// at most ``maximumLead``: a clock further off is the operator's to fix, and `iapkit_apple_clock_lead_seconds` shows it.
/// Only a lead is corrected: a server clock *ahead* of Apple's looks the same as network delay.
public final class AppleClock: @unchecked Sendable {
    public static let maximumLead: TimeInterval = 300
    /// Observations are kept in two buckets of half this length.
    static let memory: TimeInterval = 600

    private let lock = NSLock()
    private var bucketStart = Date.distantPast
    private var currentLead: TimeInterval = 0
    private var previousLead: TimeInterval = 0

    public init() {}

    /// Apple signed something at `signedDate` that this server received at `local` (its own, uncorrected clock).
    /// Returns the largest lead seen now (uncapped, for the gauge).
    @discardableResult
    public func observe(signedDate: Date?, at local: Date) -> TimeInterval {
        lock.withLock {
            rotate(at: local)
            if let signedDate { currentLead = max(currentLead, signedDate.timeIntervalSince(local)) }
            return max(currentLead, previousLead)
        }
    }

    /// The correction to add to the server's clock at `local`: 0 … ``maximumLead`` seconds.
    public func lead(at local: Date) -> TimeInterval {
        lock.withLock {
            rotate(at: local)
            return min(Self.maximumLead, max(0, currentLead, previousLead))
        }
    }

    private func rotate(at local: Date) {
        let elapsed = local.timeIntervalSince(bucketStart)
        guard elapsed >= Self.memory / 2 else { return }
        previousLead = elapsed >= Self.memory ? 0 : currentLead
        currentLead = 0
        bucketStart = local
    }
}
