import AppStoreFormats
import Foundation
import PurchaseAPI
import IAPKit
import PurchaseLedger
import StoreSimulator

/// The promise, as checks against the App Store's own record (the simulator's engine). The numbers are the issue's:
/// 1 every charged transaction reaches its owner once (or is listed to the operator), never finished undelivered;
/// 2 nothing granted that Apple did not charge, refunds end access; 3 entitlements and balances equal Apple's truth;
/// 4 nothing finished before its grant is durable, no granted entry left in a journal after a launch;
/// 5 the ledger's own consistency.
extension HistoryRun {
    /// Invariant 4 (and 1's "never finished undelivered"), at the moment the app finishes a transaction: the grant
    /// is already in the ledger, bound to the transaction's owner — or Apple refunded it.
    func checkFinish(transactionId: String, device: ExploredDevice) async {
        checked(4)
        guard let payload = await engine.transaction(transactionId) else {
            record(4, "\(device.name) finishes \(transactionId), which the App Store never minted")
            return
        }
        if payload.revocationDate != nil { return }
        let owner = ownership.owner(of: payload)
        guard let services = server.services, let stored = try? await services.ledger.transaction(transactionId) else {
            record(4, "\(device.name) finishes \(transactionId) (\(payload.productId ?? "?")) before the ledger holds it")
            return
        }
        if stored.accountId == nil || (owner != nil && stored.accountId != owner) {
            record(4, "\(device.name) finishes \(transactionId) (\(payload.productId ?? "?")) while the ledger has it bound to \(stored.accountId ?? "nobody"), not its owner \(owner ?? "unknown")")
        }
    }

    /// Invariant 4, after a launch that could reach the server: no journal entry of the signed-in account is for a
    /// transaction the ledger already granted.
    func checkJournalAfterLaunch(_ device: ExploredDevice) async {
        guard serverConfigured, !device.offline.value, !device.journalRefuses.value, !device.dead.value, let services = server.services else { return }
        let entries = (try? FileJournal(directory: device.journalDirectory).entries()) ?? []
        for entry in entries where entry.kind == .paid && (entry.accountId == nil || entry.accountId == device.signedIn.value) {
            checked(4)
            guard let id = entry.transactionId, let stored = try? await services.ledger.transaction(id), stored.accountId != nil else { continue }
            record(4, "after a launch, \(device.name)'s journal still holds \(id), which the ledger granted to \(stored.accountId!)")
        }
    }

    /// Inside a history (after an in-order delivery): invariants 2 (nothing the App Store did not mint) and 5.
    func checkpoint() async {
        await checkNothingInvented()
        await checkLedgerConsistency()
    }

    /// After the history, with the world at rest: all five.
    func checkAtRest() async {
        await checkNothingInvented(atEnd: true)
        await checkLedgerConsistency(atEnd: true)
        await checkDelivered()
        await checkEntitlements()
    }

    /// Invariant 2: every transaction in the ledger is one the App Store minted, for the same product and series; at
    /// rest, the ledger's refunds are Apple's.
    func checkNothingInvented(atEnd: Bool = false) async {
        guard let services = server.services else { return }
        let minted = Dictionary(await engine.recordedTransactions().compactMap { record in record.payload.transactionId.map { ($0, record) } },
                                uniquingKeysWith: { first, _ in first })
        let stored: [PurchaseRecord]
        do { stored = try await services.ledger.transactions(limit: 100_000) } catch {
            record(2, "the ledger cannot list its transactions: \(error)", atEnd: atEnd)
            return
        }
        for purchase in stored {
            checked(2)
            guard let apple = minted[purchase.transactionId] else {
                record(2, "the ledger holds \(purchase.transactionId), which the App Store never minted", atEnd: atEnd)
                continue
            }
            if apple.payload.productId != purchase.productId || (apple.payload.originalTransactionId ?? purchase.transactionId) != purchase.originalTransactionId {
                record(2, "the ledger's \(purchase.transactionId) is \(purchase.productId) of \(purchase.originalTransactionId); Apple's is \(apple.payload.productId ?? "?") of \(apple.payload.originalTransactionId ?? "?")", atEnd: atEnd)
            }
            if atEnd, (apple.payload.revocationDate == nil) != (purchase.revocationDate == nil) {
                record(2, "\(purchase.transactionId) (\(purchase.productId)): Apple \(apple.payload.revocationDate == nil ? "has not revoked it" : "revoked it"), the ledger \(purchase.revocationDate == nil ? "has not" : "has")", atEnd: true)
            }
            if atEnd, apple.payload.revocationPercentage != purchase.revocationPercentage || apple.payload.revocationType != purchase.revocationType {
                record(2, "\(purchase.transactionId) (\(purchase.productId)): Apple revoked \(apple.payload.revocationPercentage.map(String.init) ?? "none") milliunits (\(apple.payload.revocationType?.rawValue ?? "-")), the ledger has \(purchase.revocationPercentage.map(String.init) ?? "none") (\(purchase.revocationType?.rawValue ?? "-"))", atEnd: true)
            }
        }
    }

    /// Invariant 5.
    func checkLedgerConsistency(atEnd: Bool = false) async {
        guard let services = server.services else { return }
        checked(5)
        do {
            for problem in try await services.ledger.inconsistencies() { record(5, problem.description, atEnd: atEnd) }
        } catch {
            record(5, "the ledger's consistency checks cannot run: \(error)", atEnd: atEnd)
        }
    }

    /// Invariant 1 at rest: every transaction with an owner is bound to that owner; nothing stays in a journal or in
    /// a device's unfinished queue.
    func checkDelivered() async {
        guard let services = server.services else { return }
        for transaction in await engine.recordedTransactions() {
            guard let id = transaction.payload.transactionId else { continue }
            checked(1)
            let owner = ownership.owner(of: transaction.payload)
            let stored = try? await services.ledger.transaction(id)
            if let owner, stored?.accountId != owner {
                record(1, "\(id) (\(transaction.payload.productId ?? "?"), \(transaction.sharedFrom == nil ? "charged to \(transaction.account)" : "family copy")) belongs to \(owner) but the ledger has it \(stored.map { $0.accountId.map { "bound to \($0)" } ?? "unbound" } ?? "nowhere")", atEnd: true)
            }
            for device in devices where transaction.unfinishedOn.contains(device.name) && device.storeAccount == transaction.account {
                // Unfinished at rest is right only for what nobody may take: a refunded transaction nobody owns.
                if owner == nil && transaction.payload.revocationDate != nil { continue }
                record(1, "\(id) (\(transaction.payload.productId ?? "?")) is still unfinished on \(device.name) at rest (owner \(owner ?? "unknown"), ledger: \(stored.map { $0.accountId ?? "unbound" } ?? "absent"))", atEnd: true)
            }
        }
        for device in devices {
            for entry in ((try? FileJournal(directory: device.journalDirectory).entries()) ?? []) where entry.kind == .paid {
                record(1, "\(device.name)'s journal still holds \(entry.transactionId ?? "?") of \(entry.accountId ?? "nobody") at rest (\(entry.lastError ?? "no error"))", atEnd: true)
            }
        }
    }

    /// What a coin pack Apple charged leaves its owner, by Apple's record: 100 coins a pack; after a refund, what
    /// Apple did not refund (`revocationPercentage` milliunits of the whole quantity, to the nearest coin).
    static func coinsStanding(_ payload: JWSTransactionDecodedPayload) -> Int64 {
        let paid = 100 * Double(payload.quantity ?? 1)
        guard payload.revocationDate != nil else { return Int64(paid) }
        guard payload.revocationType == .refundProrated, let percentage = payload.revocationPercentage else { return 0 }
        return Int64(paid) - Int64((paid * Double(percentage) / 100_000).rounded())
    }

    /// Invariant 3 at rest: each account's entitlements and coins are what the App Store's record says it owns now.
    func checkEntitlements() async {
        guard let services = server.services else { return }
        let now = await engine.clock.now
        let transactions = await engine.recordedTransactions()
        let series = await engine.recordedSeries()
        let byId = Dictionary(transactions.compactMap { record in record.payload.transactionId.map { ($0, record) } }, uniquingKeysWith: { first, _ in first })
        let spent = ownership.spentTotals()
        for account in Self.appAccounts {
            checked(3)
            var names: Set<String> = []
            var coins: Int64 = 0
            var seasonEnd: Date?
            for transaction in transactions where ownership.owner(of: transaction.payload) == account
                && transaction.payload.productId == ExploredProduct.coins.productId {
                coins += Self.coinsStanding(transaction.payload)
            }
            let owned = transactions.filter { ownership.owner(of: $0.payload) == account && $0.payload.revocationDate == nil }
            for transaction in owned.sorted(by: { ($0.payload.purchaseDate ?? .distantPast) < ($1.payload.purchaseDate ?? .distantPast) }) {
                switch transaction.payload.productId {
                case ExploredProduct.premium.productId: names.insert("premium")
                case ExploredProduct.season.productId:
                    // The app's rule for its non-renewing pass: 30 days from purchase, passes bought early stacking end to end.
                    guard let bought = transaction.payload.purchaseDate else { continue }
                    seasonEnd = max(bought, seasonEnd ?? bought).addingTimeInterval(30 * 86_400 * Double(transaction.payload.quantity ?? 1))
                default: break
                }
            }
            if let seasonEnd, seasonEnd > now { names.insert("season") }
            for item in series {
                guard let latest = byId[item.latestTransactionId], ownership.owner(of: latest.payload) == account,
                      latest.payload.revocationDate == nil, item.status == .active || item.status == .billingGracePeriod else { continue }
                names.insert("pro")
            }
            coins -= spent[account, default: 0]
            let granted: AccountEntitlements
            do { granted = try await services.ledger.entitlements(accountId: account, now: now) } catch {
                record(3, "the ledger cannot answer \(account)'s entitlements: \(error)", atEnd: true)
                continue
            }
            let grantedNames = Set(granted.entitlements.map(\.name))
            if grantedNames != names {
                if ProcessInfo.processInfo.environment["IAPKIT_EXPLORE_TRACE"] != nil {
                    print("now \(now)")
                    for item in series { print("apple series \(item)") }
                    for transaction in transactions { print("apple \(transaction.payload.transactionId ?? "") \(transaction.payload.productId ?? "") bought \(transaction.payload.purchaseDate!) expires \(String(describing: transaction.payload.expiresDate)) revoked \(String(describing: transaction.payload.revocationDate)) owner \(ownership.owner(of: transaction.payload) ?? "-")") }
                    for purchase in (try? await services.ledger.purchases(accountId: account)) ?? [] { print("ledger \(purchase)") }
                    for item in Set(transactions.compactMap(\.payload.originalTransactionId)) { print("ledger series \(String(describing: try? await services.ledger.series(originalTransactionId: item)?.status))") }
                }
                record(3, "\(account) is granted \(grantedNames.sorted()), the App Store's record gives \(names.sorted())", atEnd: true)
            }
            if granted.balances["coins", default: 0] != coins {
                record(3, "\(account) has \(granted.balances["coins", default: 0]) coins, the App Store's record gives \(coins)", atEnd: true)
            }
        }
    }
}
