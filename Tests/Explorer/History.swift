import Foundation
import IAPTestSupport
import IAPKit

/// A product of the demo catalog, one of each of the four types (two subscriptions of one group, for upgrades).
public enum ExploredProduct: String, CaseIterable, Sendable, Codable {
    case coins, premium, season, monthly, yearly

    public var productId: String {
        switch self {
        case .coins: "com.example.iapkit.coins.100"
        case .premium: "com.example.iapkit.premium"
        case .season: "com.example.iapkit.season.pass"
        case .monthly: "com.example.iapkit.pro.monthly"
        case .yearly: "com.example.iapkit.pro.yearly"
        }
    }
}

/// How the App Store ends a payment.
public enum PaymentEnd: String, CaseIterable, Sendable, Codable {
    case success, userCancelled, failed, deferred, interrupted
}

/// How one batch of due notifications reaches the server.
public enum DeliveryFault: String, CaseIterable, Sendable, Codable {
    /// In order, once each.
    case inOrder
    /// Newest first.
    case reversed
    /// Each one twice.
    case duplicated
    /// The server does not answer: Apple retries on its schedule (1 h, 12 h, 24 h, 48 h, 72 h).
    case lost
    /// Only the first half now; the rest wait for a later delivery.
    case partial
    /// None, and Apple gives up on them as after its last retry: only the reconciler can still learn of them.
    case abandoned
}

/// The SDK's own recovery work, inside which the app can die too.
public enum Recovery: Hashable, Sendable {
    /// The retry timer's uploads.
    case retry
    /// StoreKit's updates stream (renewals, approvals) journaled and uploaded.
    case updates
    /// The upload a sign-in starts, for this account.
    case signIn(account: Int)

    var name: String {
        switch self {
        case .signIn(let account): "sign-in of app account \(account)"
        default: kind
        }
    }

    /// For coverage counts: the kind without its account.
    var kind: String {
        switch self {
        case .retry: "retry"
        case .updates: "updates"
        case .signIn: "sign-in"
        }
    }
}

/// One event of a history. Choices among things that exist only at run time (which transaction to refund, which
/// request to approve) are indexes taken modulo what exists then, so a shrunk history still means something.
public enum Step: Hashable, Sendable, CustomStringConvertible {
    /// The app on `device` buys `product`; the payment ends as `end`; the app dies at `crash` when given.
    case buy(device: Int, product: ExploredProduct, end: PaymentEnd, crash: PurchaseClient.Checkpoint?)
    /// The app is launched again (after a crash, or simply later): a new process, the same journal.
    case launch(device: Int)
    /// The app is deleted and installed again: its journal is gone, the store's unfinished queue is not.
    case reinstall(device: Int)
    /// Another app account signs in on the device (the same Apple ID stays).
    case signIn(device: Int, account: Int)
    /// The SDK's retry timer fires.
    case retry(device: Int)
    /// StoreKit's updates stream hands the app its unfinished transactions (approvals, renewals).
    case updates(device: Int)
    /// The user taps Restore Purchases; the app dies after the store restored, before the server heard, when `crash`.
    case restore(device: Int, crash: Bool)
    /// The app spends coins through the server.
    case spend(device: Int, amount: Int)
    /// The device's network goes down or comes back.
    case network(device: Int, up: Bool)
    /// The device's journal starts or stops refusing writes (a full disk).
    case journal(device: Int, fails: Bool)
    /// A parent approves (or declines) a waiting Ask to Buy request; an interrupted purchase is completed.
    case answerRequest(pick: Int, approve: Bool)
    /// Apple refunds a charged transaction.
    case refund(pick: Int)
    /// Apple refunds part of a charged transaction (`REFUND_PRORATED`, `percentage` in milliunits).
    case proratedRefund(pick: Int, percentage: Int)
    /// Apple reverses a refund.
    case reverseRefund(pick: Int)
    /// The customer turns auto-renew off or on for a series.
    case autoRenew(pick: Int, on: Bool)
    /// The customer's payment method starts or stops failing (billing retry, grace period).
    case billing(storeAccount: Int, fails: Bool)
    /// The family organizer shares with the other store account, or stops sharing.
    case family(share: Bool)
    /// Time passes on the accelerated clock.
    case advance(seconds: Int)
    /// The App Store delivers what notifications are due.
    case deliver(DeliveryFault)
    /// The purchase server restarts over the same ledger.
    case serverRestart
    /// The purchase server is deployed with the wrong bundle id, or fixed.
    case serverMisconfigured(Bool)
    /// Apple's servers start answering the purchase server this way (an outage, errors, slowness, or up again).
    case apple(AppleFault)
    /// The server's reconciliation job runs once (held proofs, Apple's notification history, stale series and orders).
    case reconcile
    /// The app dies at `checkpoint` inside its own recovery work (a retry, StoreKit's updates, a sign-in's upload).
    case dieInside(device: Int, recovery: Recovery, checkpoint: PurchaseClient.Checkpoint)
    /// The app sends the store's app receipt to the server (StoreKit 1 code, purchases from before the app's flow).
    case syncReceipt(device: Int)
    /// The server is redeployed verifying receipts only through Apple's verifyReceipt (no local receipt root), or
    /// locally again.
    case receiptsByApple(Bool)
    /// App account `account` sends the server only the id of transaction #`pick` (ids leak: a support thread, a
    /// screenshot), as if it were its own purchase.
    case strangerSendsId(pick: Int, account: Int)

    public var description: String {
        switch self {
        case .buy(let device, let product, let end, let crash):
            "device \(device) buys \(product.rawValue), payment \(end.rawValue)" + (crash.map { ", app dies \($0.rawValue)" } ?? "")
        case .launch(let device): "device \(device): app launched again"
        case .reinstall(let device): "device \(device): app deleted and reinstalled"
        case .signIn(let device, let account): "device \(device): app account \(account) signs in"
        case .retry(let device): "device \(device): retry timer"
        case .updates(let device): "device \(device): StoreKit updates"
        case .restore(let device, let crash): "device \(device): restore purchases" + (crash ? ", app dies duringRestore" : "")
        case .spend(let device, let amount): "device \(device): spends \(amount) coins"
        case .network(let device, let up): "device \(device): network \(up ? "back" : "down")"
        case .journal(let device, let fails): "device \(device): journal \(fails ? "refuses writes" : "writable again")"
        case .answerRequest(let pick, let approve): "\(approve ? "approve" : "decline") waiting request #\(pick)"
        case .refund(let pick): "Apple refunds transaction #\(pick)"
        case .proratedRefund(let pick, let percentage): "Apple refunds \(Double(percentage) / 1000) % of transaction #\(pick)"
        case .reverseRefund(let pick): "Apple reverses refund #\(pick)"
        case .autoRenew(let pick, let on): "auto-renew \(on ? "on" : "off") for series #\(pick)"
        case .billing(let account, let fails): "store account \(account): billing \(fails ? "fails" : "recovers")"
        case .family(let share): share ? "family sharing on" : "family member leaves"
        case .advance(let seconds): "advance the clock \(seconds) s"
        case .deliver(let fault): "deliver notifications (\(fault.rawValue))"
        case .serverRestart: "purchase server restarts"
        case .serverMisconfigured(let wrong): wrong ? "purchase server deployed with the wrong bundle id" : "purchase server configuration fixed"
        case .apple(let fault): "Apple's servers: \(fault.rawValue)"
        case .reconcile: "the reconciliation job runs"
        case .dieInside(let device, let recovery, let checkpoint): "device \(device): \(recovery.name), app dies \(checkpoint.rawValue)"
        case .syncReceipt(let device): "device \(device): app sends the app receipt"
        case .receiptsByApple(let byApple): byApple ? "purchase server redeployed verifying receipts through verifyReceipt only" : "purchase server verifying receipts locally again"
        case .strangerSendsId(let pick, let account): "app account \(account) sends the server the id of transaction #\(pick)"
        }
    }

    /// The step's kind, for coverage counts.
    public var kind: String {
        switch self {
        case .buy(_, _, let end, let crash): "buy/\(end.rawValue)" + (crash.map { "/crash \($0.rawValue)" } ?? "")
        case .launch: "launch"
        case .reinstall: "reinstall"
        case .signIn: "signIn"
        case .retry: "retry"
        case .updates: "updates"
        case .restore(_, let crash): crash ? "restore/crash duringRestore" : "restore"
        case .spend: "spend"
        case .network(_, let up): up ? "network up" : "network down"
        case .journal(_, let fails): fails ? "journal fails" : "journal recovers"
        case .answerRequest(_, let approve): approve ? "approve request" : "decline request"
        case .refund: "refund"
        case .proratedRefund: "prorated refund"
        case .reverseRefund: "reverse refund"
        case .autoRenew(_, let on): on ? "auto-renew on" : "auto-renew off"
        case .billing(_, let fails): fails ? "billing fails" : "billing recovers"
        case .family(let share): share ? "family share" : "family leave"
        case .advance: "advance clock"
        case .deliver(let fault): "deliver/\(fault.rawValue)"
        case .serverRestart: "server restart"
        case .serverMisconfigured(let wrong): wrong ? "server misconfigured" : "server fixed"
        case .apple(let fault): "apple/\(fault.rawValue)"
        case .reconcile: "reconcile"
        case .dieInside(_, let recovery, let checkpoint):
            "die inside \(recovery.kind)/\(checkpoint.rawValue)"
        case .syncReceipt: "sync receipt"
        case .receiptsByApple(let byApple): byApple ? "receipts by verifyReceipt" : "receipts verified locally"
        case .strangerSendsId: "stranger sends an id"
        }
    }
}

/// Draws histories from a seed: the same seed, the same steps.
public struct HistoryGenerator: Sendable {
    public static let devices = 3
    public static let appAccounts = 3
    public static let storeAccounts = 2

    public var minSteps = 12
    public var maxSteps = 40

    public init() {}

    public func history(seed: UInt64) -> [Step] {
        var random = SeededGenerator(state: seed &* 0x2545_F491_4F6C_DD1D &+ 1)
        let count = Int.random(in: minSteps...maxSteps, using: &random)
        // Apple's side and the reconciler are drawn from a stream of their own, inserted between the others: a seed
        // keeps the steps it had before they were added, so a seed in an old report still names most of its history.
        var apple = SeededGenerator(state: seed &* 0x9E37_79B9_7F4A_7C15 &+ 0x5851_F42D)
        // Strangers too, from a third stream, for the same reason.
        var strangers = SeededGenerator(state: seed &* 0xD1B5_4A32_D192_ED03 &+ 0x2F1A_7C3B)
        return (0..<count).flatMap { _ in
            [step(using: &random)] + (appleStep(using: &apple).map { [$0] } ?? []) + (strangerStep(using: &strangers).map { [$0] } ?? [])
        }
    }

    /// Another app account claiming a transaction by its id alone: after about one step in twenty.
    func strangerStep(using random: inout SeededGenerator) -> Step? {
        guard Int.random(in: 0..<20, using: &random) == 0 else { return nil }
        return .strangerSendsId(pick: Int.random(in: 0..<64, using: &random), account: Int.random(in: 0..<Self.appAccounts, using: &random))
    }

    /// Apple's outages (21005 from verifyReceipt among them), the reconciler, notifications Apple gave up on, the app
    /// dying inside its own recovery, prorated refunds, receipts: after about one step in four.
    func appleStep(using random: inout SeededGenerator) -> Step? {
        switch Int.random(in: 0..<100, using: &random) {
        case 0: .apple(.slow)
        case 1: .apple(.down)
        case 2: .apple(.serverError)
        case 3..<6: .apple(.up)
        case 6..<10: .reconcile
        case 10..<13: .deliver(.abandoned)
        case 13..<17:
            .dieInside(device: Int.random(in: 0..<Self.devices, using: &random),
                       recovery: [Recovery.retry, .updates, .signIn(account: Int.random(in: 0..<Self.appAccounts, using: &random))].randomElement(using: &random)!,
                       checkpoint: [PurchaseClient.Checkpoint.afterJournal, .duringUpload, .afterGrant].randomElement(using: &random)!)
        case 21: .apple(.receiptUnavailable)
        case 22..<26: .syncReceipt(device: Int.random(in: 0..<Self.devices, using: &random))
        case 26..<28: .receiptsByApple(Bool.random(using: &random))
        case 17..<21:
            // Apple's own example values among them: 1 of 3 items (33.333 %), 67.932 %, 0.015 %.
            .proratedRefund(pick: Int.random(in: 0..<64, using: &random),
                            percentage: [15, 25_000, 33_333, 50_000, 67_932, 99_999].randomElement(using: &random)!)
        default: nil
        }
    }

    /// Weighted: purchases and the app's own recovery most; faults often enough that most histories meet several.
    func step(using random: inout SeededGenerator) -> Step {
        let device = Int.random(in: 0..<Self.devices, using: &random)
        let pick = Int.random(in: 0..<64, using: &random)
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<24:
            let product = ExploredProduct.allCases.randomElement(using: &random)!
            let ends: [PaymentEnd] = [.success, .success, .success, .success, .success, .userCancelled, .failed, .deferred, .interrupted]
            let crashes: [PurchaseClient.Checkpoint?] = [nil, nil, nil, nil, .afterPayment, .afterJournal, .duringUpload, .afterGrant]
            return .buy(device: device, product: product, end: ends.randomElement(using: &random)!, crash: crashes.randomElement(using: &random)!)
        case 24..<32: return .launch(device: device)
        case 32..<34: return .reinstall(device: device)
        case 34..<38: return .signIn(device: device, account: Int.random(in: 0..<Self.appAccounts, using: &random))
        case 38..<42: return .retry(device: device)
        case 42..<45: return .updates(device: device)
        case 45..<47: return .restore(device: device, crash: roll == 46)
        case 47..<50: return .spend(device: device, amount: [10, 50, 100, 250].randomElement(using: &random)!)
        case 50..<53: return .network(device: device, up: Bool.random(using: &random))
        case 53..<55: return .journal(device: device, fails: Bool.random(using: &random))
        case 55..<59: return .answerRequest(pick: pick, approve: roll != 58)
        case 59..<63: return .refund(pick: pick)
        case 63..<65: return .reverseRefund(pick: pick)
        case 65..<67: return .autoRenew(pick: pick, on: Bool.random(using: &random))
        case 67..<69: return .billing(storeAccount: Int.random(in: 0..<Self.storeAccounts, using: &random), fails: Bool.random(using: &random))
        case 69..<71: return .family(share: roll != 70)
        case 71..<79: return .advance(seconds: [30, 120, 300, 900, 3_600, 4 * 3_600, 86_400, 31 * 86_400].randomElement(using: &random)!)
        case 79..<92: return .deliver([DeliveryFault.inOrder, .reversed, .duplicated, .lost, .partial].randomElement(using: &random)!)
        case 92..<95: return .serverRestart
        default: return .serverMisconfigured(roll < 98)
        }
    }
}
