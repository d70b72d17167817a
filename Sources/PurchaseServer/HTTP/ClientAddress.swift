import Foundation
import Hummingbird
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Who sent a request, as far as the server can tell: the connection's peer, or — when that peer is a proxy the
/// operator trusts (`trustedProxies`) — the address that proxy put in `X-Forwarded-For`. Only the dashboard's sign-in
/// throttle asks (one client's wrong keys must not lock out everyone else).
enum ClientAddress {
    /// The address whose attempts count together: the client (see ``TrustedProxies/client(peer:forwardedFor:)``), an
    /// IPv6 client by its /64 (one subscriber's whole network, which an attacker would otherwise walk through).
    /// `peer` is the connection's (``PurchaseRequestContext/peerAddress``).
    static func bucket(of request: Request, peer: String?, trusting proxies: TrustedProxies) -> String {
        let forwarded = request.headers[values: .init("X-Forwarded-For")!].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        return bucket(forClient: proxies.client(peer: peer, forwardedFor: forwarded))
    }

    static func bucket(forClient client: String?) -> String {
        guard let client else { return "unknown" }
        guard let bytes = IPAddress(client)?.bytes else { return String(client.prefix(64)) }
        guard bytes.count == 16 else { return bytes.map(String.init).joined(separator: ".") }
        // NAT64 (64:ff9b::/96, RFC 6052): each IPv4 client behind the translator is the last four bytes, not one /64.
        if bytes.prefix(12).elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]) {
            return bytes.suffix(4).map(String.init).joined(separator: ".")
        }
        return stride(from: 0, to: 8, by: 2).map { String(format: "%x", UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])) }.joined(separator: ":") + "::/64"
    }
}

/// An IPv4 or IPv6 address as its bytes (an IPv4-mapped IPv6 address as IPv4, as a dual-stack listener reports one).
struct IPAddress: Equatable, Sendable {
    let bytes: [UInt8]

    init?(_ text: String) {
        var host = text
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") { host = String(host[host.index(after: host.startIndex)..<end]) }
        if let zone = host.firstIndex(of: "%") { host = String(host[..<zone]) }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            let all = withUnsafeBytes(of: &v6) { Array($0) }
            bytes = all.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] ? Array(all.suffix(4)) : all
        } else {
            return nil
        }
    }
}

/// The proxies whose `X-Forwarded-For` the server believes: addresses or networks (`10.0.0.0/8`, `fd00::/8`).
struct TrustedProxies: Sendable {
    private let networks: [(address: [UInt8], prefix: Int)]

    /// The proxies `entries` name; an error names the first entry that is neither an address nor a network.
    static func parse(_ entries: [String]) -> Result<TrustedProxies, ConfigurationError> {
        var networks: [(address: [UInt8], prefix: Int)] = []
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
            guard let address = parts.first.flatMap(IPAddress.init) else {
                return .failure(ConfigurationError("trustedProxies: \(entry) is not an IP address or network"))
            }
            let bits = address.bytes.count * 8
            let prefix = parts.count > 1 ? Int(parts[1]) : bits
            guard let prefix, (0...bits).contains(prefix) else {
                return .failure(ConfigurationError("trustedProxies: \(entry) has a prefix length outside 0…\(bits)"))
            }
            networks.append((address.bytes, prefix))
        }
        return .success(TrustedProxies(networks: networks))
    }

    static let none = TrustedProxies(networks: [])

    func contains(_ text: String) -> Bool {
        guard let address = IPAddress(text) else { return false }
        return networks.contains { network in
            guard network.address.count == address.bytes.count else { return false }
            var remaining = network.prefix
            for (a, b) in zip(network.address, address.bytes) where remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if a & mask != b & mask { return false }
                remaining -= 8
            }
            return true
        }
    }

    /// The client: walking from the peer back through `X-Forwarded-For`, the first address that is not a trusted
    /// proxy's. Each trusted proxy appended the address it saw, so what lies left of the first untrusted one could
    /// have been written by anybody. Nil without a peer (a context that does not know it).
    func client(peer: String?, forwardedFor: [String]) -> String? {
        guard let peer else { return nil }
        var chain = forwardedFor.filter { !$0.isEmpty }
        var client = peer
        while contains(client), let previous = chain.popLast() { client = previous }
        return client
    }
}
