#if canImport(Security) && !os(Linux)
import Foundation
import Security

/// The journal in the Keychain (generic passwords under one service), which survives deleting and reinstalling the
/// app. Apple platforms only; it cannot be compiled or tested on Linux, so it stays this thin.
public struct KeychainJournal: PurchaseJournal {
    public let service: String

    public init(service: String = "com.iapkit.purchase-journal") {
        self.service = service
    }

    public func write(_ entry: JournalEntry) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        let data = try encoder.encode(entry)
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: entry.key]
        let update = SecItemUpdate(query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        if update == errSecItemNotFound {
            var add = query
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let status = SecItemAdd(add as CFDictionary, nil)
            guard status == errSecSuccess else { throw JournalError("Keychain add failed: \(status)") }
        } else if update != errSecSuccess {
            throw JournalError("Keychain update failed: \(update)")
        }
    }

    public func remove(key: String) throws {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: key]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw JournalError("Keychain delete failed: \(status)") }
    }

    public func entries() throws -> [JournalEntry] {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                    kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [Data] else { throw JournalError("Keychain read failed: \(status)") }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return items.compactMap { try? decoder.decode(JournalEntry.self, from: $0) }.sorted { $0.createdAt < $1.createdAt }
    }
}
#endif
