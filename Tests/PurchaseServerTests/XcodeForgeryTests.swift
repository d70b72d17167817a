import AppStoreFormats
import Crypto
import Foundation
import IAPTestSupport
import StoreSimulator
import SwiftASN1
import Testing
import X509

/// What anyone can make: a payload in Xcode's layout, signed with a self-signed certificate of their own.
struct XcodeForger {
    let key = P256.Signing.PrivateKey()
    let certificate: [UInt8]

    init() throws {
        let name = try DistinguishedName { CommonName("StoreKit Testing in Xcode") }
        let now = Date()
        let made = try Certificate(version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: now - 86_400,
                                   notValidAfter: now + 365 * 86_400, issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                                   extensions: Certificate.Extensions {}, issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(made)
        certificate = serializer.serializedBytes
    }

    func sign(_ payload: some Encodable) throws -> String {
        let header = #"{"alg":"ES256","x5c":["\#(Data(certificate).base64EncodedString())"]}"#
        let input = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(try AppStoreJSON.encoder().encode(payload)))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64.urlEncode(Array(signature.rawRepresentation))
    }
}

@Suite("Xcode payloads anyone can sign: never a notification, never news of a real purchase")
struct XcodeForgeryTests {
    static let premium = "com.example.iapkit.premium"

    @Test("A server that accepts its developers' Xcode purchases refuses an Xcode 'notification' and an Xcode upload that reuse a customer's transaction id: the purchase stays as Apple signed it")
    func forgedXcodePayloads() async throws {
        try await System.run(.init(deliver: false, environments: ["Production", "Sandbox", "Xcode"])) { system in
            let (victim, store) = try await system.customer("vera")
            let (_, purchase, reply) = try await system.buy(Self.premium, account: victim, storeAccount: store)
            #expect(reply["outcome"] as? String == "granted")
            let id = try #require(purchase["transactionId"] as? String)
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
            #expect(status.code >= 400 && status.code < 500, "\(status) \(body)")
            // The same forged transaction uploaded by an account of the forger's.
            let (uploaded, answer) = try await system.call(.post, "/v1/purchases", as: "forger", ["signedTransaction": data.signedTransactionInfo ?? ""])
            #expect(uploaded == .unprocessableContent, "\(uploaded) \(answer)")
            let stored = try await system.admin(.get, "/admin/transactions/\(id)").1
            #expect(stored["revocationDate"] == nil && stored["environment"] as? String == "Sandbox", "\(stored)")
            #expect(try await system.entitlements(victim).entitlementNames.contains("premium"))
        }
    }

    @Test("An App Store notification carrying an Xcode-signed app transaction (RESCIND_CONSENT's appData) is refused, as a nested transaction would be, though the server accepts Xcode purchases")
    func xcodeAppTransactionInsideANotification() async throws {
        try await System.run(.init(deliver: false, environments: ["Production", "Sandbox", "Xcode"])) { system in
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
            #expect(status.code >= 400 && status.code < 500, "\(status) \(body)")
            #expect((body["error"] as? [String: Any])?["code"] as? String == "wrong_environment", "\(body)")
            // The same notice with the App Store's own app transaction is taken.
            let genuine = try rescindConsent(carrying: Minter(authority: simulatorAuthority).sign(appTransaction(.sandbox)))
            #expect(try await system.call(.post, "/v1/notifications/appstore", as: nil, ["signedPayload": genuine]).0 == .ok)
        }
    }
}
