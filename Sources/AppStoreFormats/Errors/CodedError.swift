/// An error with a stable, machine-readable `code` and a message for people — the shape of every IAPKit error.
/// Two such errors are equal when their codes are equal, so tests and callers compare codes, never messages; the
/// description is `code: message`, the one line a log or a command prints.
public protocol CodedError: Error, Hashable, Sendable, CustomStringConvertible {
    associatedtype Code: RawRepresentable & Hashable & Sendable where Code.RawValue == String
    var code: Code { get }
    var message: String { get }
}

extension CodedError {
    public var description: String { "\(code.rawValue): \(message)" }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
