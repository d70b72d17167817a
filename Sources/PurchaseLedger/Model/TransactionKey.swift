import AppStoreFormats

/// How the ledger keys a transaction: its id within its environment.
///
/// Apple's ids are unique within Production and within Sandbox, and Apple makes them. Xcode's and local testing's are
/// made on a developer's Mac, signed by a certificate anyone can make, with any id — the next ids real purchases will
/// get included. Kept under the same key, a forged Xcode transaction would hold a real one's id: the real purchase
/// refused on upload, restore and notification, its series and order claimed. So the ledger keeps every environment
/// other than Apple's two under a prefix naming it (`Xcode:7`), which no id Apple signs has (Apple's are digits):
/// nothing a test environment signs can name, hold, block or change a Sandbox or Production transaction, series,
/// order or notification-history position. Apps are answered with the id as it was signed (``signedId(_:in:)``): the
/// one their StoreKit knows.
public enum TransactionKey {
    /// The ledger's key for `id` as `environment` signed it.
    public static func key(_ id: String, in environment: AppStoreEnvironment) -> String {
        keptApart(environment) ? "\(environment.rawValue):\(id)" : id
    }

    /// The id as it was signed, from the ledger's key of a transaction of `environment`.
    public static func signedId(_ key: String, in environment: AppStoreEnvironment) -> String {
        let prefix = "\(environment.rawValue):"
        return keptApart(environment) && key.hasPrefix(prefix) ? String(key.dropFirst(prefix.utf8.count)) : key
    }

    /// Every environment but Apple's own two: their ids come from no one who keeps them unique against Apple's.
    static func keptApart(_ environment: AppStoreEnvironment) -> Bool {
        environment != .production && environment != .sandbox
    }
}
