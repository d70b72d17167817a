import AppStoreFormats
import Foundation
import PurchaseAPI

/// An operator's settle of a lost order (``Ledger/settle(orderId:transaction:note:actor:now:)``). Pure: the order and
/// the transaction's facts read before it in; effects out — the settle and its audit entry, applied together.
public enum SettleRules {
    /// Settling `order` with a verified transaction: the submission's own decision for the order's account (rejected,
    /// with no effects, when it is another account's or does not fit the order), then — when this settle bound it to
    /// that account — the transfer the app's backend hears of besides the grant's own event, then the audit entry.
    public static func settle(_ order: Order, with record: PurchaseRecord, note: String, actor: String, facts: TransactionFacts,
                              catalog: LedgerCatalog, now: Date) -> SubmissionDecision {
        var decision = SubmissionRules.submit(record, uploader: order.accountId, orderId: order.orderId, source: .admin, facts: facts,
                                              catalog: catalog, now: now)
        switch decision.outcome {
        case .rejected: return decision
        case .refused:
            return SubmissionRules.rejected(LedgerError(.transactionBoundElsewhere, "transaction \(record.transactionId) belongs to another account"))
        default: break
        }
        let grantedHere = decision.effects.contains {
            if case .emitEvent(let grant) = $0 { return grant.accountId == order.accountId && grant.transactionId == record.transactionId }
            return false
        }
        if case .granted = decision.outcome, grantedHere {
            decision.effects.append(.emitEvent(transfer(record, to: order, at: now)))
        }
        decision.effects.append(.audit(actor: actor, action: .settleWithTransaction, subject: order.orderId,
                                       detail: "transaction \(record.transactionId): \(decision.outcome); \(note)", at: now))
        return decision
    }

    /// Settling `order` without a transaction (refunded outside the store, say): closed as `settled` while it is open,
    /// audited as what happened — an order paid or settled before the settle reached it is left as it is.
    public static func settle(_ order: Order, note: String, actor: String, now: Date) -> [LedgerEffect] {
        guard order.state == .created else {
            return [.audit(actor: actor, action: .settleNotOpen, subject: order.orderId,
                           detail: "the order was \(order.state.rawValue) already; nothing changed: \(note)", at: now)]
        }
        return [.settleOrder(orderId: order.orderId, note: note, at: now),
                .audit(actor: actor, action: .settle, subject: order.orderId, detail: note, at: now)]
    }

    /// The operator gave the order's account this transaction: the event its backend hears of it by.
    static func transfer(_ record: PurchaseRecord, to order: Order, at now: Date) -> WebhookEvent {
        var transfer = WebhookEvent(id: "TRANSFER.\(record.transactionId).\(order.orderId)", type: .transfer, accountId: order.accountId,
                                    occurredAt: now)
        transfer.productId = record.productId
        transfer.transactionId = record.transactionId
        transfer.originalTransactionId = record.originalTransactionId
        transfer.environment = record.environment.rawValue
        transfer.purchaseDate = record.purchaseDate
        transfer.expiresDate = record.expiresDate
        transfer.orderId = order.orderId
        return transfer
    }
}
