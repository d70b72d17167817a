import Foundation

/// The device-integrity signals an app reports with its purchases, kept beside the transactions for the operator and
/// for the server's policy. Signals are heuristics: recorded, not judged, here.
extension Ledger {
    /// Records the signals an app reported with `transactionId` (an empty list records a clean report) on its own —
    /// for a purchase the server's policy refuses. A granted purchase records its report in its own transaction
    /// (``PurchaseSubmission/deviceSignals``).
    public func recordDeviceReport(transactionId: String, accountId: String, signals: [String], now: Date = Date()) async throws {
        let cleaned = Self.cleaned(signals)
        try await write { try await $0.apply(.recordDeviceReport(transactionId: transactionId, accountId: accountId, signals: cleaned, at: now)) }
    }

    /// The signals reported with `transactionId`, oldest report first.
    public func deviceReports(transactionId: String) async throws -> [[String]] {
        try await read { try await $0.deviceReports(where: "transaction_id = $1", [.text(transactionId)]).map(\.signals) }
    }
}
