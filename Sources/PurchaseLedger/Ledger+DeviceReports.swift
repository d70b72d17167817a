import Foundation
import SQLKit

/// The device-integrity signals an app reports with its purchases, kept beside the transactions for the operator and
/// for the server's policy. Signals are heuristics: recorded, not judged, here.
extension Ledger {
    /// Records the signals an app reported with `transactionId` (an empty list records a clean report).
    public func recordDeviceReport(transactionId: String, accountId: String, signals: [String], now: Date = Date()) async throws {
        let cleaned = signals.prefix(20).map { String($0.prefix(64)) }
        try await transaction { db in
            try await db.raw("""
                INSERT INTO device_reports (report_id, transaction_id, account_id, signals, reported_at)
                VALUES (\(bind: UUID().uuidString.lowercased()), \(bind: transactionId), \(bind: accountId), \(bind: cleaned.joined(separator: ",")),
                        \(bind: Millis.of(now)))
                """).run()
        }
    }

    /// The signals reported with `transactionId`, oldest report first.
    public func deviceReports(transactionId: String) async throws -> [[String]] {
        try await transaction { db in
            try await db.raw("SELECT signals FROM device_reports WHERE transaction_id = \(bind: transactionId) ORDER BY reported_at").all().map {
                try $0.decode(column: "signals", as: String.self).split(separator: ",").map(String.init)
            }
        }
    }
}
