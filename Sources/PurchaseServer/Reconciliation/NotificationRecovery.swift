import AppStoreClient
import AppStoreFormats
import Foundation
import PurchaseAPI
import PurchaseLedger

extension Reconciler {
    /// The cursor in the ledger: everything Apple sent before it has been read from the notification history. One per
    /// Apple host and app: a replica pointed at the sandbox, or deployed with another bundle id, reads another
    /// history and must not move production's cursor.
    public static func notificationHistoryCursor(baseURL: String, bundleId: String) -> String {
        "appstore-notification-history \(baseURL) \(bundleId)"
    }
    /// When the stored cursor is ahead of this server's clock (a replica whose clock ran fast wrote it), read this far
    /// back instead of skipping until the clock catches up.
    static let notificationHistoryAheadWindow: TimeInterval = 3 * 86_400
    /// Apple's sandbox keeps less history than production: after `startDateTooFarInPast`, a first pass starts here.
    static let notificationHistoryShallowDepth: TimeInterval = 29 * 86_400
    /// Apple keeps 180 days of notification history; a day of margin keeps the first query inside it.
    static let notificationHistoryDepth: TimeInterval = 179 * 86_400
    /// Read again behind the cursor: a notification is listed from its first attempt, which Apple may record a little
    /// after the time it carries.
    static let notificationHistoryOverlap: TimeInterval = 3_600
    /// The history is read thirty days at a time, each slice read whole before the cursor moves past it: a pass
    /// stopped by its page budget (checked between slices) or by Apple resumes where it stopped, whatever order Apple
    /// lists a slice in.
    static let notificationHistorySlice: TimeInterval = 30 * 86_400

    /// Reads Apple's notification history since the cursor and applies what the ledger has not seen. Apple gives up on
    /// a notification after about three and a half days of retries (1, 12, 24, 48 and 72 hours): a server that was
    /// down, misconfigured or unreachable that long would otherwise never learn of a refund, a renewal or an expiry.
    /// Applying is idempotent by `notificationUUID`, so what the endpoint did receive is skipped.
    ///
    /// The cursor moves only past slices read whole with every payload verified. A payload that does not verify (a
    /// server deployed with the wrong bundle id, a missing root) stops the pass at its slice, and the next pass reads
    /// it again: until the configuration is fixed, nothing behind the cursor is skipped. Apple unavailable: the same.
    ///
    /// `pageBudget` pages a pass reads, checked between slices; inside a slice only `slicePageCap` stops it (a slice is
    /// read whole or not at all, and a budget inside it would keep a busy app's first slice from ever being read whole).
    func recoverNotifications(now: Date, pageBudget: Int = 100, slicePageCap: Int = 5_000) async throws -> (recovered: Int, stalled: String?) {
        guard let serverAPI = services.verifier.apple.serverAPI else { return (0, nil) }
        let cursorName = Self.notificationHistoryCursor(baseURL: serverAPI.baseURL, bundleId: serverAPI.credentials.bundleId)
        let floor = now.addingTimeInterval(-Self.notificationHistoryDepth)
        var cursor = try await services.ledger.cursor(cursorName) ?? floor
        var ahead: String?
        if cursor > now {
            ahead = "the stored cursor is ahead of this server's clock (\(cursor)); the last \(Int(Self.notificationHistoryAheadWindow / 86_400)) days read"
            cursor = now.addingTimeInterval(-Self.notificationHistoryAheadWindow)
        }
        var start = max(floor, cursor.addingTimeInterval(-Self.notificationHistoryOverlap))
        var recovered = 0, pages = 0
        while start < now, pages < pageBudget {
            let end = min(now, start.addingTimeInterval(Self.notificationHistorySlice))
            var query = NotificationHistoryRequest()
            query.startDate = start
            query.endDate = end
            var token: String?
            var tokensSeen: Set<String> = []
            var slicePages = 0
            while true {
                // A history that never stops saying hasMore (each time with a new token) costs a bounded number of calls
                // per pass; the slice, not read whole, is read again next time.
                guard slicePages < slicePageCap else {
                    return (recovered, "a slice of Apple's notification history ran past \(slicePageCap) pages")
                }
                slicePages += 1
                let page: NotificationHistoryResponse
                do { page = try await serverAPI.notificationHistory(query, paginationToken: token) } catch let error as AppStoreClientError {
                    // A history shallower than production's (the sandbox's): start again where Apple keeps it.
                    if error.apiErrorCode == .startDateTooFarInPast, token == nil, start < now.addingTimeInterval(-Self.notificationHistoryShallowDepth) {
                        start = now.addingTimeInterval(-Self.notificationHistoryShallowDepth)
                        query.startDate = start
                        query.endDate = min(now, start.addingTimeInterval(Self.notificationHistorySlice))
                        continue
                    }
                    return (recovered, "Apple's notification history: \(error)")
                }
                pages += 1
                let payloads = (page.notificationHistory ?? []).compactMap(\.signedPayload)
                // Most of the history reached the endpoint: skip what the ledger holds before paying for verification.
                // The unverified UUID decides only what to skip; whatever is applied is verified first.
                let uuids = payloads.map(Self.unverifiedUUID)
                let known = try await services.ledger.knownNotifications(uuids.compactMap { $0 })
                for (signed, uuid) in zip(payloads, uuids) where !(uuid.map(known.contains) ?? false) {
                    let event: NotificationEvent
                    do { event = try await services.verifier.notification(signed) } catch {
                        return (recovered, "a notification in Apple's history does not verify here: \(error)")
                    }
                    let outcome: Ledger.NotificationOutcome
                    do { outcome = try await services.ledger.apply(event, now: now) } catch let error as LedgerError where error.code != .storage {
                        // One notification the ledger refuses (as the endpoint would, with a 4xx) stops this slice, not
                        // the reconciler's other work; the slice is read again next pass.
                        return (recovered, "a notification in Apple's history was refused by the ledger: \(error)")
                    }
                    if outcome == .applied {
                        recovered += 1
                        try await services.ledger.audit(actor: "reconciler", action: .notificationRecovered, subject: event.notificationUUID,
                                                        detail: "\(event.type.rawValue)\(event.subtype.map { "/\($0.rawValue)" } ?? "") from Apple's notification history",
                                                        now: now)
                    }
                }
                guard page.hasMore == true else { break }
                // More, but no way to it (or a token already followed): the slice is not read whole, so the cursor
                // must not move past it.
                guard let next = page.paginationToken, tokensSeen.insert(next).inserted else {
                    return (recovered, "Apple's notification history said it has more but gave \(page.paginationToken == nil ? "no" : "a repeated") pagination token")
                }
                token = next
            }
            try await services.ledger.advanceCursor(cursorName, to: query.endDate ?? end)
            start = query.endDate ?? end
        }
        return (recovered, ahead)
    }

    private struct UUIDOnly: Decodable { var notificationUUID: String? }

    static func unverifiedUUID(_ signedPayload: String) -> String? {
        (try? CompactJWS(signedPayload).unverifiedPayload(as: UUIDOnly.self))?.notificationUUID
    }
}
