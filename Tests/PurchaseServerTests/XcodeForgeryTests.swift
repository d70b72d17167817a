import AppStoreFormats
import Foundation
import IAPTestSupport
import PurchaseAPI
import PurchaseServer
import StoreSimulator
import Testing

@Suite("Xcode payloads anyone can sign: never a notification, never news of a real purchase")
struct XcodeForgeryTests {
    static let premium = "com.example.iapkit.premium"

    @Test("A server that accepts its developers' Xcode purchases refuses an Xcode 'notification' and an Xcode upload that reuse a customer's transaction id: the purchase stays as Apple signed it")
    func forgedXcodePayloads() async throws {
        try await System.run(.init(deliver: false, environments: ["Sandbox", "Xcode"])) { system in
            let (victim, store) = try await system.customer("vera")
            let (_, purchase, reply) = try await system.buy(Self.premium, account: victim, storeAccount: store)
            #expect(reply?.outcome == .granted)
            let id = try #require(purchase.transactionId)
            let forger = try XcodeForger()
            var refunded = JWSTransactionDecodedPayload()
            refunded.transactionId = id
            refunded.originalTransactionId = id
            refunded.bundleId = "com.example.iapkit"
            refunded.productId = Self.premium
            refunded.type = .nonConsumable
            refunded.purchaseDate = Date() - 60
            refunded.signedDate = Date() + 86_400 * 365   // "newer" than anything Apple will ever sign
            refunded.revocationDate = Date()
            refunded.revocationReason = .refundedForOtherReason
            refunded.quantity = 1
            refunded.inAppOwnershipType = .purchased
            refunded.environment = .xcode
            var data = NotificationData()
            data.environment = .xcode
            data.bundleId = "com.example.iapkit"
            data.signedTransactionInfo = try forger.sign(refunded)
            var notification = ResponseBodyV2DecodedPayload()
            notification.notificationType = .refund
            notification.notificationUUID = UUID().uuidString.lowercased()
            notification.version = "2.0"
            notification.signedDate = Date()
            notification.data = data
            let (status, body) = try await system.call(.post, "/v1/notifications/appstore", as: nil, ["signedPayload": try forger.sign(notification)])
            #expect(status.code >= 400 && status.code < 500, "\(status) \(text(body))")
            // The same forged transaction uploaded by an account of the forger's is an Xcode purchase of its own (the
            // server takes its developers' Xcode purchases), kept apart from the customer's.
            let (uploaded, answer) = try await system.call(.post, "/v1/purchases", as: "forger", PurchaseRequest(signedTransaction: data.signedTransactionInfo ?? ""))
            #expect(try uploaded == .ok && (decode(PurchaseReply.self, answer).transactionId) == id, "\(uploaded) \(text(answer))")
            #expect(try decode(TransactionRecord.self, await system.admin(.get, "/admin/transactions/Xcode:\(id)").1).accountId == "forger")
            let stored = try decode(TransactionRecord.self, await system.admin(.get, "/admin/transactions/\(id)").1)
            #expect(stored.revocationDate == nil && stored.environment == "Sandbox", "\(stored)")
            #expect(try await system.entitlements(victim).entitlementNames.contains("premium"))
        }
    }

    @Test("Five forged Xcode transactions under the ids the App Store gives next do not keep a customer's real purchases from them: upload and renewal granted to the customer")
    func xcodeSquatsTheNextIds() async throws {
        try await System.run(.init(environments: ["Sandbox", "Xcode"])) { system in
            let (victim, store) = try await system.customer("vera")
            let (forgerAccount, _) = try await system.customer("fred")
            // The forger learns where the store's ids stand (its own purchase) and signs the next five as Xcode's.
            let (_, own, _) = try await system.buy(Self.premium, account: forgerAccount, storeAccount: "store-\(forgerAccount)")
            let last = try #require(Int(own.transactionId ?? ""))
            let forger = try XcodeForger()
            for next in last + 1...last + 5 {
                var squat = JWSTransactionDecodedPayload()
                (squat.transactionId, squat.originalTransactionId) = ("\(next)", "\(next)")
                (squat.bundleId, squat.productId, squat.type) = (System.bundleId, "com.example.iapkit.pro.monthly", .autoRenewableSubscription)
                (squat.purchaseDate, squat.signedDate, squat.expiresDate) = (Date() - 60, Date(), Date() - 1)
                (squat.quantity, squat.inAppOwnershipType, squat.environment) = (1, .purchased, .xcode)
                let (status, body) = try await system.call(.post, "/v1/purchases", as: forgerAccount, ["signedTransaction": try forger.sign(squat)])
                #expect(status == .ok, "\(status) \(text(body))")
            }
            // The customer's real purchases get those ids: a subscription (its first period) and a non-consumable.
            // (The App Store's notification may have granted one before the app's upload: then it is alreadyGranted.)
            let squatted = last + 1...last + 5
            let (_, plan, planReply) = try await system.buy("com.example.iapkit.pro.monthly", account: victim, storeAccount: store)
            #expect(Int(plan.transactionId ?? "").map(squatted.contains) == true)
            #expect([.granted, .alreadyGranted].contains(planReply?.outcome), "\(String(describing: planReply))")
            let (_, lifetime, lifetimeReply) = try await system.buy(Self.premium, account: victim, storeAccount: store)
            #expect(Int(lifetime.transactionId ?? "").map(squatted.contains) == true)
            #expect([.granted, .alreadyGranted].contains(lifetimeReply?.outcome), "\(String(describing: lifetimeReply))")
            // Its renewal (a squatted id too), told by the App Store's notification, extends the customer's plan.
            try await system.advance(by: 180 + 30)
            let owned = try await system.entitlements(victim)
            #expect(Set(owned.entitlementNames).isSuperset(of: ["premium", "pro"]), "\(owned)")
            let pro = owned.entitlements.entitlement("pro")
            let renewal = try #require(Int(pro?.transactionId ?? ""))
            #expect(squatted.contains(renewal) && renewal != Int(plan.transactionId ?? ""), "\(owned)")
            for id in [plan.transactionId, lifetime.transactionId].compactMap({ $0 }) + ["\(renewal)"] {
                let stored = try decode(TransactionRecord.self, await system.admin(.get, "/admin/transactions/\(id)").1)
                #expect(stored.accountId == victim && stored.environment == "Sandbox", "\(stored)")
            }
        }
    }

    @Test("A server never takes Xcode's or local testing's self-signed purchases together with Production: the start is refused, naming why", arguments: ["Xcode", "LocalTesting"])
    func productionWithXcodeRefused(_ test: String) throws {
        var configuration = ServerConfiguration()
        configuration.environments = ["Production", "Sandbox", test]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.environments = ["Sandbox", test]
        try configuration.validate()
    }

    @Test("An App Store notification carrying an Xcode-signed app transaction (RESCIND_CONSENT's appData) is refused, as a nested transaction would be, though the server accepts Xcode purchases")
    func xcodeAppTransactionInsideANotification() async throws {
        try await System.run(.init(deliver: false, environments: ["Sandbox", "Xcode"])) { system in
            func appTransaction(_ environment: AppStoreEnvironment) -> AppTransactionDecodedPayload {
                var payload = AppTransactionDecodedPayload()
                payload.appTransactionId = "704\(Int.random(in: 100_000...999_999))"
                payload.bundleId = System.bundleId
                payload.receiptType = environment
                payload.applicationVersion = "3"
                payload.originalApplicationVersion = "1"
                payload.originalPurchaseDate = Date(timeIntervalSince1970: 1_700_000_000)
                payload.receiptCreationDate = Date()
                payload.originalPlatform = .iOS
                return payload
            }
            func rescindConsent(carrying signedAppTransaction: String) throws -> String {
                var appData = NotificationAppData()
                appData.bundleId = System.bundleId
                appData.environment = .sandbox
                appData.signedAppTransactionInfo = signedAppTransaction
                var notification = ResponseBodyV2DecodedPayload()
                notification.notificationType = .rescindConsent
                notification.notificationUUID = UUID().uuidString.lowercased()
                notification.version = "2.0"
                notification.signedDate = Date()
                notification.appData = appData
                return try Minter(authority: simulatorAuthority).sign(notification)
            }
            let forged = try rescindConsent(carrying: XcodeForger().sign(appTransaction(.xcode)))
            let (status, body) = try await system.call(.post, "/v1/notifications/appstore", as: nil, ["signedPayload": forged])
            #expect(status.code >= 400 && status.code < 500, "\(status) \(text(body))")
            #expect(try errorCode(body) == "wrong_environment", "\(text(body))")
            // The same notice with the App Store's own app transaction is taken.
            let genuine = try rescindConsent(carrying: Minter(authority: simulatorAuthority).sign(appTransaction(.sandbox)))
            #expect(try await system.call(.post, "/v1/notifications/appstore", as: nil, ["signedPayload": genuine]).0 == .ok)
        }
    }
}
