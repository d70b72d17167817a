import Foundation

/// Where the last entitlements the server granted are kept on the device, per account, so that the app can still
/// serve them while the server is unreachable (a subway, a server outage).
public protocol EntitlementsCache: Sendable {
    func load(accountId: String) throws -> CachedEntitlements?
    func save(_ cached: CachedEntitlements) throws
}

/// The server's last answer for an account as the device keeps it: the entitlements and, from a server that signs its
/// answers, its signature over them (checked again each time the copy is read, so an edited file grants nothing).
public struct CachedEntitlements: Codable, Sendable, Hashable {
    public var entitlements: Entitlements
    /// The server's `signedEntitlements` JWS over this answer, and the nonce the request sent; nil from a server that
    /// does not sign.
    public var signedEntitlements: String?
    public var nonce: String?
    /// When the device kept it (by the device's clock): the answer's age when the server did not sign it.
    public var cachedAt: Date
    /// The latest time the device's clock showed while this copy was kept (written at each offline read): a clock set
    /// back behind it — to before a plan the device has already seen expire — serves nothing.
    public var latestDeviceTime: Date?

    public init(entitlements: Entitlements, signedEntitlements: String? = nil, nonce: String? = nil, cachedAt: Date, latestDeviceTime: Date? = nil) {
        self.entitlements = entitlements
        self.signedEntitlements = signedEntitlements
        self.nonce = nonce
        self.cachedAt = cachedAt
        self.latestDeviceTime = latestDeviceTime
    }
}

/// The offline copy as one JSON file per account in a directory, written atomically.
public struct FileEntitlementsCache: EntitlementsCache {
    /// The folder holding one file per account.
    public let directory: URL

    /// A cache in `directory`, created if missing (hence `throws`).
    public init(directory: URL) throws {
        self.directory = directory
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw JournalError("cannot create the entitlements cache directory \(directory.path): \(error)")
        }
    }

    public func load(accountId: String) throws -> CachedEntitlements? {
        guard let data = FileManager.default.contents(atPath: file(accountId).path), data.count <= 4 << 20 else { return nil }
        return try PurchaseServerClient.decoder.decode(CachedEntitlements.self, from: data)
    }

    public func save(_ cached: CachedEntitlements) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        try encoder.encode(cached).write(to: file(cached.entitlements.accountId), options: .atomic)
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
