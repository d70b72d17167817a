import Configuration
import Foundation
import PurchaseAPI
import PurchaseLedger

/// The `IAPKIT_*` environment variables, the layer over the configuration file, read through swift-configuration.
///
/// Each variable is read under its own name, so the name a message or the reference shows is the name an operator
/// sets. A variable that is set must convert: `IAPKIT_PORT=80a` is an error naming `IAPKIT_PORT`, never the file's
/// value in silence. The file itself stays a Codable document (docs/CONFIGURATION.md says why).
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
struct EnvironmentLayer {
    /// Every variable read, for the reference (a test holds docs/CONFIGURATION.md to it).
    static let variables: [String] = [
        "IAPKIT_BUNDLE_ID", "IAPKIT_APP_APPLE_ID", "IAPKIT_ENVIRONMENTS", "IAPKIT_TRUSTED_ROOTS", "IAPKIT_DATABASE",
        "IAPKIT_DATA", "IAPKIT_HOST", "IAPKIT_PORT", "IAPKIT_AUTH_HS256_SECRET", "IAPKIT_ADMIN_KEY", "IAPKIT_STOREKIT_FILE",
        "IAPKIT_SHARED_SECRET", "IAPKIT_FINISH_TRANSACTIONS", "IAPKIT_SET_APP_ACCOUNT_TOKENS", "IAPKIT_WEBHOOK_URL",
        "IAPKIT_WEBHOOK_SECRET", "IAPKIT_REFUND_POLICY", "IAPKIT_IDLE_TIMEOUT_SECONDS", "IAPKIT_HEADER_TIMEOUT_SECONDS",
        "IAPKIT_BODY_TIMEOUT_SECONDS", "IAPKIT_BODY_PROGRESS_BYTES", "IAPKIT_BODY_MAX_SECONDS", "IAPKIT_MAX_CONNECTIONS",
        "IAPKIT_MAX_CONNECTIONS_PER_CLIENT", "IAPKIT_TRUST_APPLE_ROOTS",
        "IAPKIT_AUTH_AUDIENCE", "IAPKIT_AUTH_ISSUER", "IAPKIT_METRICS_KEY", "IAPKIT_PUBLIC_METRICS", "IAPKIT_TRUSTED_PROXIES",
    ]
    /// Kept out of access reports; the database and webhook URLs may carry a password.
    static let secrets: Set<String> = [
        "IAPKIT_AUTH_HS256_SECRET", "IAPKIT_ADMIN_KEY", "IAPKIT_SHARED_SECRET", "IAPKIT_WEBHOOK_SECRET", "IAPKIT_DATABASE",
        "IAPKIT_WEBHOOK_URL", "IAPKIT_METRICS_KEY",
    ]

    private let reader: ConfigReader

    init(_ environment: [String: String]) {
        reader = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(Self.secrets)))
    }

    func apply(to configuration: inout ServerConfiguration) throws {
        if let value = string("IAPKIT_BUNDLE_ID") { configuration.bundleId = value }
        if let value = try int("IAPKIT_APP_APPLE_ID") { configuration.appAppleId = Int64(value) }
        if let value = reader.stringArray(forKey: "IAPKIT_ENVIRONMENTS") { configuration.environments = value }
        // Paths, so `:`-separated as PATH is, and added to the file's.
        if let value = string("IAPKIT_TRUSTED_ROOTS") { configuration.trustedRoots += value.split(separator: ":").map(String.init) }
        if let value = try bool("IAPKIT_TRUST_APPLE_ROOTS") { configuration.trustAppleRoots = value }
        if let value = string("IAPKIT_DATABASE") { configuration.database = value }
        if let value = string("IAPKIT_DATA") { configuration.dataDirectory = value }
        if let value = string("IAPKIT_HOST") { configuration.host = value }
        if let value = try int("IAPKIT_PORT") { configuration.port = value }
        if let value = try double("IAPKIT_IDLE_TIMEOUT_SECONDS") { configuration.connections.idleTimeoutSeconds = value }
        if let value = try double("IAPKIT_HEADER_TIMEOUT_SECONDS") { configuration.connections.headerTimeoutSeconds = value }
        if let value = try double("IAPKIT_BODY_TIMEOUT_SECONDS") { configuration.connections.bodyTimeoutSeconds = value }
        if let value = try int("IAPKIT_BODY_PROGRESS_BYTES") { configuration.connections.bodyProgressBytes = value }
        if let value = try double("IAPKIT_BODY_MAX_SECONDS") { configuration.connections.bodyMaxSeconds = value }
        if let value = try int("IAPKIT_MAX_CONNECTIONS") { configuration.connections.maxConnections = value }
        if let value = try int("IAPKIT_MAX_CONNECTIONS_PER_CLIENT") { configuration.connections.maxConnectionsPerClient = value }
        if let value = string("IAPKIT_AUTH_HS256_SECRET") { configuration.auth.hs256Secret = value }
        if let value = string("IAPKIT_ADMIN_KEY") { configuration.adminKey = value }
        if let value = string("IAPKIT_AUTH_AUDIENCE") { configuration.auth.audience = value }
        if let value = string("IAPKIT_AUTH_ISSUER") { configuration.auth.issuer = value }
        if let value = string("IAPKIT_METRICS_KEY") { configuration.metricsKey = value }
        if let value = try bool("IAPKIT_PUBLIC_METRICS") { configuration.publicMetrics = value }
        if let value = reader.stringArray(forKey: "IAPKIT_TRUSTED_PROXIES") { configuration.trustedProxies = value }
        if let value = string("IAPKIT_STOREKIT_FILE") { configuration.storeKitFile = value }
        if let value = string("IAPKIT_SHARED_SECRET") { configuration.appStore.sharedSecret = value }
        if let value = try bool("IAPKIT_FINISH_TRANSACTIONS") { configuration.appStore.finishTransactions = value }
        if let value = try bool("IAPKIT_SET_APP_ACCOUNT_TOKENS") { configuration.appStore.setAppAccountTokens = value }
        let webhookSecret = string("IAPKIT_WEBHOOK_SECRET")
        if let url = string("IAPKIT_WEBHOOK_URL") {
            configuration.webhooks = .init(url: url, secret: webhookSecret ?? configuration.webhooks?.secret ?? "",
                                           maxAttempts: configuration.webhooks?.maxAttempts)
        } else if let webhookSecret {
            configuration.webhooks?.secret = webhookSecret
        }
        if let value = string("IAPKIT_REFUND_POLICY") {
            guard let policy = RefundPolicy(rawValue: value) else {
                let names = RefundPolicy.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigurationError("IAPKIT_REFUND_POLICY must be one of \(names), not \(value)")
            }
            configuration.appStore.refundPolicy = policy
        }
    }

    private func string(_ name: String) -> String? {
        reader.string(forKey: ConfigKey(name), isSecret: Self.secrets.contains(name))
    }

    private func int(_ name: String) throws -> Int? {
        guard let text = string(name) else { return nil }
        do { return try reader.requiredInt(forKey: ConfigKey(name)) } catch { throw ConfigurationError("\(name) must be an integer, not \(text)") }
    }

    private func double(_ name: String) throws -> Double? {
        guard let text = string(name) else { return nil }
        do { return try reader.requiredDouble(forKey: ConfigKey(name)) } catch { throw ConfigurationError("\(name) must be a number, not \(text)") }
    }

    private func bool(_ name: String) throws -> Bool? {
        guard let text = string(name) else { return nil }
        do { return try reader.requiredBool(forKey: ConfigKey(name)) } catch {
            throw ConfigurationError("\(name) must be true, false, yes, no, 1 or 0, not \(text)")
        }
    }
}
