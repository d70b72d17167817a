import Foundation

/// Where the last entitlements the server granted are kept on the device, per account, so that the app can still
/// serve them while the server is unreachable (a subway, a server outage).
public protocol EntitlementsCache: Sendable {
    func load(accountId: String) throws -> Entitlements?
    func save(_ entitlements: Entitlements) throws
}

/// The offline copy as one JSON file per account in a directory, written atomically.
public struct FileEntitlementsCache: EntitlementsCache {
    public let directory: URL

    public init(directory: URL) throws {
        self.directory = directory
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw JournalError("cannot create the entitlements cache directory \(directory.path): \(error)")
        }
    }

    public func load(accountId: String) throws -> Entitlements? {
        guard let data = FileManager.default.contents(atPath: file(accountId).path), data.count <= 4 << 20 else { return nil }
        return try PurchaseServerClient.decoder.decode(Entitlements.self, from: data)
    }

    public func save(_ entitlements: Entitlements) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        try encoder.encode(entitlements).write(to: file(entitlements.accountId), options: .atomic)
    }

    func file(_ accountId: String) -> URL {
        // Percent-encoding keeps any account id inside the directory and two ids from sharing a file.
        let safe = accountId.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "_"
        return directory.appendingPathComponent("entitlements-\(safe).json")
    }
}

extension Entitlements {
    /// What may be served offline: entitlements still unexpired at `now`. Consumable balances are left out — a
    /// balance spent elsewhere meanwhile cannot be known offline, and spending is the server's decision anyway.
    func offline(at now: Date, cachedAt: Date) -> Entitlements {
        Entitlements(accountId: accountId, entitlements: entitlements.filter { ($0.expiresAt ?? .distantFuture) > now }, balances: [:],
                     cachedAt: cachedAt)
    }
}
