import Crypto
import Hummingbird
import PurchaseAPI

extension PurchaseServices {
    /// `/metrics` answers only a bearer key — ``metricsKey`` or the admin key — unless ``publicMetrics`` opens it: its
    /// counters are the business's own figures (purchases, refunds, notifications), not something for anyone who can
    /// reach the port. Without either key it is closed (403), as the admin API is without its key.
    func authorizeMetrics(_ request: Request) throws {
        guard !publicMetrics else { return }
        let keys = [metricsKey, adminKey].compactMap { $0 }.filter { !$0.isEmpty }
        guard !keys.isEmpty else {
            throw APIError(.forbidden, code: .metricsDisabled, "no metrics key or admin key is configured, and publicMetrics is off")
        }
        let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
        // Compared as digests, so the comparison's time says nothing of how much of a key matched.
        let digest = SHA256.hash(data: Array(given.utf8))
        guard keys.contains(where: { SHA256.hash(data: Array($0.utf8)) == digest }) else {
            throw APIError(.unauthorized, code: .unauthorized, "/metrics needs the metrics key or the admin key as a bearer token")
        }
    }
}
