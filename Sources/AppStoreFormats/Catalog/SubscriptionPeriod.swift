/// A subscription or offer period: a count of days, weeks, months or years.
public struct SubscriptionPeriod: Sendable, Hashable, CustomStringConvertible {
    public enum Unit: String, Sendable, Hashable { case day = "D", week = "W", month = "M", year = "Y" }
    public var value: Int
    public var unit: Unit

    public init(value: Int, unit: Unit) {
        self.value = value
        self.unit = unit
    }

    /// Parses `P1W`, `P3D`, `P1M`, `P6M`, `P1Y`.
    public init?(iso8601 text: String) {
        guard text.hasPrefix("P"), let unit = text.last.flatMap({ Unit(rawValue: String($0)) }),
              let value = Int(text.dropFirst().dropLast()), (1...365).contains(value) else { return nil }
        self.init(value: value, unit: unit)
    }

    /// `P1M`
    public var description: String { "P\(value)\(unit.rawValue)" }
}
