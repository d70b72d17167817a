import Crypto
import Foundation

/// The dashboard's sign-in, without server-side state: a session is `expiry.nonce.mac`, the MAC keyed by a key derived
/// from the admin key. Every replica with the same admin key accepts it, a restart keeps it, and changing the admin key
/// signs every operator out. Each session has its own CSRF token, derived the same way, which every action must carry.
struct DashboardSession: Sendable {
    static let cookie = "iapkit_dashboard"
    /// The sign-in form's own token (double-submitted: cookie and field), so that another site cannot sign a browser in.
    static let loginCookie = "iapkit_dashboard_login"
    static let lifetime: TimeInterval = 12 * 3600

    private let key: SymmetricKey

    init(adminKey: String) {
        key = SymmetricKey(data: SHA256.hash(data: Array("iapkit-dashboard-session\u{0}\(adminKey)".utf8)))
    }

    /// A new session's cookie value.
    func issue(now: Date) -> String {
        let expiry = Int64((now.timeIntervalSince1970 + Self.lifetime) * 1000)
        let body = "\(expiry).\(Self.randomHex())"
        return body + "." + mac(body)
    }

    /// The session's nonce when `value` is a session this key issued and it has not expired.
    func verify(_ value: String, now: Date) -> String? {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let expiry = Int64(parts[0]), parts[1].count == 32 else { return nil }
        let body = "\(parts[0]).\(parts[1])"
        guard Self.equal(mac(body), String(parts[2])), Double(expiry) / 1000 > now.timeIntervalSince1970 else { return nil }
        return String(parts[1])
    }

    /// The CSRF token of the session with `nonce`.
    func csrfToken(nonce: String) -> String { mac("csrf\u{0}" + nonce) }

    private func mac(_ text: String) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: key)).map { String(format: "%02x", $0) }.joined()
    }

    /// SHA-256 in hex: keys are compared as digests, so the comparison's time says nothing of how much of one matched.
    static func digest(_ text: String) -> String {
        SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func randomHex() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Compares in time that does not depend on where the strings differ.
    static func equal(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}

/// Refuses sign-in after too many wrong keys in a minute (all clients together: the admin key is one secret).
final class SignInThrottle: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [Date] = []
    let limit: Int

    init(limit: Int = 10) { self.limit = limit }

    /// Whether an attempt may be judged now; a wrong one (`correct` false) is counted in the same step, so that
    /// concurrent attempts cannot all pass before the first failure is recorded.
    func admit(correct: Bool, now: Date) -> Bool {
        lock.withLock {
            failures.removeAll { now.timeIntervalSince($0) > 60 }
            guard failures.count < limit else { return false }
            if !correct { failures.append(now) }
            return true
        }
    }
}
