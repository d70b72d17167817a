// The Keychain journal. Security exists on Apple platforms only: on the Linux machines IAPKit is built on, this file is
// type-checked against Apple's declarations of the keychain calls (Tests/AppleDeclarations, scripts/typecheck-apple);
// what it does was checked against Apple's documentation (kSecAttrAccessible, kSecUseDataProtectionKeychain, TN3137 "On
// Mac keychain APIs and implementations"), and the Apple CI workflow (.github/workflows/apple.yml) builds it where that
// runs. See the README.
#if canImport(Security) && (!os(Linux) || IAPKIT_APPLE_DECLARATIONS)
import Foundation
import Security

/// The journal in the Keychain (generic passwords under one service), which survives deleting and reinstalling the
/// app. Apple platforms only.
///
/// Every query names the data protection keychain (`kSecUseDataProtectionKeychain`): on macOS, without it the
/// file-based keychain is used, which ignores `kSecAttrAccessible` and refuses `kSecReturnData` with
/// `kSecMatchLimitAll` (`errSecParam`). Other platforms ignore the key. On macOS the data protection keychain needs
/// an app with a keychain access group (a signed app; a bare command-line tool gets `errSecMissingEntitlement`).
public struct KeychainJournal: PurchaseJournal {
    public let service: String

    public init(service: String = "com.iapkit.purchase-journal") {
        self.service = service
    }

    private var base: [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecUseDataProtectionKeychain as String: true]
    }

    public func write(_ entry: JournalEntry) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        let data = try encoder.encode(entry)
        var query = base
        query[kSecAttrAccount as String] = entry.key
        let update = SecItemUpdate(query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        if update == errSecItemNotFound {
            var add = query
            add[kSecValueData as String] = data
            // Readable in the background (a transaction finishing while the phone is locked) after the first unlock,
            // and never restored onto another device: a journal entry is this device's unfinished business.
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let status = SecItemAdd(add as CFDictionary, nil)
            guard status == errSecSuccess else { throw JournalError("Keychain add failed: \(status)") }
        } else if update != errSecSuccess {
            throw JournalError("Keychain update failed: \(update)")
        }
    }

    public func remove(key: String) throws {
        var query = base
        query[kSecAttrAccount as String] = key
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw JournalError("Keychain delete failed: \(status)") }
    }

    /// Lists the keys (attributes only), then reads each item's data on its own: one item's failure is skipped, not
    /// fatal to the rest, and a failure of the listing itself throws — a journal that cannot be read must never look
    /// empty.
    public func entries() throws -> [JournalEntry] {
        var listQuery = base
        listQuery[kSecReturnAttributes as String] = true
        listQuery[kSecMatchLimit as String] = kSecMatchLimitAll
        var listed: CFTypeRef?
        let status = SecItemCopyMatching(listQuery as CFDictionary, &listed)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = listed as? [[String: Any]] else { throw JournalError("Keychain read failed: \(status)") }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        var entries: [JournalEntry] = []
        for key in items.compactMap({ $0[kSecAttrAccount as String] as? String }) {
            var itemQuery = base
            itemQuery[kSecAttrAccount as String] = key
            itemQuery[kSecReturnData as String] = true
            itemQuery[kSecMatchLimit as String] = kSecMatchLimitOne
            var data: CFTypeRef?
            let itemStatus = SecItemCopyMatching(itemQuery as CFDictionary, &data)
            if itemStatus == errSecItemNotFound { continue }  // removed between the two queries
            guard itemStatus == errSecSuccess else { throw JournalError("Keychain read of \(key) failed: \(itemStatus)") }
            guard let bytes = data as? Data, let entry = try? decoder.decode(JournalEntry.self, from: bytes) else { continue }
            entries.append(entry)
        }
        return entries.sorted { $0.createdAt < $1.createdAt }
    }
}
#endif
