import Foundation
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import Testing

@Suite("Server configuration: one file, environment overrides, clear refusals")
struct ServerConfigurationTests {
    func file(_ json: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: url)
        return url.path
    }

    @Test("Defaults with no file; a file names only what it changes; IAPKIT_* overrides win")
    func layering() throws {
        let defaults = try ServerConfiguration.load(file: nil, environment: [:])
        #expect(defaults.port == 8080 && defaults.bundleId == "com.example.iapkit" && defaults.catalog == .demo)
        #expect(defaults.databaseURL.hasPrefix("sqlite://") && defaults.databaseURL.hasSuffix(".iap-server/ledger.sqlite"))
        let path = try file(#"{"port": 9000, "bundleId": "com.acme.app", "catalog": {"products": {"gems": {"type": "Consumable", "currency": "gems", "amount": 5}}}}"#)
        let loaded = try ServerConfiguration.load(file: path, environment: ["IAPKIT_PORT": "9100", "IAPKIT_DATABASE": "postgres://db/iap"])
        #expect(loaded.port == 9100)
        #expect(loaded.bundleId == "com.acme.app")
        #expect(loaded.databaseURL == "postgres://db/iap")
        #expect(loaded.catalog.rule(for: "gems")?.amount == 5)
        #expect(loaded.environments == ["Production", "Sandbox"])
    }

    @Test("A .storekit file becomes the catalog, refined by the file's grants")
    func storeKitCatalog() throws {
        let shared = (ProcessInfo.processInfo.environment["IAPKIT_SHARED"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("shared").path)
        let storeKit = shared + "/catalogs/revenuecat-unittests.storekit"
        let path = try file(#"""
            {"storeKitFile": "\#(storeKit)", "catalog": {"products": {
              "com.revenuecat.consumable": {"type": "Consumable", "currency": "gems", "amount": 5},
              "com.revenuecat.non_renewable": {"type": "Non-Renewing Subscription", "entitlement": "season", "periodSeconds": 86400}}}}
            """#)
        let loaded = try ServerConfiguration.load(file: path, environment: [:])
        #expect(loaded.catalog.rule(for: "lifetime")?.entitlement == "lifetime")
        #expect(loaded.catalog.rule(for: "com.revenuecat.annual_39.99_no_trial")?.entitlement == "subscription_group_2")
    }

    @Test("Refusals name what is wrong: unreadable file, bad JSON, bad product rule (a key its type never uses too), unknown environment, bad policy")
    func refusals() throws {
        func message(_ json: String?, _ environment: [String: String] = [:]) -> String {
            do {
                _ = try ServerConfiguration.load(file: json.map { try! file($0) } ?? "/no/such/file.json", environment: environment)
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(message(nil).contains("cannot read configuration file"))
        #expect(message("{").contains("not valid JSON"))
        #expect(message(#"{"catalog": {"products": {"x": {"type": "Consumable"}}}}"#).contains("catalog product x"))
        #expect(message(#"{"catalog": {"products": {"coins": {"type": "Consumable", "currency": "coins", "amount": 10, "entitlement": "vip"}}}}"#)
            .contains("catalog product coins: a consumable credits its currency only: remove entitlement"))
        #expect(message(#"{"catalog": {"products": {"pro": {"type": "Auto-Renewable Subscription", "entitlement": "pro", "periodSeconds": 60}}}}"#)
            .contains("catalog product pro: a subscription lasts as Apple's expiry says: remove periodSeconds"))
        #expect(message(#"{"catalog": {"products": {"life": {"type": "Non-Consumable", "entitlement": "life", "currency": "gems", "amount": 5}}}}"#)
            .contains("remove amount and currency"))
        #expect(message(#"{"catalog": {"products": {"pass": {"type": "Non-Renewing Subscription", "entitlement": "season", "periodSeconds": 60, "amount": 1}}}}"#)
            .contains("a non-renewing subscription grants its entitlement only: remove amount"))
        #expect(message(#"{"environments": ["Staging"]}"#).contains("unknown environment Staging"))
        #expect(message(#"{"deviceIntegrityPolicy": "shrug"}"#).contains("deviceIntegrityPolicy"))
        #expect(message(#"{"port": 70000}"#).contains("out of range"))
        #expect(message(#"{"adminKey": "short-key"}"#).contains("adminKey must be at least 16 characters"))
        #expect(message(#"{"storeKitFile": "/no/such.storekit"}"#).contains("cannot read the .storekit file"))
        let rm = "3f1c8a52-6d1e-4f0b-9a43-2b7f1f3a9d10"
        #expect(message(#"{"retentionMessaging": {"rules": [{"messageIdentifier": "\#(rm)", "productIds": ["com.example.iapkit.premium"]}]}, "appAppleId": 42}"#)
            .contains("retentionMessaging.rules[0]: com.example.iapkit.premium is not an auto-renewable subscription"))
        #expect(message(#"{"promotionalOffers": {"stay": {"productIds": ["com.example.iapkit.pro.monthly"], "eligibility": "subscribers"}}, "retentionMessaging": {"rules": [{"messageIdentifier": "\#(rm)", "promotionalOfferIdentifier": "stay"}]}, "appAppleId": 42}"#)
            .contains("appStore.serverAPIBaseURL"), "an offer is signed with the In-App Purchase key")
        #expect(message(#"{"retentionMessaging": {"rules": [{"messageIdentifier": "\#(rm)", "locales": ["en-US"]}]}}"#).contains("needs appAppleId"))
        #expect(message(#"{"appAppleId": 42, "retentionMessaging": {"rules": [{"messageIdentifier": "\#(rm)", "locales": ["en-US"]}]}}"#) == "accepted")
        #expect(message(nil, ["IAPKIT_APP_APPLE_ID": "forty-two"]).contains("cannot read configuration file"), "the file is read first")
        #expect((try? ServerConfiguration.load(file: nil, environment: ["IAPKIT_APP_APPLE_ID": "forty-two"])) == nil, "a non-numeric app Apple id is an error")
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func refusal(_ json: String) throws -> String {
        let path = try file(json)
        do {
            _ = try ServerConfiguration.load(file: path, environment: [:])
        } catch let error as ConfigurationError {
            return error.description
        }
        Issue.record("\(json) was accepted")
        return ""
    }

    @Test("An unknown key, at the top or nested, is refused naming it; a wrong type names its key")
    func unknownKeysAndTypes() throws {
        #expect(try refusal(#"{"prot": 9000}"#).contains("unknown key prot"))
        let nested = try refusal(#"{"appStore": {"sharedSecrt": "x", "attempts": 3}, "webhooks": {"url": "https://h/x", "secret": "0123456789abcdef", "retries": 2}}"#)
        #expect(nested.contains("appStore.sharedSecrt") && nested.contains("webhooks.retries") && nested.contains("unknown keys"), "\(nested)")
        #expect(try refusal(#"{"catalog": {"products": {"gems": {"type": "Consumable", "currency": "gems", "amount": 5, "amont": 6}}}}"#)
            .contains("catalog.products.gems.amont"))
        #expect(try refusal(#"{"port": "8080"}"#).contains("key port must be an integer"))
        #expect(try refusal(#"{"appStore": {"attempts": "four"}}"#).contains("key appStore.attempts must be an integer"))
        #expect(try refusal(#"{"environments": "Production"}"#).contains("key environments must be an array"))
        #expect(try refusal(#"{"auth": {"hs256Secret": 5}}"#).contains("key auth.hs256Secret must be a string"))
        // null is the same as leaving the key out.
        #expect(try ServerConfiguration.load(file: try file(#"{"adminKey": null, "port": 9001}"#), environment: [:]).port == 9001)
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.load(file: nil, environment: ["IAPKIT_PORT": "eighty"]) }
    }

    func environmentRefusal(_ environment: [String: String]) -> String {
        do {
            _ = try ServerConfiguration.load(file: nil, environment: environment)
            return "accepted"
        } catch { return "\(error)" }
    }

    @Test("An IAPKIT_* variable that is set must convert: a wrong value is refused naming the variable, never ignored")
    func environmentTypes() throws {
        #expect(environmentRefusal(["IAPKIT_PORT": "80a"]).contains("IAPKIT_PORT must be an integer, not 80a"))
        #expect(environmentRefusal(["IAPKIT_APP_APPLE_ID": "forty-two"]).contains("IAPKIT_APP_APPLE_ID must be an integer"))
        // Before swift-configuration read this layer, any word but 1/true/yes was a silent `false`.
        #expect(environmentRefusal(["IAPKIT_FINISH_TRANSACTIONS": "maybe"]).contains("IAPKIT_FINISH_TRANSACTIONS must be true, false"))
        #expect(environmentRefusal(["IAPKIT_REFUND_POLICY": "generous"]).contains("IAPKIT_REFUND_POLICY must be one of"))
        let loaded = try ServerConfiguration.load(file: nil, environment: [
            "IAPKIT_FINISH_TRANSACTIONS": "YES", "IAPKIT_SET_APP_ACCOUNT_TOKENS": "0", "IAPKIT_ENVIRONMENTS": "Sandbox, Xcode",
            "IAPKIT_TRUSTED_ROOTS": "/a.cer:/b.pem", "IAPKIT_APP_APPLE_ID": "1234567890",
            "IAPKIT_WEBHOOK_URL": "https://backend.example/hooks", "IAPKIT_WEBHOOK_SECRET": "0123456789abcdef",
        ])
        #expect(loaded.appStore.finishTransactions == true && loaded.appStore.setAppAccountTokens == false)
        #expect(loaded.environments == ["Sandbox", "Xcode"] && loaded.trustedRoots == ["/a.cer", "/b.pem"])
        #expect(loaded.appAppleId == 1234567890)
        #expect(loaded.webhooks?.url == "https://backend.example/hooks" && loaded.webhooks?.secret == "0123456789abcdef")
        // Variables outside the layer are not configuration.
        #expect(try ServerConfiguration.load(file: nil, environment: ["PORT": "1", "IAPKIT_PORTS": "x"]).port == 8080)
    }

    @Test("The README's example configuration loads: no key in it is unknown")
    func readmeExample() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "**Configuration**"))
        let start = try #require(readme.range(of: "```json", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "```", range: start.upperBound..<readme.endIndex))
        var json = String(readme[start.upperBound..<end.lowerBound])
        json = json.replacingOccurrences(of: "…uuid…", with: UUID().uuidString)
        var object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        object["trustedRoots"] = []  // files that do not exist here
        var appStore = object["appStore"] as? [String: Any] ?? [:]
        appStore["privateKeyFile"] = nil
        object["appStore"] = appStore
        let path = try file(String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self))
        let loaded = try ServerConfiguration.load(file: path, environment: [:])
        #expect(loaded.appAppleId == 1234567890 && loaded.promotionalOffers.count == 2)
    }

    @Test("--print-config's view masks every secret and a URL's password, and shows the rest as in effect")
    func printable() throws {
        var configuration = ServerConfiguration()
        configuration.adminKey = "admin-secret-value"
        configuration.auth.hs256Secret = "hs256-secret-value"
        configuration.appStore.sharedSecret = "shared-secret-value"
        configuration.webhooks = .init(url: "https://hooks:hook-password@example.com/in", secret: "webhook-secret-value")
        configuration.database = "postgres://iap:db-password@db:5432/iap"
        configuration.port = 9123
        let shown = try configuration.printable()
        for secret in ["admin-secret-value", "hs256-secret-value", "shared-secret-value", "webhook-secret-value", "hook-password", "db-password"] {
            #expect(!shown.contains(secret), "\(secret) is shown")
        }
        // Read back as a configuration file (every key optional): what the view shows, typed.
        let read = try JSONDecoder().decode(ServerConfiguration.self, from: Data(shown.utf8))
        #expect(read.adminKey == "<set>" && read.port == 9123)
        #expect(read.database == "postgres://iap:***@db:5432/iap")
        #expect(read.webhooks?.url == "https://hooks:***@example.com/in")
    }

    @Test("docs/CONFIGURATION.md names every key the server reads")
    func referenceIsComplete() throws {
        var configuration = ServerConfiguration()
        configuration.appAppleId = 1
        configuration.storeKitFile = "x"
        configuration.database = "x"
        configuration.adminKey = "x"
        configuration.auth = .init(hs256Secret: "x", publicKeyPEMFile: "x", algorithm: "x")
        var appStore = ServerConfiguration.AppStoreConfiguration()
        appStore.serverAPIBaseURL = "x"; appStore.keyId = "x"; appStore.issuerId = "x"; appStore.privateKeyFile = "x"
        appStore.verifyReceiptURL = "x"; appStore.verifyReceiptSandboxURL = "x"; appStore.sharedSecret = "x"
        appStore.finishTransactions = true; appStore.setAppAccountTokens = true; appStore.refundPolicy = .prorated
        appStore.sampleContentProvided = true; appStore.attempts = 1; appStore.timeoutSeconds = 1
        configuration.appStore = appStore
        configuration.webhooks = .init(url: "x", secret: "x", maxAttempts: 1)
        configuration.retentionMessaging = .init(rules: [])
        let encoded = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(configuration)) as? [String: Any])
        // Objects whose keys are data (products, offers) or documented as a whole (rules) are not walked into.
        let opaque: Set<String> = ["catalog", "promotionalOffers", "retentionMessaging.rules"]
        func paths(_ object: [String: Any], _ prefix: String) -> [String] {
            object.flatMap { key, value -> [String] in
                let path = prefix.isEmpty ? key : "\(prefix).\(key)"
                guard !opaque.contains(path), let inner = value as? [String: Any] else { return [path] }
                return [path] + paths(inner, path)
            }
        }
        let reference = try String(contentsOf: Self.root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        let missing = paths(encoded, "").filter { !reference.contains("| `\($0)` |") }.sorted()
        #expect(missing.isEmpty, "not in docs/CONFIGURATION.md: \(missing)")
        #expect(paths(encoded, "").count >= 40)
        let undocumented = EnvironmentLayer.variables.filter { !reference.contains("`\($0)`") }
        #expect(undocumented.isEmpty, "environment variables not in docs/CONFIGURATION.md: \(undocumented)")
    }
}
