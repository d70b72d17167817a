import Foundation
import PurchaseLedger
import PurchaseServer
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

    @Test("Refusals name what is wrong: unreadable file, bad JSON, bad product rule, unknown environment, bad policy")
    func refusals() throws {
        func message(_ json: String?, _ environment: [String: String] = [:]) -> String {
            do {
                _ = try ServerConfiguration.load(file: json.map { try! file($0) } ?? "/no/such/file.json", environment: environment)
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(message(nil).contains("cannot read configuration file"))
        #expect(message("{").contains("is not valid"))
        #expect(message(#"{"catalog": {"products": {"x": {"type": "Consumable"}}}}"#).contains("catalog product x"))
        #expect(message(#"{"environments": ["Staging"]}"#).contains("unknown environment Staging"))
        #expect(message(#"{"deviceIntegrityPolicy": "shrug"}"#).contains("deviceIntegrityPolicy"))
        #expect(message(#"{"port": 70000}"#).contains("out of range"))
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
}
