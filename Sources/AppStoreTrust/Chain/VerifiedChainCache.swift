import Crypto
import Foundation

/// Verified JWS headers, keyed by the header segment's exact bytes.
///
/// The header holds `alg` and the whole `x5c` chain, so equal header bytes mean an equal (leaf, intermediate) chain:
/// a hit skips base64 and JSON decoding of the header, certificate parsing and chain building, leaving one P-256
/// signature check and the payload decode. Only verified chains are stored, so hostile input cannot fill it; it is
/// bounded anyway and simply starts over when full.
final class VerifiedChainCache: @unchecked Sendable {
    struct Entry {
        let leafKey: P256.Signing.PublicKey
        let chain: ChainValidator.Result
    }

    private let lock = NSLock()
    private var entries: [ArraySlice<UInt8>: Entry] = [:]
    private let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    func entry(for header: ArraySlice<UInt8>) -> Entry? {
        lock.withLock { entries[header] }
    }

    func store(_ entry: Entry, for header: ArraySlice<UInt8>) {
        // Own the bytes: the caller's slice keeps its whole JWS alive otherwise.
        let key = ArraySlice(Array(header))
        lock.withLock {
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = entry
        }
    }

    var count: Int { lock.withLock { entries.count } }
}
