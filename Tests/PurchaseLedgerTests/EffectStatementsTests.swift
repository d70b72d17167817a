import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("Each effect's SQL written once: the statements a session runs, and PostgreSQL's purchase function generated from them")
struct EffectStatementsTests {
    /// An effect of every kind, with its optional fields set.
    static func everyEffect() throws -> [LedgerEffect] {
        let now = Date()
        var payload = transaction(Demo.monthly, type: .autoRenewableSubscription, expires: now.addingTimeInterval(3_600), token: UUID())
        payload.price = 9_990
        payload.currency = "USD"
        let record = try PurchaseRecord(payload)
        let id = record.transactionId
        let credit = BalanceMove(key: "grant:\(id)", accountId: "ada", currency: "coins", delta: 100, transactionId: id, at: now)
        let debit = BalanceMove(key: "spend:ada:1", accountId: "ada", currency: "coins", delta: -10, transactionId: nil, at: now, requiresCover: true)
        let event = try #require(WebhookRules.grantEvent(record, account: "ada", now: now))
        return [
            .insertPurchase(record, source: .signedTransaction, at: now),
            .claimPurchase(transactionId: id, accountId: "ada", orderId: "order"),
            .refreshPurchase(record),
            .linkOrder(transactionId: id, orderId: "order"),
            .fulfilOrder(orderId: "order", transactionId: id, at: now),
            .settleOrder(orderId: "order", note: "lost", at: now),
            .moveBalance(credit),
            .moveBalance(debit),
            .recordConflict(transactionId: id, claimedBy: "bob", owner: "ada", at: now),
            .updateSeriesStatus(SubscriptionRecord(originalTransactionId: id, status: .active, gracePeriodExpiresDate: now, autoRenew: true,
                                                   autoRenewProductId: Demo.yearly, signedDate: now, expirationIntent: .customerCancelled,
                                                   isInBillingRetryPeriod: false, priceIncreaseStatus: .customerConsentedOrWasNotifiedWithoutClaimingConsent)),
            .updateSeriesPeriod(originalTransactionId: id, productId: Demo.monthly, purchaseDate: now, expiresDate: now),
            .recordDeviceReport(transactionId: id, accountId: "ada", signals: ["jailbroken"], at: now),
            .audit(actor: "operator", action: .settledOrderPaid, subject: "order", detail: id, at: now),
            .claimSeries(originalTransactionId: id, accountId: "ada", appAccountToken: record.appAccountToken, at: now),
            .emitEvent(event),
            .requireFacts(FactsGuard(originalTransactionId: id, transactionId: id, seriesOwner: .some(nil), seriesEnvironment: .some(.sandbox),
                                     entryCount: 1, storedSignedDate: now, previousOriginalTransactionId: "earlier", previousSeriesOwner: .some("ada"))),
        ]
    }

    @Test("Every kind of effect has its statements; each reads only binds its effect has, numbered from $1 without a gap, and every bind is read")
    func statementsReadTheirBinds() throws {
        var kinds = Set<EffectOp>()
        for effect in try Self.everyEffect() {
            let (op, binds) = try #require(try EffectStatements.binds(effect, events: true))
            kinds.insert(op)
            var read = Set<Int>()
            for step in op.steps {
                switch step {
                case .run(let statement):
                    #expect(statement.binds.allSatisfy { (1...binds.count).contains($0) }, "\(op) reads a bind it does not have: \(statement.binds)")
                    var placeholders = Set<Int>()
                    _ = EffectStatement.placeholders(in: statement.sql) { placeholders.insert($0); return "" }
                    #expect(placeholders == Set(statement.binds.indices.map { $0 + 1 }), "\(op): \(statement.sql)")
                    read.formUnion(statement.binds)
                case .lockSeries(let bind):
                    read.insert(bind)
                case .inSwift:
                    break
                }
            }
            #expect(read == Set(1...binds.count), "\(op) writes binds no statement reads: \(Set(1...binds.count).subtracting(read).sorted())")
        }
        #expect(kinds == Set(EffectOp.allCases))
    }

    @Test("Placeholders are numbered again over the binds a statement reads; $ followed by no digit is left as it is")
    func placeholdersRenumbered() {
        let statement = EffectStatement("SELECT $3, $10, $3 FROM t WHERE a = '$' AND b = $1", then: .next, postgresOnly: false)
        #expect(statement.sql == "SELECT $2, $3, $2 FROM t WHERE a = '$' AND b = $1")
        #expect(statement.binds == [1, 3, 10])
    }

    @Test("PostgreSQL's function has a branch for every effect, built from its statements, with no placeholder left unread")
    func functionGeneratedFromStatements() throws {
        let function = PostgresFunctions.applyEffects
        for op in EffectOp.allCases {
            #expect(function.contains("WHEN '\(op.rawValue)' THEN"), "\(op)")
            for case .run(let statement) in op.steps {
                let inFunction = PostgresFunctions.plpgsql(.run(statement))
                #expect(function.contains(inFunction), "\(op): \(inFunction)")
            }
        }
        let body = try #require(function.components(separatedBy: "$fn$").dropFirst().first)
        #expect(body.range(of: #"\$[0-9]"#, options: .regularExpression) == nil, "a placeholder left in the function")
        #expect(function.hasPrefix("CREATE OR REPLACE FUNCTION \(PostgresFunctions.applyFunction)("))
    }

    @Test("The function's JSON is each effect's name and binds; an event while none are recorded is left out, as a session leaves it")
    func jsonOfEffects() throws {
        let effects = try Self.everyEffect()
        let all = try PostgresFunctions.json(effects, events: true)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(all.utf8)) as? [[Any]])
        #expect(parsed.count == effects.count)
        for (effect, element) in zip(effects, parsed) {
            let (op, binds) = try #require(try EffectStatements.binds(effect, events: true))
            #expect(element.first as? String == op.rawValue)
            #expect(element.count == binds.count + 1, "\(op)")
        }
        let quiet = try #require(try JSONSerialization.jsonObject(with: Data(try PostgresFunctions.json(effects, events: false).utf8)) as? [[Any]])
        #expect(quiet.count == effects.count - 1)
        #expect(!quiet.contains { $0.first as? String == EffectOp.emitEvent.rawValue })
        #expect(try EffectStatements.binds(effects.first { if case .emitEvent = $0 { true } else { false } }!, events: false) == nil)
    }

    @Test("PostgreSQL: every effect's branch of the function runs — applied, or a lost race, or handed back; never a storage error (a type PL/pgSQL checks only when a branch first runs)")
    func everyBranchRuns() async throws {
        _ = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        for effect in try Self.everyEffect() {
            // Twice: the second meets what the first wrote (a conflict, a guard).
            for _ in 0..<2 {
                do {
                    _ = try await fast.apply([effect], owner: "ada", events: true)
                } catch is LedgerRace {
                } catch is LedgerHandBack {
                } catch {
                    Issue.record("\((try? EffectStatements.binds(effect, events: true))?.map { $0.op.rawValue } ?? "?"): \(error)")
                }
            }
        }
        try await ledger.store.close()
    }

    @Test("PostgreSQL: a claim of a series with periods nobody holds is handed back to a held transaction; of one without, applied in the function")
    func claimHandedBack() async throws {
        _ = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
        let ledger = try await makeLedger(.postgres)
        let fast = try #require(ledger.sqlStore.fastPath)
        let now = Date()
        let unbound = try PurchaseRecord(transaction(Demo.monthly, type: .autoRenewableSubscription, expires: now.addingTimeInterval(3_600)))
        #expect(unbound.accountId == nil)
        _ = try await fast.apply([.insertPurchase(unbound, source: .signedTransaction, at: now)], owner: nil, events: true)
        // Applied before the claim in the same call: a purchase of another product, and a credit.
        let earlier = try { var record = try PurchaseRecord(transaction(Demo.premium, type: .nonConsumable)); record.accountId = "ada"; return record }()
        let credit = BalanceMove(key: "grant:\(earlier.transactionId)", accountId: "ada", currency: "coins", delta: 5, transactionId: earlier.transactionId, at: now)
        await #expect(throws: LedgerHandBack.self) {
            _ = try await fast.apply([.insertPurchase(earlier, source: .signedTransaction, at: now), .moveBalance(credit),
                                      .claimSeries(originalTransactionId: unbound.originalTransactionId, accountId: "ada", appAccountToken: nil, at: now)],
                                     owner: "ada", events: true)
        }
        // Nothing applied: the series is still nobody's, and what came before the claim in the same call is undone.
        let stored = try await ledger.sqlStore.read { sql in
            try await sql.first("SELECT account_id FROM purchases WHERE transaction_id = $1", [.text(unbound.transactionId)])
        }
        #expect(stored?.values == [.null])
        #expect(try await ledger.transaction(earlier.transactionId) == nil)
        let entries = try await ledger.sqlStore.read { sql in
            try await sql.rows("SELECT entry_key FROM balance_entries WHERE transaction_id = $1", [.text(earlier.transactionId)])
        }
        #expect(entries.isEmpty)
        let rows = try await fast.apply([.claimSeries(originalTransactionId: uniqueId(), accountId: "ada", appAccountToken: nil, at: now)],
                                        owner: nil, events: true)
        #expect(rows.isEmpty)
        try await ledger.store.close()
    }
}

@Suite("Rows read by column name: each record type's columns are cases, its select list written from them")
struct SelectedColumnsTests {
    @Test("A case's name is its column's name in the schema; the lists name every column of orders and purchases, in order")
    func namesAndLists() {
        #expect(PurchaseColumn.originalTransactionId.name == "original_transaction_id")
        #expect(PurchaseColumn.isUpgraded.name == "is_upgraded")
        #expect(OrderColumn.list("n", [.orderId, .abandonReason]) == "n.order_id, n.abandon_reason")
        #expect(LedgerSession.entitlingColumns.hasSuffix("app_account_token, signed_date"))
        #expect(LedgerSession.moneyColumns == ", price, currency, offer_type, offer_discount_type, offer_period, storefront")
        #expect(LedgerSession.FactsLayout.seriesEnvironment == 2 * OrderColumn.count + PurchaseColumn.count + 2)
    }

    @Test("Every column a record type names exists in the schema as its migrations leave it, on both stores", arguments: StoreKind.allCases)
    func columnsExist(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        // A select of every column of each list: an unknown column is an error, not an empty answer.
        _ = try await ledger.sqlStore.read { sql in
            _ = try await sql.rows("SELECT \(OrderColumn.list()) FROM orders LIMIT 1", [])
            _ = try await sql.rows("SELECT \(PurchaseColumn.list()) FROM purchases LIMIT 1", [])
        }
        try await ledger.store.close()
    }
}
