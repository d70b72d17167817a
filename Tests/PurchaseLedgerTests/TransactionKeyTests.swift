import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

/// A transaction id names one purchase within one environment: Xcode's ids are made on a developer's Mac by anyone.
@Suite("Transaction ids kept apart per environment: an Xcode payload never holds a Sandbox or Production id")
struct TransactionKeyTests {
    func xcode(_ payload: JWSTransactionDecodedPayload) -> JWSTransactionDecodedPayload {
        var forged = payload
        forged.environment = .xcode
        return forged
    }

    @Test("An Xcode transaction under the id a real purchase gets next does not keep the real one from its buyer; each answers with the id as signed", arguments: StoreKind.allCases)
    func xcodeIdBeforeTheRealOne(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (forger, victim, id) = (uniqueId("forger-"), uniqueId("victim-"), uniqueId())
        let squat = try await ledger.submit(.init(accountId: forger, transaction: xcode(transaction(Demo.premium, id: id, type: .nonConsumable))))
        #expect(squat.outcome == .granted && squat.transactionId == id)
        let real = try await ledger.submit(.init(accountId: victim, transaction: transaction(Demo.premium, id: id, type: .nonConsumable)))
        #expect(real.outcome == .granted && real.transactionId == id)
        let owned = try #require(real.entitlements.entitlement("premium"))
        #expect(owned.transactionId == id && owned.environment == .sandbox)
        // The app hears the ids as signed; the ledger keeps the Xcode one apart.
        let answer = try JSONDecoder().decode(PurchaseAPI.Entitlements.self, from: JSONEncoder().encode(squat.entitlements))
        let item = try #require(answer.entitlements.first)
        #expect(item.transactionId == id && item.originalTransactionId == id && item.environment == "Xcode")
        #expect(try await ledger.transaction(id)?.accountId == victim)
        #expect(try await ledger.transaction("Xcode:\(id)")?.accountId == forger)
        // Uploaded again, each is its own buyer's, granted once.
        #expect(try await ledger.submit(.init(accountId: forger, transaction: xcode(transaction(Demo.premium, id: id, type: .nonConsumable)))).outcome == .alreadyGranted)
        #expect(try await ledger.submit(.init(accountId: victim, transaction: transaction(Demo.premium, id: id, type: .nonConsumable))).outcome == .alreadyGranted)
    }

    @Test("An Xcode period naming a real series as its original is a series of its own: the real series keeps its owner and expiry", arguments: StoreKind.allCases)
    func xcodePeriodOfARealSeries(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let (forger, victim, original) = (uniqueId("forger-"), uniqueId("victim-"), uniqueId())
        let now = Date()
        _ = try await ledger.submit(.init(accountId: victim, transaction: transaction(Demo.monthly, id: original, type: .autoRenewableSubscription,
                                                                                      purchased: now - 60, expires: now + 30 * 86_400)))
        // "Later" and already expired: as a period of the real series it would end the victim's plan.
        let forged = xcode(transaction(Demo.monthly, id: uniqueId(), original: original, type: .autoRenewableSubscription, purchased: now - 30,
                                       expires: now - 1))
        #expect(try await ledger.submit(.init(accountId: forger, transaction: forged)).outcome == .granted)
        let owned = try await ledger.entitlements(accountId: victim, now: now)
        #expect(owned.entitlements.contains { $0.transactionId == original && $0.expiresAt.map { $0 > now } == true }, "\(owned)")
        #expect(try await ledger.transaction(original)?.accountId == victim)
    }

    @Test("Ids of the longest a payload may sign (64 bytes) keep their series when keyed, and the consistency check reads keyed consumables", arguments: StoreKind.allCases)
    func longestIdsKeyed(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        let account = uniqueId("dev-")
        let long = { (prefix: String) in prefix + String(repeating: "7", count: 64 - prefix.utf8.count) }
        var plan = transaction(Demo.monthly, id: long(uniqueId()), original: long(uniqueId()), type: .autoRenewableSubscription,
                               purchased: Date() - 60, expires: Date() + 3_600)
        plan.environment = .localTesting
        _ = try await ledger.submit(.init(accountId: account, transaction: plan))
        let stored = try #require(try await ledger.transaction("LocalTesting:\(plan.transactionId!)"))
        #expect(stored.originalTransactionId == "LocalTesting:\(plan.originalTransactionId!)")
        // An original id longer than Apple's is not a series name, keyed or not: the transaction is its own series.
        var odd = transaction(Demo.premium, id: uniqueId(), original: long("") + "77", type: .nonConsumable)
        odd.environment = .xcode
        _ = try await ledger.submit(.init(accountId: account, transaction: odd))
        #expect(try await ledger.transaction("Xcode:\(odd.transactionId!)")?.originalTransactionId == "Xcode:\(odd.transactionId!)")
        var coins = transaction(Demo.coins, id: long(uniqueId()), type: .consumable)
        coins.environment = .localTesting
        _ = try await ledger.submit(.init(accountId: account, transaction: coins))
        #expect(try await ledger.inconsistencies().filter { $0.detail.contains(account) }.isEmpty)
    }

    /// The ledger as the version before migration 14 left it, with rows written as that version wrote them.
    func olderLedger(_ store: any SQLLedgerStore, account: String, ids: (xcode: String, forgedKey: String, sandbox: String, order: String)) async throws {
        let before = try #require(Schema.migrations.firstIndex { $0.contains { $0.contains("test_transactions_14") } })
        try await store.write { sql in
            _ = try await sql.rows("CREATE TABLE ledger_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", [])
            for (index, statements) in Schema.migrations.prefix(before).enumerated() {
                for statement in statements { _ = try await sql.rows(statement, []) }
                _ = try await sql.rows("INSERT INTO ledger_migrations (version, applied_at) VALUES ($1, 1)", [.int(Int64(index + 1))])
            }
            func purchase(_ id: String, _ product: String, _ type: String, _ environment: String) async throws {
                _ = try await sql.rows("""
                    INSERT INTO purchases (transaction_id, original_transaction_id, account_id, order_id, product_id, product_type, environment,
                        quantity, purchase_date, is_upgraded, signed_date, source, recorded_at)
                    VALUES ($1, $1, $2, NULL, $3, $4, $5, 1, 1000, 0, 1000, 'jws', 1000)
                    """, [.text(id), .text(account), .text(product), .text(type), .text(environment)])
                _ = try await sql.rows("""
                    INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($1, $2, 'coins', 100, $3, 1000)
                    """, [.text("grant:\(id)"), .text(account), .text(id)])
            }
            try await purchase(ids.xcode, Demo.coins, "Consumable", "Xcode")
            // An Xcode id forged to look like the new key of the one above: the move must not collide with it.
            try await purchase(ids.forgedKey, Demo.coins, "Consumable", "Xcode")
            try await purchase(ids.sandbox, Demo.coins, "Consumable", "Sandbox")
            // A refund of the Xcode purchase, and its reversal.
            for (key, delta) in [("adjust:\(ids.xcode):1", -100), ("adjust:\(ids.xcode):2", 100)] {
                _ = try await sql.rows("""
                    INSERT INTO balance_entries (entry_key, account_id, currency, delta, transaction_id, created_at) VALUES ($1, $2, 'coins', $3, $4, 1000)
                    """, [.text(key), .text(account), .int(Int64(delta)), .text(ids.xcode)])
            }
            _ = try await sql.rows("INSERT INTO balances (account_id, currency, amount) VALUES ($1, 'coins', 300)", [.text(account)])
            _ = try await sql.rows("""
                INSERT INTO orders (order_id, account_id, product_id, app_account_token, state, transaction_id, created_at, expires_at, updated_at)
                VALUES ($1, $2, $3, $4, 'granted', $5, 1000, 2000, 1000)
                """, [.text(ids.order), .text(account), .text(Demo.coins), .text(UUID().uuidString.lowercased()), .text(ids.xcode)])
        }
    }

    @Test("Migration 14 moves the Xcode transactions an older version stored to their keys: uploaded again they are granted once, not twice", arguments: StoreKind.allCases)
    func storedXcodeTransactionsKeyedOnUpgrade(_ kind: StoreKind) async throws {
        func check(_ store: any SQLLedgerStore) async throws {
            let account = uniqueId("dev-")
            let xcodeId = uniqueId()
            let ids = (xcode: xcodeId, forgedKey: "Xcode:\(xcodeId)", sandbox: uniqueId(), order: uniqueId("order-"))
            try await olderLedger(store, account: account, ids: ids)
            let ledger = Ledger(store: store, catalog: .demo)
            try await ledger.migrate()
            #expect(try await ledger.transaction("Xcode:\(ids.xcode)")?.accountId == account)
            #expect(try await ledger.transaction("Xcode:Xcode:\(ids.xcode)")?.accountId == account)
            #expect(try await ledger.transaction(ids.sandbox)?.environment == .sandbox)
            #expect(try await ledger.transaction(ids.xcode) == nil)
            let keys = try await store.read { sql in
                try await sql.rows("SELECT entry_key, transaction_id FROM balance_entries WHERE account_id = $1 ORDER BY entry_key", [.text(account)])
                    .map { "\(try $0.text(0)) \(try $0.text(1))" }
            }
            #expect(keys == ["adjust:Xcode:\(ids.xcode):1 Xcode:\(ids.xcode)", "adjust:Xcode:\(ids.xcode):2 Xcode:\(ids.xcode)", "grant:\(ids.sandbox) \(ids.sandbox)",
                             "grant:Xcode:Xcode:\(ids.xcode) Xcode:Xcode:\(ids.xcode)", "grant:Xcode:\(ids.xcode) Xcode:\(ids.xcode)"].sorted())
            let order = try await store.read { sql in try await sql.first("SELECT transaction_id FROM orders WHERE order_id = $1", [.text(ids.order)])?.text(0) }
            #expect(order == "Xcode:\(ids.xcode)")
            // The device uploads the same Xcode purchase again after the upgrade: nothing more is credited.
            let again = try await ledger.submit(.init(accountId: account, transaction: xcode(transaction(Demo.coins, id: ids.xcode, type: .consumable))))
            #expect(again.outcome == .alreadyGranted && again.entitlements.balances["coins"] == 300, "\(again)")
            try await ledger.store.close()
        }
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)/ledger.sqlite").path
            try await check(try SQLiteLedgerStore(path: path))
        case .postgres:
            try await withOwnPostgresDatabase("keys_") { url in try await check(try await PostgresLedgerStore(url: url)) }
        }
    }
}
