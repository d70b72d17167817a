import Foundation

/// How far Apple's clock runs ahead of this server's, as far as Apple's own signatures show, for the operator
/// (`iapkit_apple_clock_lead_seconds`). What Apple signed at `signedDate` reaches the server no earlier than that, so a
/// server clock reading earlier is behind by at least the difference. Entitlements do not depend on it: each record is
/// its own evidence (`EntitlementRules.startsBy`). A clock *ahead* of Apple's looks the same as network delay and
/// shows as 0 or less.
///
/// The figure is the largest lead seen in the current five-minute slot of the server's clock and the one before it.
public final class AppleClock: @unchecked Sendable {
    static let slot: TimeInterval = 300

    private let lock = NSLock()
    private var currentSlot = Int64.min
    private var currentLead = -Double.infinity
    private var previousLead = -Double.infinity

    public init() {}

    /// Apple signed something at `signedDate` that this server received at `local` (its own clock). Returns the
    /// largest lead seen lately.
    @discardableResult
    public func observe(signedDate: Date, at local: Date) -> TimeInterval {
        lock.withLock {
            move(to: local)
            currentLead = max(currentLead, signedDate.timeIntervalSince(local))
            return max(currentLead, previousLead)
        }
    }

    /// The largest lead seen in this slot and the one before (nil: nothing Apple signed arrived in them).
    public func lead(at local: Date) -> TimeInterval? {
        lock.withLock {
            move(to: local)
            let lead = max(currentLead, previousLead)
            return lead.isFinite ? lead : nil
        }
    }

    private func move(to local: Date) {
        let slot = Int64((local.timeIntervalSince1970 / Self.slot).rounded(.down))
        guard slot != currentSlot else { return }
        // The next slot keeps this one as its previous; a later one, or a clock set back, starts afresh.
        previousLead = slot == currentSlot &+ 1 ? currentLead : -.infinity
        currentLead = -.infinity
        currentSlot = slot
    }
}
