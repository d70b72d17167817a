import AppStoreClient
import AppStoreFormats
import Foundation
import PurchaseLedger

extension Reconciler {
    /// The cursor in the ledger: everything Apple sent before it has been read from the notification history.
    static let notificationHistoryCursor = "appstore-notification-history"
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
    func recoverNotifications(now: Date, pageBudget: Int = 100) async throws -> (recovered: Int, stalled: String?) {
        guard let serverAPI = services.verifier.apple.serverAPI else { return (0, nil) }
        let floor = now.addingTimeInterval(-Self.notificationHistoryDepth)
        let cursor = try await services.ledger.cursor(Self.notificationHistoryCursor) ?? floor
        var start = max(floor, cursor.addingTimeInterval(-Self.notificationHistoryOverlap))
        var recovered = 0, pages = 0
        while start < now, pages < pageBudget {
            let end = min(now, start.addingTimeInterval(Self.notificationHistorySlice))
            var query = NotificationHistoryRequest()
            query.startDate = start
            query.endDate = end
            var token: String?
            repeat {
                let page: NotificationHistoryResponse
                do { page = try await serverAPI.notificationHistory(query, paginationToken: token) } catch let error as AppStoreClientError {
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
                    if try await services.ledger.apply(event, now: now) == .applied {
                        recovered += 1
                        try await services.ledger.audit(actor: "reconciler", action: "notification-recovered", subject: event.notificationUUID,
                                                        detail: "\(event.type.rawValue)\(event.subtype.map { "/\($0.rawValue)" } ?? "") from Apple's notification history",
                                                        now: now)
                    }
                }
                token = page.hasMore == true ? page.paginationToken : nil
            } while token != nil
            try await services.ledger.advanceCursor(Self.notificationHistoryCursor, to: end)
            start = end
        }
        return (recovered, nil)
    }

    private struct UUIDOnly: Decodable { var notificationUUID: String? }

    static func unverifiedUUID(_ signedPayload: String) -> String? {
        (try? CompactJWS(signedPayload).unverifiedPayload(as: UUIDOnly.self))?.notificationUUID
    }
}
