import AppStoreFormats
import Foundation
import PurchaseAPI
@testable import PurchaseLedger

/// The stores every conformance test runs against.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

import Testing

/// Opens a ledger on a fresh SQLite file, or on the PostgreSQL server `IAPKIT_POSTGRES_URL` names (the test command
/// starts a throwaway one). Tests use unique ids, so they share the PostgreSQL database without meeting.
func makeLedger(_ kind: StoreKind, catalog: LedgerCatalog = .demo) async throws -> Ledger {
    let store: any LedgerStore
    switch kind {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID().uuidString)/ledger.sqlite").path
        store = try SQLiteLedgerStore(path: path)
    case .postgres:
        guard let url = ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"] else {
            throw LedgerError(.storage, "IAPKIT_POSTGRES_URL is not set: run the suite with scripts/test, which starts a throwaway PostgreSQL")
        }
        store = try await PostgresLedgerStore(url: url)
    }
    let ledger = Ledger(store: store, catalog: catalog)
    try await ledger.migrate()
    return ledger
}

/// A database of its own on the PostgreSQL server `IAPKIT_POSTGRES_URL` names, for a test that changes the schema:
/// `body` gets its URL; the database is dropped afterwards.
func withOwnPostgresDatabase(_ prefix: String, _ body: (String) async throws -> Void) async throws {
    let admin = try await makeLedger(.postgres)
    let url = try #require(ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"])
    let database = "iapkit_" + uniqueId(prefix)
    _ = try await admin.sqlStore.read { sql in try await sql.rows("CREATE DATABASE \(database)", []) }
    var components = try #require(URLComponents(string: url))
    components.path = "/" + database
    try await body(try #require(components.string))
    _ = try await admin.sqlStore.read { sql in try await sql.rows("DROP DATABASE \(database) WITH (FORCE)", []) }
}

/// Product ids of the demo catalog.
enum Demo {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let season = "com.example.iapkit.season.pass"
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"
}

/// A fresh id no other test uses.
func uniqueId(_ prefix: String = "") -> String { prefix + String(UInt64.random(in: 1_000_000_000_000...9_999_999_999_999)) }

/// A transaction as a verifier would hand it over.
func transaction(_ productId: String, id: String = uniqueId(), original: String? = nil, type: ProductType, purchased: Date = Date(),
                 expires: Date? = nil, token: UUID? = nil, quantity: Int = 1, signed: Date? = nil, revoked: Date? = nil) -> JWSTransactionDecodedPayload {
    var payload = JWSTransactionDecodedPayload()
    payload.transactionId = id
    payload.originalTransactionId = original ?? id
    payload.productId = productId
    payload.type = type
    payload.purchaseDate = purchased
    payload.expiresDate = expires
    payload.appAccountToken = token
    payload.quantity = quantity
    payload.environment = .sandbox
    payload.signedDate = signed ?? purchased
    payload.revocationDate = revoked
    payload.revocationReason = revoked == nil ? nil : .refundedForOtherReason
    return payload
}
