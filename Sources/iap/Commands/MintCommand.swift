import AppStoreFormats
import ArgumentParser
import Foundation
import StoreSimulator

/// `iap mint`: signed transactions from the simulator's certificate authority, one per line, for load tests and
/// fixtures. Nothing is recorded in the simulator's state: these are payloads only.
struct MintCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mint",
        abstract: "Print COUNT signed transactions (JWS, one per line) minted with the simulator's certificate authority.",
        discussion: "Each has its own transaction id. Verify them with --root <data>/jws-root.pem. For load tests and fixtures.")

    @Option(help: "The simulator's data directory (its certificate authority is made there if missing).")
    var data: String = ".iap-simulator"

    @Option(help: "The product id.")
    var product: String = "com.example.iapkit.coins.100"

    @Option(help: "The product type: Consumable, Non-Consumable, Non-Renewing Subscription, Auto-Renewable Subscription.")
    var type: String = "Consumable"

    @Option(name: .customLong("bundle-id"), help: "The bundle id.")
    var bundleId: String = "com.example.iapkit"

    @Option(help: "Sandbox or Production.")
    var environment: String = "Sandbox"

    @Option(help: "How many.")
    var count: Int = 1

    @Flag(help: "Print Notifications V2 bodies ({\"signedPayload\": …}, ONE_TIME_CHARGE carrying each transaction) instead of bare JWS.")
    var notifications = false

    func validate() throws {
        guard (1...10_000_000).contains(count) else { throw ValidationError("--count is 1 to 10,000,000") }
    }

    func run() async throws {
        let minter = try Minter(authority: try CertificateAuthority.loadOrCreate(in: URL(fileURLWithPath: data)))
        let now = Date()
        let base = Int64.random(in: 3_000_000_000_000_000..<4_000_000_000_000_000)
        let output = FileHandle.standardOutput
        var buffer = ""
        for index in 0..<Int64(count) {
            var payload = JWSTransactionDecodedPayload()
            payload.transactionId = String(base + index)
            payload.originalTransactionId = payload.transactionId
            payload.bundleId = bundleId
            payload.productId = product
            payload.type = ProductType(rawValue: type)
            payload.purchaseDate = now
            payload.originalPurchaseDate = now
            payload.signedDate = now
            payload.quantity = 1
            payload.inAppOwnershipType = .purchased
            payload.environment = AppStoreEnvironment(rawValue: environment)
            payload.transactionReason = .purchase
            payload.storefront = "USA"
            if payload.type == .autoRenewableSubscription {
                // A subscription's first month, priced as the demo catalog's monthly plan: what a real one carries.
                payload.expiresDate = now.addingTimeInterval(30 * 86_400)
                payload.price = 4_990
                payload.currency = "USD"
            }
            let signed = try minter.sign(payload)
            if notifications {
                var data = NotificationData()
                data.environment = payload.environment
                data.bundleId = bundleId
                data.signedTransactionInfo = signed
                var notification = ResponseBodyV2DecodedPayload()
                notification.notificationType = .oneTimeCharge
                notification.notificationUUID = UUID().lowercasedString
                notification.version = "2.0"
                notification.signedDate = now
                notification.data = data
                buffer += #"{"signedPayload":""# + (try minter.sign(notification)) + "\"}\n"
            } else {
                buffer += signed + "\n"
            }
            if buffer.utf8.count > 1 << 20 { output.write(Data(buffer.utf8)); buffer = "" }
        }
        output.write(Data(buffer.utf8))
    }
}
