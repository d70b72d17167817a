import Foundation

/// Verified signing chains, keyed by the exact bytes that carried them.
///
/// For a JWS the key is the header segment: it holds `alg` and the whole `x5c`, so equal bytes mean an equal chain,
/// and a hit skips header decoding, certificate parsing and chain building, leaving one P-256 check and the payload
/// decode. For a receipt it is the signer's identity and the embedded certificates. The signing date is still
/// checked against the chain's validity window on every hit. Only verified chains are stored, so hostile input
/// cannot fill it; it is bounded anyway and simply starts over when full.
final class VerifiedChainCache<Entry: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [BytesKey: Entry] = [:]
    private let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    func entry(for header: ArraySlice<UInt8>) -> Entry? {
        let key = BytesKey(header)
        return lock.withLock { entries[key] }
    }

    func store(_ entry: Entry, for header: ArraySlice<UInt8>) {
        // Own the bytes: the caller's slice keeps its whole JWS alive otherwise.
        let key = BytesKey(ArraySlice(Array(header)))
        lock.withLock {
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = entry
        }
    }

    var count: Int { lock.withLock { entries.count } }
}

/// Byte strings as dictionary keys, hashed and compared in bulk.
///
/// `ArraySlice<UInt8>`'s own `Hashable` feeds the hasher one byte at a time, which for a 5 KB JWS header costs more
/// than the P-256 verify the cache exists to leave as the only real work.
struct BytesKey: Hashable {
    let bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (lhs: BytesKey, rhs: BytesKey) -> Bool {
        guard lhs.bytes.count == rhs.bytes.count else { return false }
        return lhs.bytes.withUnsafeBytes { l in
            rhs.bytes.withUnsafeBytes { r in memcmp(l.baseAddress!, r.baseAddress!, l.count) == 0 }
        }
    }
}
