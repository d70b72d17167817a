/// How a `POST /v1/purchases` ended, as `/metrics` counts it (`iapkit_purchases_total{outcome}`).
public enum PurchaseRequestOutcome: Hashable, Sendable {
    /// The first transaction of the proof came to this.
    case submitted(SubmissionOutcome)
    /// Apple could not be asked: the proof is held (202).
    case held
    /// A signed app transaction, recorded; it grants nothing by itself.
    case appTransaction
    /// A proof with no line this app sells (an empty receipt).
    case empty
    /// Refused (4xx or 5xx).
    case refused

    /// The label's value.
    public var label: String {
        switch self {
        case .submitted(let outcome): outcome.rawValue
        case .held: "held"
        case .appTransaction: "appTransaction"
        case .empty: "empty"
        case .refused: "refused"
        }
    }

    /// Counted from the start, so that a rate over a zero is a zero and not a missing series.
    public static let announced: [Self] = SubmissionOutcome.known.map(Self.submitted) + [.held, .refused]
}

/// How an App Store Server Notification posted to the server ended (`iapkit_notifications_total{result}`).
public enum NotificationRequestOutcome: String, Hashable, Sendable, CaseIterable {
    case applied
    /// Seen before (Apple retries until it hears a 200): nothing applied twice.
    case duplicate
    case refused
}
