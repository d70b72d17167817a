import AppStoreFormats
import Foundation

/// External purchase tokens (apps entitled to link out of the App Store): Apple makes a token for each purchase made
/// outside it and tells the developer with `EXTERNAL_PURCHASE_TOKEN` — `CREATED` for a custom-link token, monthly
/// `ACTIVE_TOKEN_REMINDER` while one is active, `UNREPORTED` when no report came within 10 days (or a custom-link
/// token expired unreported). Such a notification carries `externalPurchaseToken` and no `data`.
extension StoreEngine {
    /// How long Apple waits for the developer's report before `UNREPORTED`.
    static let externalTokenReportWindow = SubscriptionPeriod(value: 10, unit: .day)
    /// How long a custom-link token stays active (Apple does not publish it; the simulator takes three months).
    static let customLinkTokenLifetime = SubscriptionPeriod(value: 3, unit: .month)

    /// Makes a token now; with `tokenType`, a custom-link one. Returns its `externalPurchaseId` (`SANDBOX…` in sandbox).
    public func createExternalPurchaseToken(tokenType: ExternalPurchaseTokenType? = nil) throws -> String {
        let now = clock.now
        let id = (environment == .production ? "" : "SANDBOX") + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        var token = StoreState.ExternalToken(created: now, tokenType: tokenType)
        if tokenType != nil { token.expires = now.addingTimeInterval(rate.duration(of: Self.customLinkTokenLifetime)) }
        var tokens = state.externalPurchaseTokens ?? [:]
        tokens[id] = token
        state.externalPurchaseTokens = tokens
        if tokenType != nil { try notifyExternal(id, token, .created, at: now) }
        try persist()
        return id
    }

    /// The developer reported the token (Send External Purchase Report): no `UNREPORTED` follows. False for an unknown token.
    public func reportExternalPurchaseToken(_ id: String) throws -> Bool {
        guard state.externalPurchaseTokens?[id] != nil else { return false }
        state.externalPurchaseTokens?[id]?.reported = true
        try persist()
        return true
    }

    /// Sends what fell due by `now`, each at the time it fell due.
    func processExternalPurchaseTokens(until now: Date) throws {
        guard let tokens = state.externalPurchaseTokens, !tokens.isEmpty else { return }
        for id in tokens.keys.sorted() {
            guard var token = state.externalPurchaseTokens?[id] else { continue }
            // Reminders at each month after creation while the token is active.
            while let expires = token.expires {
                let next = token.created.addingTimeInterval(rate.duration(of: SubscriptionPeriod(value: token.reminders + 1, unit: .month)))
                guard next <= now, next < expires else { break }
                token.reminders += 1
                try notifyExternal(id, token, .activeTokenReminder, at: next)
            }
            if !token.reported, !token.unreportedSent {
                let window = token.created.addingTimeInterval(rate.duration(of: Self.externalTokenReportWindow))
                let due = token.expires.map { min($0, window) } ?? window
                if due <= now {
                    token.unreportedSent = true
                    try notifyExternal(id, token, .unreported, at: due)
                }
            }
            state.externalPurchaseTokens?[id] = token
        }
    }

    private func notifyExternal(_ id: String, _ token: StoreState.ExternalToken, _ subtype: NotificationSubtype, at time: Date) throws {
        var payload = ExternalPurchaseToken()
        payload.externalPurchaseId = id
        payload.tokenCreationDate = token.created
        payload.appAppleId = catalog.appAppleId
        payload.bundleId = catalog.bundleId
        payload.tokenType = token.tokenType
        payload.tokenExpirationDate = token.expires
        try record(.externalPurchaseToken, subtype, data: nil, externalPurchaseToken: payload, transactionId: nil, at: time)
    }
}
