import Crypto
import Foundation

/// The dashboard's sign-in: a session is `expiry.nonce.mac`, the MAC keyed by a key derived from the admin key. Every
/// replica with the same admin key accepts it, a restart keeps it, and changing the admin key signs every operator out.
/// Signing out writes the session's end in the ledger's audit log (`sign-out`, ``sessionId(nonce:)``), which every
/// replica reads before it accepts the cookie. Each session has its own CSRF token, derived the same way, which every
/// action must carry.
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

    /// How the audit log names the session with `nonce` (its sign-in and sign-out): a digest, since the nonce is what
    /// the session's CSRF token is made from.
    static func sessionId(nonce: String) -> String { "dashboard-session:" + digest(nonce).prefix(32) }

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

/// Slows wrong keys at the dashboard's sign-in, per client (``ClientAddress/bucket(of:peer:trusting:)``), and bounds what
/// they cost: after `limit` wrong keys in a minute, a client's next wrong keys are refused unjudged and unaudited.
///
/// The right key is never refused. Refusing it to a throttled client would slow no guesser (the admin API takes the
/// same key unthrottled: its length is its defence), and past `capacity` clients new ones share one count — kept so that
/// an attacker with many addresses grows no table without bound — which that attacker could otherwise keep full to
/// lock out every operator arriving from a new address. So the key is compared (in constant time, as digests) before
/// the throttle is asked, and only wrong keys are counted or refused; a wrong key from a client in the shared count is
/// refused once that count is spent, like any other.
///
/// Refusals are audited at most `auditLimit` a minute for the whole server (an attacker with many addresses would
/// otherwise write `limit` rows a minute per address into the ledger, the purchases' writer): the rest are only
/// counted (``ServerMetrics/dashboardSignInRefused(_:)``), and the next audited refusal says how many went unaudited.
final class SignInThrottle: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [String: [Date]] = [:]
    private var auditWindowStart = Date.distantPast
    private var auditedInWindow = 0
    private var unaudited = 0
    let limit: Int
    let capacity: Int
    let auditLimit: Int
    static let window: TimeInterval = 60
    /// The count every client shares once `capacity` clients have one of their own.
    static let shared = ""

    init(limit: Int = 10, capacity: Int = 10_000, auditLimit: Int = 10) {
        self.limit = limit
        self.capacity = capacity
        self.auditLimit = auditLimit
    }

    /// Whether `client`'s attempt may be judged now: always when the key is `correct`; a wrong one while its client's
    /// count (or, past `capacity` clients, the shared one) has room, counted in the same step, so that concurrent
    /// attempts cannot all pass before the first failure is recorded.
    func admit(client: String, correct: Bool, now: Date) -> Bool {
        if correct { return true }
        return lock.withLock {
            var key = client
            if failures[key] == nil, failures.count >= capacity {
                failures = failures.filter { $0.value.contains { now.timeIntervalSince($0) <= Self.window } }
                if failures.count >= capacity { key = Self.shared }
            }
            var recent = (failures[key] ?? []).filter { now.timeIntervalSince($0) <= Self.window }
            defer { failures[key] = recent.isEmpty ? nil : recent }
            guard recent.count < limit else { return false }
            recent.append(now)
            return true
        }
    }

    /// Whether a judged wrong key is to be audited: nil once `auditLimit` were this minute (the refusal is then only
    /// counted); otherwise how many refusals went unaudited since the last audited one.
    func auditRefusal(now: Date) -> Int? {
        lock.withLock {
            if now.timeIntervalSince(auditWindowStart) >= Self.window || now < auditWindowStart {
                auditWindowStart = now
                auditedInWindow = 0
            }
            guard auditedInWindow < auditLimit else {
                unaudited += 1
                return nil
            }
            auditedInWindow += 1
            defer { unaudited = 0 }
            return unaudited
        }
    }
}
