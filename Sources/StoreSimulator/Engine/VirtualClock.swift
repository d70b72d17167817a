import AppStoreFormats
import Foundation

/// The simulator's time: real time plus an offset that tests advance on demand, so nothing ever sleeps.
public final class VirtualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var offset: TimeInterval
    /// Set for a clock that stands still between advances (the history explorer: a replay sees the same times).
    private let frozenAt: Date?

    public init(offset: TimeInterval = 0, frozenAt: Date? = nil) {
        self.offset = offset
        self.frozenAt = frozenAt
    }

    /// The simulated current time.
    public var now: Date { lock.withLock { (frozenAt ?? Date()).addingTimeInterval(offset) } }

    /// Moves simulated time forward (never backward: Apple's clock does not run back).
    public func advance(by seconds: TimeInterval) {
        lock.withLock { offset += max(0, seconds) }
    }

    /// The total advance so far, for persisting.
    public var totalAdvance: TimeInterval { lock.withLock { offset } }
}

/// How long a subscription period lasts in the simulator: Apple's sandbox renewal rates by default.
public struct RenewalRate: Sendable, Hashable {
    /// Seconds one period of each unit lasts.
    public var secondsPerDay: TimeInterval
    public var secondsPerWeek: TimeInterval
    public var secondsPerMonth: TimeInterval
    public var secondsPerYear: TimeInterval

    /// Sandbox's default ("monthly renews every 5 minutes"): 1 week → 3 min, 1 month → 5 min, 1 year → 1 hour.
    /// Days are not in Apple's table; a day is taken as a seventh of a week.
    public static let sandbox = RenewalRate(secondsPerDay: 180.0 / 7, secondsPerWeek: 180, secondsPerMonth: 300, secondsPerYear: 3600)
    /// Production: real calendar lengths (months as 30 days, years as 365).
    public static let realTime = RenewalRate(secondsPerDay: 86_400, secondsPerWeek: 7 * 86_400, secondsPerMonth: 30 * 86_400, secondsPerYear: 365 * 86_400)

    public init(secondsPerDay: TimeInterval, secondsPerWeek: TimeInterval, secondsPerMonth: TimeInterval, secondsPerYear: TimeInterval) {
        self.secondsPerDay = secondsPerDay
        self.secondsPerWeek = secondsPerWeek
        self.secondsPerMonth = secondsPerMonth
        self.secondsPerYear = secondsPerYear
    }

    /// The length of `count` periods.
    public func duration(of period: SubscriptionPeriod, count: Int = 1) -> TimeInterval {
        let unit: TimeInterval = switch period.unit {
        case .day: secondsPerDay
        case .week: secondsPerWeek
        case .month: secondsPerMonth
        case .year: secondsPerYear
        }
        return unit * Double(period.value * count)
    }
}
