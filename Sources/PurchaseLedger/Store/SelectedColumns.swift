/// A record type's columns in the order its reads select them: a case per column, named as the schema names it (the
/// case's name in snake case). A decoder reads a field by its case, never by a number, and the select list is written
/// from the same cases, so the two cannot drift apart.
protocol SelectedColumns: CaseIterable, RawRepresentable where RawValue == Int, AllCases == [Self] {}

extension SelectedColumns {
    /// The column's name in the schema: `originalTransactionId` is `original_transaction_id`.
    var name: String {
        var snake = ""
        for character in String(describing: self) {
            if character.isUppercase { snake += "_" + character.lowercased() } else { snake.append(character) }
        }
        return snake
    }

    static var count: Int { allCases.count }

    /// The select list of `columns` (every one by default), each qualified by `table` when one is given.
    static func list(_ table: String? = nil, _ columns: [Self] = allCases) -> String {
        columns.map { (table.map { $0 + "." } ?? "") + $0.name }.joined(separator: ", ")
    }
}

extension SQLRow {
    func text(_ column: some SelectedColumns) throws -> String { try text(column.rawValue) }
    func optionalText(_ column: some SelectedColumns) -> String? { optionalText(column.rawValue) }
    func int(_ column: some SelectedColumns) throws -> Int64 { try int(column.rawValue) }
    func optionalInt(_ column: some SelectedColumns) -> Int64? { optionalInt(column.rawValue) }

    /// The columns of `columns` starting at `from` as a row of their own, or nil when a join found nothing (the first
    /// of them, a key, is NULL).
    func slice<Columns: SelectedColumns>(_ columns: Columns.Type, from: Int) -> SQLRow? {
        guard from < values.count, values[from] != .null else { return nil }
        return SQLRow(Array(values[from..<min(values.count, from + Columns.count)]))
    }
}

/// An order's columns (``LedgerSession/decodeOrder(_:)``).
enum OrderColumn: Int, SelectedColumns {
    case orderId, accountId, productId, appAccountToken, state, transactionId, createdAt, expiresAt, abandonedAt, abandonReason
}

/// A stored transaction's columns (``LedgerSession/decodePurchase(_:)``): those entitlements are judged by, through
/// `signedDate` (the shape of what an account owns, ``LedgerSession/ownedQuery``), then how much of it Apple refunded,
/// then its money (NULL where unknown).
enum PurchaseColumn: Int, SelectedColumns {
    case transactionId, originalTransactionId, accountId, orderId, productId, productType, environment, quantity, purchaseDate, expiresDate
    case revocationDate, revocationReason, isUpgraded, ownership, appAccountToken, signedDate
    case revocationType, revocationPercentage, appTransactionId
    case price, currency, offerType, offerDiscountType, offerPeriod, storefront

    static let entitling = Array(allCases[...signedDate.rawValue])
    static let money = Array(allCases[price.rawValue...])
}
