import Foundation
import PurchaseAPI

extension Ledger {
    /// The audit entries about `subject` recorded with `action`, newest first. The log is shared by every replica, so
    /// a decision one of them wrote down there (an operator's sign-out) holds on all of them.
    public func auditEntries(subject: String, action: AuditAction, limit: Int = 1) async throws -> [AuditEntry] {
        try await read { try await $0.auditEntries(where: "subject = $1 AND action = $2", [.text(subject), .text(action.rawValue)], limit: limit) }
    }
}
