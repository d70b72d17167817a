import Foundation
import Hummingbird
import HummingbirdTesting
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import Testing

@Suite("Hostile bytes: a NUL or bytes that are not UTF-8 get 400 invalid_input on both stores; no answer carries the database's words",
       .timeLimit(.minutes(3)))
struct HostileBytesTests {
    /// Words of SQL, of PostgreSQL's driver and of source locations, none of which an answer may carry.
    static let internals = ["SELECT", "INSERT", "UPDATE", "PSQL", "Postgres", "SQLite", ".swift", "balance_entries", "orders", "sqlState"]

    /// Sends `body` (raw bytes) as `account` and checks the answer is 400 `invalid_input` naming nothing internal.
    func expectRefused(_ system: System, _ method: HTTPRequest.Method, _ path: String, as account: String? = nil, admin: Bool = false,
                       body: String?, _ what: Comment) async throws {
        var headers = HTTPFields()
        if admin { headers[.authorization] = "Bearer \(System.adminKey)" }
        if let account { headers[.authorization] = "Bearer \(try await system.token(account))" }
        let response = try await system.server.execute(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
        let text = String(decoding: response.body.readableBytesView, as: UTF8.self)
        #expect(response.status == .badRequest, "\(what): \(response.status.code) \(text)")
        #expect((try? errorCode(Data(response.body.readableBytesView))) == "invalid_input", "\(what): \(text)")
        for word in Self.internals { #expect(!text.contains(word), "\(what): the answer names \(word): \(text)") }
    }

    @Test("A NUL in the spend's idempotency key, the currency's path, a purchase's orderId, an admin path id and expectedAccountId",
          arguments: LedgerKind.allCases)
    func nulEverywhere(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false)) { system in
            let (account, store) = try await system.customer("nul")
            _ = try await system.buy("com.example.iapkit.coins.100", account: account, storeAccount: store)
            try await expectRefused(system, .post, "/v1/consumables/coins/spend", as: account,
                                    body: #"{"amount": 1, "idempotencyKey": "key\u0000one"}"#, "the idempotency key")
            try await expectRefused(system, .post, "/v1/consumables/co%00ins/spend", as: account,
                                    body: #"{"amount": 1, "idempotencyKey": "key-two"}"#, "the currency")
            let (_, paid, _) = try await system.buy("com.example.iapkit.premium", account: account, storeAccount: store, submit: false)
            let jws = try #require(paid.signedTransaction)
            try await expectRefused(system, .post, "/v1/purchases", as: account,
                                    body: #"{"signedTransaction": "\#(jws)", "orderId": "order\u0000x"}"#, "the orderId")
            try await expectRefused(system, .post, "/admin/orders/order%00x/settle", admin: true, body: #"{"note": "closing it"}"#, "an admin path id")
            try await expectRefused(system, .get, "/admin/transactions/tx%00x", admin: true, body: nil, "an admin transaction id")
            try await expectRefused(system, .post, "/v1/orders", as: account,
                                    body: #"{"productId": "com.example.iapkit.coins.100", "expectedAccountId": "\#(account)\u0000"}"#, "expectedAccountId")
            // Bytes that are not UTF-8 at all, in the body and percent-encoded in the path.
            try await expectRefused(system, .post, "/v1/consumables/co%FFins/spend", as: account,
                                    body: #"{"amount": 1, "idempotencyKey": "key-three"}"#, "a path that is not UTF-8")
            let notUTF8 = try await system.server.execute(uri: "/v1/consumables/coins/spend", method: .post,
                                                          headers: [.authorization: "Bearer \(try await system.token(account))"],
                                                          body: ByteBuffer(bytes: Array(#"{"amount": 1, "idempotencyKey": "k"#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)))
            #expect(notUTF8.status == .badRequest)
            // Nothing was spent; the purchase still waits for its upload.
            #expect(try await system.entitlements(account).balance("coins") == 100)
            let paidId = try #require(paid.transactionId)
            #expect(try await system.services.ledger.transaction(paidId) == nil)
        }
    }

    @Test("The ledger itself refuses a NUL before any statement, the same on both stores (its other callers are not HTTP)",
          arguments: LedgerKind.allCases)
    func ledgerRefusesNUL(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false)) { system in
            let (account, store) = try await system.customer("ledger-nul")
            _ = try await system.buy("com.example.iapkit.coins.100", account: account, storeAccount: store)
            let ledger = system.services.ledger
            await #expect(throws: LedgerError(.invalidInput, "")) {
                try await ledger.spend(accountId: account, currency: "coins", amount: 1, idempotencyKey: "key\u{0}")
            }
            await #expect(throws: LedgerError(.invalidInput, "")) {
                try await ledger.spend(accountId: account, currency: "co\u{0}ins", amount: 1, idempotencyKey: "key")
            }
            await #expect(throws: LedgerError(.invalidInput, "")) { try await ledger.order("order\u{0}") }
            await #expect(throws: LedgerError(.invalidInput, "")) {
                try await ledger.settle(orderId: "order\u{0}", transaction: nil, note: "n", actor: "admin")
            }
            #expect(try await ledger.entitlements(accountId: account).balances["coins"] == 100)
        }
    }

    @Test("A storage failure answers 503 storage with words of its own; the database's stay in the log")
    func storageAnswerIsGeneric() throws {
        let raw = #"PostgreSQL: PSQLError(code: server, serverInfo: [sqlState: 22021, message: invalid byte sequence], query: "SELECT entry_key FROM balance_entries WHERE entry_key = $1", file: PostgresNIO/PostgresLedgerStore.swift, line: 326)"#
        let answer = APIError(LedgerError(.storage, raw))
        #expect(answer.status == .serviceUnavailable && answer.code == "storage" && answer.refusalClass == .retry)
        for word in Self.internals { #expect(!answer.message.contains(word), "\(word) in \(answer.message)") }
        #expect(answer.detail == raw, "kept for the log")
        // A refusal's own message is the caller's to read, as before.
        #expect(APIError(LedgerError(.insufficientBalance, "not enough coins")).message == "not enough coins")
    }

    @Test("JSON carries a NUL only as a real escape: an escaped backslash before u0000 is text; the same answer from a request's buffer, a string and bytes not held in one piece")
    func jsonEscapes() {
        let cases: [(json: String, carries: Bool)] = [
            (#"{"a": "x\u0000"}"#, true), (#"{"a": "\\\u0000"}"#, true), ("{\u{0}}", true), (#"{"a": "\\u0000"}"#, false),
            (#"{"a": "\u0001\u00000"}"#, true), (#"{"a": "\u0010 \u000a u0000"}"#, false), (#"{"a": "\u000"}"#, false), ("", false),
            // A JWS-sized body: the scans that skip bodies without a NUL or a backslash must still see one at the end.
            (String(repeating: "A", count: 5000), false), (String(repeating: "A", count: 5000) + "\u{0}", true),
            (String(repeating: "A", count: 5000) + #"\u0000"#, true), (String(repeating: "A", count: 5000) + #"\n"#, false),
        ]
        for (json, carries) in cases {
            #expect(StorableText.jsonCarriesNUL(Array(json.utf8)) == carries, "\(json)")
            #expect(StorableText.jsonCarriesNUL(ByteBuffer(string: json).readableBytesView) == carries, "\(json) in a buffer")
            #expect(StorableText.jsonCarriesNUL(json.utf8) == carries, "\(json) as a string")
            #expect(StorableText.jsonCarriesNUL(json.utf8.lazy.map { $0 }) == carries, "\(json) one byte at a time")
        }
    }
}
