import AppStoreClient
import AppStoreFormats
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PurchaseAPI

/// How much of Apple's attention the app's clients may spend: `appStore.lookupLimits` in the configuration. Every
/// call to Apple made for an app's request is made with the app's own In-App Purchase key, so a signed-in client that
/// sends random transaction ids or junk receipts spends the whole app's standing with Apple (its 429s fall on everyone).
public struct AppleLookupLimitSettings: Codable, Sendable, Hashable {
    /// Calls to Apple one account's requests may make per ``perAccountWindowSeconds`` (a token bucket: this many at
    /// once, then one every window ÷ this).
    public var perAccount: Int?
    public var perAccountWindowSeconds: Double?
    /// Calls to Apple all requests together may make per second (the same kind of bucket, a second's worth at once).
    public var perSecond: Double?
    /// How long Apple's "transaction id not found" (4040010) is believed for that id without asking again.
    public var notFoundSeconds: Double?
    /// Proofs one account may have held (waiting for Apple) at once; another is refused with 429 until some are decided.
    public var heldProofsPerAccount: Int?

    /// What is wrong with these settings, naming the key; nil when each is within what the server takes. A value out
    /// of range is refused at start, never quietly taken as another (a `perSecond` of 0 would answer nearly every
    /// upload that asks Apple 429).
    public var problem: String? {
        func outside<T: Comparable>(_ value: T?, _ range: ClosedRange<T>, _ key: String) -> String? {
            guard let value, !range.contains(value) else { return nil }
            return "appStore.lookupLimits.\(key) must be within \(range.lowerBound)…\(range.upperBound), not \(value)"
        }
        return outside(perAccount, 1...100_000, "perAccount") ?? outside(perAccountWindowSeconds, 1...86_400, "perAccountWindowSeconds")
            ?? outside(perSecond, 1...100_000, "perSecond") ?? outside(notFoundSeconds, 0...86_400, "notFoundSeconds")
            ?? outside(heldProofsPerAccount, 1...10_000, "heldProofsPerAccount")
    }

    public init(perAccount: Int? = nil, perAccountWindowSeconds: Double? = nil, perSecond: Double? = nil, notFoundSeconds: Double? = nil,
                heldProofsPerAccount: Int? = nil) {
        self.perAccount = perAccount
        self.perAccountWindowSeconds = perAccountWindowSeconds
        self.perSecond = perSecond
        self.notFoundSeconds = notFoundSeconds
        self.heldProofsPerAccount = heldProofsPerAccount
    }
}

/// The limits in effect, and what they remember: a token bucket per account and one for the whole server, and the ids
/// Apple said it does not know. Replica-local: with N replicas behind a balancer an account may get up to N times its
/// share; the overall limit is per replica too (docs/CONFIGURATION.md).
public final class AppleLookupLimits: @unchecked Sendable {
    public let perAccount: Int
    public let perAccountWindow: TimeInterval
    public let perSecond: Double
    public let notFoundFor: TimeInterval
    public let heldProofsPerAccount: Int

    private let lock = NSLock()
    private var accounts: [String: Bucket] = [:]
    private var overall: Bucket
    /// Past this many buckets, the full ones (accounts quiet for a whole window) are forgotten.
    private var pruneAt = 4096
    private var notFound: [String: ContinuousClock.Instant] = [:]
    /// The not-found ids in the order they were learnt, which with one lifetime for all is the order they expire in.
    private var notFoundOrder: [String] = []
    private var notFoundHead = 0
    static let maxNotFound = 10_000

    public init(_ settings: AppleLookupLimitSettings = .init()) {
        perAccount = max(1, min(settings.perAccount ?? 20, 100_000))
        perAccountWindow = max(1, min(settings.perAccountWindowSeconds ?? 600, 86_400))
        perSecond = max(0.1, min(settings.perSecond ?? 50, 100_000))
        notFoundFor = max(0, min(settings.notFoundSeconds ?? 600, 86_400))
        heldProofsPerAccount = max(1, min(settings.heldProofsPerAccount ?? 20, 10_000))
        overall = Bucket(capacity: perSecond, refill: perSecond, now: .now)
    }

    /// A token bucket: `capacity` at once, `refill` per second after.
    struct Bucket {
        var capacity: Double
        var refill: Double
        var tokens: Double
        var updated: ContinuousClock.Instant

        init(capacity: Double, refill: Double, now: ContinuousClock.Instant) {
            (self.capacity, self.refill, tokens, updated) = (max(1, capacity), refill, max(1, capacity), now)
        }

        mutating func refresh(_ now: ContinuousClock.Instant) {
            let elapsed = now - updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            tokens = min(capacity, tokens + max(0, seconds) * refill)
            updated = now
        }

        /// Whole seconds until one token is back.
        var wait: Int { max(1, Int(((1 - tokens) / refill).rounded(.up))) }
    }

    /// Takes one call from `accountId`'s bucket and the server's, or throws ``AppleLookupRefused`` saying when to come
    /// back. Nothing is taken from either when one refuses.
    public func admit(_ accountId: String) throws {
        let now = ContinuousClock.now
        try lock.withLock {
            var bucket = accounts[accountId] ?? Bucket(capacity: Double(perAccount), refill: Double(perAccount) / perAccountWindow, now: now)
            bucket.refresh(now)
            overall.refresh(now)
            guard bucket.tokens >= 1 else {
                accounts[accountId] = bucket
                throw AppleLookupRefused(retryAfter: bucket.wait, "this account asked the App Store about \(perAccount) proofs in \(Int(perAccountWindow)) s")
            }
            guard overall.tokens >= 1 else {
                throw AppleLookupRefused(retryAfter: overall.wait, "the server is asking the App Store as fast as it may")
            }
            bucket.tokens -= 1
            overall.tokens -= 1
            accounts[accountId] = bucket
            if accounts.count > pruneAt {
                for (account, var quiet) in accounts {
                    quiet.refresh(now)
                    if quiet.tokens >= quiet.capacity { accounts[account] = nil }
                }
                pruneAt = max(4096, accounts.count * 2)
            }
        }
    }

    /// Whether Apple said recently that it does not know `key` (an id at one Server API URL).
    public func knownNotFound(_ key: String) -> Bool {
        lock.withLock {
            guard let until = notFound[key] else { return false }
            return until > .now
        }
    }

    /// Remembers Apple's "not found" for `key`, for ``notFoundFor``; the oldest answers go first past 10,000.
    public func rememberNotFound(_ key: String) {
        guard notFoundFor > 0 else { return }
        let now = ContinuousClock.now
        lock.withLock {
            if notFound[key] == nil { notFoundOrder.append(key) }
            notFound[key] = now + .milliseconds(Int64(notFoundFor * 1000))
            while notFoundHead < notFoundOrder.count, notFound.count > Self.maxNotFound || (notFound[notFoundOrder[notFoundHead]] ?? now) <= now {
                notFound[notFoundOrder[notFoundHead]] = nil
                notFoundHead += 1
            }
            if notFoundHead > 1024, notFoundHead * 2 > notFoundOrder.count {
                notFoundOrder.removeFirst(notFoundHead)
                notFoundHead = 0
            }
        }
    }

    /// Forgets a "not found" (Apple has since answered the id).
    public func forgetNotFound(_ key: String) {
        lock.withLock { _ = notFound.removeValue(forKey: key) }
    }
}

/// One app request's account, charged for the calls to Apple made for it.
public final class AppleLookupTicket: @unchecked Sendable {
    public let accountId: String
    let limits: AppleLookupLimits
    private let lock = NSLock()
    private var charged = false

    public init(accountId: String, limits: AppleLookupLimits) {
        self.accountId = accountId
        self.limits = limits
    }

    /// Before a call whose subject the client chose (an id to look up, in each environment asked; a receipt sent to
    /// verifyReceipt).
    public func charge() throws {
        try limits.admit(accountId)
        lock.withLock { charged = true }
    }

    /// Before a look-up completing a receipt whose purchases Apple signed: the request pays for the first only. A
    /// long-standing customer's first sync may complete dozens, and charged each it would never get through.
    public func chargeOnce() throws {
        guard !lock.withLock({ charged }) else { return }
        try charge()
    }
}

/// 429 `rate_limited` with `Retry-After`: the request would make the server ask Apple more than its limits allow.
/// Class `retry`: nothing is wrong with the proof, and the device keeps its transaction and comes back.
public struct AppleLookupRefused: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public static let code = ErrorCode.rateLimited
    /// Seconds until the limit admits another call.
    public let retryAfter: Int
    public let message: String

    public init(retryAfter: Int, _ message: String) {
        self.retryAfter = retryAfter
        self.message = message
    }

    public var status: HTTPResponse.Status { .tooManyRequests }
    public var description: String { "429 \(Self.code): \(message) (retry after \(retryAfter) s)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = ErrorBody(code: Self.code, message: "\(message); retry after \(retryAfter) s", class: .retry)
        var headers: HTTPFields = [.contentType: "application/json"]
        headers[.retryAfter] = String(retryAfter)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try APIJSON.encode(body))))
    }
}

extension PurchaseServices {
    /// The ticket an app request of `accountId` asks Apple with.
    func appleTicket(for accountId: String) -> AppleLookupTicket {
        AppleLookupTicket(accountId: accountId, limits: verifier.apple.limits)
    }
}
