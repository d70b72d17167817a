import AppStoreClient
import AppStoreFormats
import Crypto
import Foundation
import IAPTestSupport
import PurchaseAPI
import IAPKit
import PurchaseServer
import Testing

/// The Advanced Commerce API across the whole system: the app's server signs a request, the App Store sells what it
/// says, the purchase server grants it; the app's server changes and migrates subscriptions through Apple, and the
/// purchase server keeps each at its account from the notifications.
@Suite("Advanced Commerce API end to end: signed requests granted, changes told, a migrated plan kept at its account", .timeLimit(.minutes(3)))
struct AdvancedCommerceServerTests {
    static let monthly = "com.example.iapkit.pro.monthly"
    static let generic = "com.example.iapkit.ac.subscription"
    static let oneTime = "com.example.iapkit.ac.onetime"

    /// The app's own backend: Apple's Server API and Advanced Commerce API with the key the purchase server uses.
    func backend(_ system: System) throws -> (api: ServerAPIClient, signer: OfferSigner) {
        let pem = try String(contentsOfFile: try #require(system.configuration.appStore.privateKeyFile), encoding: .utf8)
        let credentials = ServerAPIClient.Credentials(keyId: "TESTKEY001", issuerId: "test-issuer", bundleId: System.bundleId,
                                                      privateKey: try P256.Signing.PrivateKey(pemRepresentation: pem))
        return (ServerAPIClient(baseURL: try #require(system.configuration.appStore.serverAPIBaseURL), credentials: credentials), OfferSigner(credentials: credentials))
    }

    func pro(_ system: System, _ account: String) async throws -> (productId: String, transactionId: String)? {
        let owned = try await system.entitlements(account)
        guard let item = owned.entitlements.entitlement("pro") else { return nil }
        return (item.productId, item.transactionId)
    }

    /// A signed transaction's content (the answer came over the test's own loopback from the simulator).
    func payload(_ jws: String) throws -> JWSTransactionDecodedPayload {
        try AppStoreJSON.decoder().decode(JWSTransactionDecodedPayload.self, from: Data(try CompactJWS(jws).payload()))
    }

    func info() -> AdvancedCommerceRequestInfo { AdvancedCommerceRequestInfo(requestReferenceId: UUID().uuidString.lowercased()) }

    @Test("A subscription and a one-time charge the app's server signed: ordered, bought with the order's token, granted once to the orderer", arguments: LedgerKind.allCases)
    func signedPurchases(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let (_, signer) = try backend(system)
            let (account, store) = try await system.customer("acbuy")
            for (productId, operation) in [(Self.generic, AdvancedCommerceInAppRequest.createSubscription), (Self.oneTime, AdvancedCommerceInAppRequest.createOneTimeCharge)] {
                let (status, answer) = try await system.call(.post, "/v1/orders", as: account, OrderRequest(productId: productId))
                #expect(status == .created)
                let order = try decode(OrderReply.self, answer)
                let token = order.appAccountToken.lowercasedString
                var request = AdvancedCommerceInAppRequest(operation: operation, requestInfo: .init(requestReferenceId: UUID().uuidString.lowercased(), appAccountToken: token),
                                                           currency: "USD", taxCode: "C003-00-2")
                if operation == AdvancedCommerceInAppRequest.createSubscription {
                    request.descriptors = AdvancedCommerceDescriptors(description: "Every article", displayName: "News")
                    request.items = [AdvancedCommerceItem(sku: "news.basic", description: "Every article", displayName: "News", price: 4990)]
                    request.period = "P1M"
                } else {
                    request.item = AdvancedCommerceItem(sku: "article.42", description: "One long read", displayName: "Article 42", price: 1990)
                }
                let bought = try await system.storePurchase(["account": store, "device": "phone", "productId": productId,
                                                             "advancedCommerceData": try signer.advancedCommerceRequest(request)])
                let jws = try #require(bought.signedTransaction, "\(bought)")
                let (_, answered) = try await system.call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: jws, orderId: order.orderId))
                let reply = try decode(PurchaseReply.self, answered)
                // Apple's notification often comes first and, by the order's token, grants it to the orderer already.
                #expect([.granted, .alreadyGranted].contains(reply.outcome) && reply.orderId == order.orderId, "\(reply)")
                let again = try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: account, PurchaseRequest(signedTransaction: jws)).1)
                #expect(again.outcome == .alreadyGranted)
            }
            try await system.advance(by: 0)
            #expect(try await pro(system, account)?.productId == Self.generic)
            #expect(try await system.entitlements(account).balance("credits") == 1, "one charge, one credit, once")

            // The app's server refunds the article and revokes it: Apple's REFUND takes the credit back.
            let (api, _) = try backend(system)
            let charge = try #require(await system.engine.notifications().last { $0.type == .oneTimeCharge }?.transactionId)
            let refunded = try await api.requestTransactionRefund(charge, AdvancedCommerceRequestRefundRequest(
                requestInfo: info(), items: [.init(sku: "article.42", refundType: "FULL", refundReason: "UNSATISFIED_WITH_PURCHASE", revoke: true)],
                refundRiskingPreference: true))
            #expect(try payload(try #require(refunded.signedTransactionInfo)).revocationDate != nil)
            try await system.advance(by: 0)
            #expect(try await system.entitlements(account).balance("credits") ?? 0 == 0, "the credit went back with the refund")
        }
    }

    @Test("The SDK buys a generic product with the request the app's server signs for the order's token; a request that cannot be signed charges nothing and leaves no journal entry")
    func sdk() async throws {
        try await System.run(.sqlite) { system in
            let (_, signer) = try backend(system)
            let (account, store) = try await system.customer("acsdk")
            let app = try App.launch(system, account: account, storeAccount: store)
            let outcome = await app.client.purchase(Self.generic) { token in
                var request = AdvancedCommerceInAppRequest(operation: AdvancedCommerceInAppRequest.createSubscription,
                                                           requestInfo: .init(requestReferenceId: UUID().uuidString.lowercased(), appAccountToken: token.uuidString.lowercased()),
                                                           currency: "USD", taxCode: "C003-00-2")
                request.descriptors = .init(description: "Every article", displayName: "News")
                request.items = [.init(sku: "news.basic", description: "Every article", displayName: "News", price: 4990)]
                request.period = "P1M"
                return try signer.advancedCommerceRequest(request)
            }
            guard case .granted(let owned) = outcome else { Issue.record("not granted: \(outcome)"); return }
            #expect(owned.entitlements.contains { $0.name == "pro" && $0.productId == Self.generic })
            #expect(app.journalEntries.isEmpty)
            struct Unreachable: Error {}
            let refused = await app.client.purchase(Self.oneTime) { _ in throw Unreachable() }
            guard case .failed(let failure) = refused else { Issue.record("\(refused)"); return }
            #expect(failure.code == .offerRefused && app.journalEntries.isEmpty)
            let charged = await system.engine.notifications().filter { $0.type == .oneTimeCharge }
            #expect(charged.isEmpty, "nothing was bought")
        }
    }

    @Test("MIGRATION: the plan goes on under a new original transaction id and stays at its account through renewals, PRICE_CHANGE and METADATA_UPDATE; revoking the migrated plan ends access though the old period had time left", arguments: LedgerKind.allCases)
    func migration(_ kind: LedgerKind) async throws {
        try await System.run(kind) { system in
            let (api, _) = try backend(system)
            let (account, store) = try await system.customer("acmig")
            let (_, purchase, _) = try await system.buy(Self.monthly, account: account, storeAccount: store)
            let old = try #require(purchase.transactionId)
            #expect(try await pro(system, account)?.productId == Self.monthly)

            let migrated = try await api.migrateSubscription(old, AdvancedCommerceMigrateRequest(
                requestInfo: info(), descriptors: .init(description: "Everything", displayName: "Pro"),
                items: [.init(sku: "pro.all", description: "Everything", displayName: "Pro")], targetProductId: Self.generic, taxCode: "C003-00-2"))
            #expect(migrated.signedTransactionInfo != nil && migrated.signedRenewalInfo != nil)
            try await system.advance(by: 0)
            let afterMigration = try #require(try await pro(system, account), "the migrated plan is the same account's")
            #expect(afterMigration.productId == Self.generic && afterMigration.transactionId != old)

            // Renewals of the migrated plan, a price change and new names: still this account's.
            try await system.advance(by: 181)
            let renewed = try #require(try await pro(system, account))
            #expect(renewed.productId == Self.generic && renewed.transactionId != afterMigration.transactionId)
            _ = try await api.changeSubscriptionPrice(renewed.transactionId, AdvancedCommercePriceChangeRequest(requestInfo: info(), items: [.init(sku: "pro.all", price: 5990)]))
            var metadata = AdvancedCommerceChangeMetadataRequest(requestInfo: info())
            metadata.descriptors = .init(displayName: "Pro Max", effective: .immediately)
            _ = try await api.changeSubscriptionMetadata(renewed.transactionId, metadata)
            try await system.advance(by: 300)
            #expect(try await pro(system, account)?.productId == Self.generic)
            let types = try decode(NotificationsReply.self, await system.admin(.get, "/admin/notifications").1).notifications.map(\.notificationType)
            #expect(Set(["MIGRATION", "PRICE_CHANGE", "METADATA_UPDATE"]).isSubset(of: Set(types)), "\(types)")
            do {
                _ = try await api.migrateSubscription(old, AdvancedCommerceMigrateRequest(
                    requestInfo: info(), descriptors: .init(description: "Everything", displayName: "Pro"),
                    items: [.init(sku: "pro.all", description: "Everything", displayName: "Pro")], targetProductId: Self.generic, taxCode: "C003-00-2"))
                Issue.record("a second migration was taken")
            } catch let error as AppStoreClientError {
                #expect(error.apiErrorCode == .subscriptionAlreadyMigrated)
            }

            // Another customer migrates in the free week and the app's server revokes the migrated plan at once: the
            // old period's week is left, but the series it belonged to ended at the migration.
            let (other, otherStore) = try await system.customer("acrev")
            let (_, first, _) = try await system.buy(Self.monthly, account: other, storeAccount: otherStore)
            let moved = try await api.migrateSubscription(try #require(first.transactionId), AdvancedCommerceMigrateRequest(
                requestInfo: info(), descriptors: .init(description: "Everything", displayName: "Pro"),
                items: [.init(sku: "pro.all", description: "Everything", displayName: "Pro")], targetProductId: Self.generic, taxCode: "C003-00-2"))
            try await system.advance(by: 0)
            #expect(try await pro(system, other)?.productId == Self.generic)
            let movedTransaction = try payload(try #require(moved.signedTransactionInfo))
            _ = try await api.revokeSubscription(try #require(movedTransaction.transactionId), AdvancedCommerceRevokeRequest(
                requestInfo: info(), refundRiskingPreference: true, refundType: "FULL", refundReason: "UNSATISFIED_WITH_PURCHASE"))
            try await system.advance(by: 0)
            #expect(try await pro(system, other) == nil, "revoked: no access from the migrated plan, nor from the period it replaced")
            #expect(try await pro(system, account)?.productId == Self.generic, "the first customer's plan is untouched")

            // A third migrates, cancels the migrated plan and subscribes to the old plan again: when the migrated plan
            // expires, Apple's EXPIRED for it must not end the old plan's new, paid period.
            let (third, thirdStore) = try await system.customer("acback")
            let (_, start, _) = try await system.buy(Self.monthly, account: third, storeAccount: thirdStore)
            let plan = try await api.migrateSubscription(try #require(start.transactionId), AdvancedCommerceMigrateRequest(
                requestInfo: info(), descriptors: .init(description: "Everything", displayName: "Pro"),
                items: [.init(sku: "pro.all", description: "Everything", displayName: "Pro")], targetProductId: Self.generic, taxCode: "C003-00-2"))
            let planTransaction = try payload(try #require(plan.signedTransactionInfo))
            _ = try await api.cancelSubscription(try #require(planTransaction.transactionId), AdvancedCommerceCancelRequest(requestInfo: info()))
            try await system.advance(by: 0)
            let (_, back, _) = try await system.buy(Self.monthly, account: third, storeAccount: thirdStore)
            #expect(back.status == "purchased", "\(back)")
            try await system.advance(by: 181)
            #expect(try await pro(system, third)?.productId == Self.monthly, "the old plan's new period grants")
        }
    }
}
