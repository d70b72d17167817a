import AppStoreFormats
import AppStoreTrust
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import Testing

@Suite("Retired products over HTTP, and the start refused while the catalog drops a product customers own", .timeLimit(.minutes(3)))
struct RetiredProductServerTests {
    static let coins = "com.example.iapkit.coins.100"
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"
    static let yearly = "com.example.iapkit.pro.yearly"

    /// The demo catalog with premium and the monthly plan retired.
    static let retiredCatalog: LedgerCatalog = {
        var products = LedgerCatalog.demo.products
        products[premium] = products[premium]?.asRetired
        products[monthly] = products[monthly]?.asRetired
        return LedgerCatalog(products: products)
    }()

    @Test("POST /v1/orders for a retired product is 410 product_retired (class operator) and makes no order; a payment for it that arrives late, one from another device and a restore still grant; no offer is signed for it",
          arguments: LedgerKind.allCases)
    func overHTTP(_ kind: LedgerKind) async throws {
        try await System.run(System.Options(kind: kind, deliver: false)) { system in
            let (account, store) = try await system.customer("rita")
            // While premium was sold: the order, and a payment the device could not upload yet (Ask to Buy approved
            // late, a phone offline).
            let (order, purchase, _) = try await system.buy(Self.premium, account: account, storeAccount: store, submit: false)
            let paid = try #require(purchase.signedTransaction)

            // The operator retires premium and the monthly plan.
            let ledger = Ledger(store: system.services.ledger.store, catalog: Self.retiredCatalog)
            let services = PurchaseServices(ledger: ledger,
                                            verifier: ProofVerifier(roots: system.roots, configuration: system.configuration,
                                                                    apple: try AppleAccess(system.configuration)),
                                            authenticator: system.services.authenticator, adminKey: System.adminKey, now: system.services.now)
            try await buildApplication(services, port: 0).test(.live) { server in
                @Sendable func call(_ method: HTTPRequest.Method, _ path: String, _ body: any Encodable) async throws -> (HTTPResponse.Status, Data) {
                    let response = try await server.execute(uri: path, method: method, headers: [.authorization: "Bearer \(try await system.token(account))"],
                                                            body: ByteBuffer(bytes: try encodeRequest(body)))
                    return (response.status, Data(response.body.readableBytesView))
                }
                for product in [Self.premium, Self.monthly] {
                    let (status, body) = try await call(.post, "/v1/orders", OrderRequest(productId: product))
                    #expect(status == .gone, "\(text(body))")
                    let refusal = try decode(ErrorBody.self, body).error
                    #expect(refusal.code == .productRetired && refusal.class == .operator, "\(refusal)")
                }
                #expect(try await call(.post, "/v1/orders", OrderRequest(productId: Self.yearly)).0 == .created, "the plan still sold")
                let orders = try await ledger.timeline(accountId: account).filter { $0.kind == .order }
                #expect(orders.count == 2 && !orders.contains { $0.detail.contains(Self.monthly) }, "no order for a retired product: \(orders)")

                // The late payment, with its order from before: granted.
                let (status, body) = try await call(.post, "/v1/purchases", PurchaseRequest(signedTransaction: paid, orderId: order.orderId))
                #expect(status == .ok, "\(text(body))")
                #expect(try decode(PurchaseReply.self, body).outcome == .granted)
                // Bought on another device, with no order (a promoted purchase): granted.
                let promoted = try await system.storePurchase(["account": store, "device": "ipad", "productId": Self.monthly])
                let other = try #require(promoted.signedTransaction)
                let (promotedStatus, promotedBody) = try await call(.post, "/v1/purchases", PurchaseRequest(signedTransaction: other))
                #expect(promotedStatus == .ok && (try? decode(PurchaseReply.self, promotedBody).outcome) == .granted, "\(text(promotedBody))")
                // A restore on a new phone: both still owned.
                let (restoreStatus, restoreBody) = try await call(.post, "/v1/restore", RestoreRequest(signedTransactions: [paid, other]))
                #expect(restoreStatus == .ok, "\(text(restoreBody))")
                let restored = try decode(RestoreReply.self, restoreBody)
                #expect(restored.refused.isEmpty)
                #expect(Set(restored.entitlements.entitlementNames) == ["premium", "pro"], "\(restored)")
                #expect(try await ledger.entitlements(accountId: account, now: system.services.now()).entitlements.map(\.productId)
                        == [Self.premium, Self.monthly])

                // Offers are signed only for what is sold.
                let (offerStatus, offerBody) = try await call(.post, "/v1/offers/sign",
                                                              OfferSignRequest(kind: .promotionalOffer, productId: Self.monthly, offerIdentifier: "winback"))
                #expect(offerStatus == .gone && (try? errorCode(offerBody)) == .productRetired, "\(text(offerBody))")
                let (eligibilityStatus, eligibilityBody) = try await call(.post, "/v1/offers/sign",
                                                                          OfferSignRequest(kind: .introductoryOfferEligibility, productId: Self.monthly))
                #expect(eligibilityStatus == .gone && (try? errorCode(eligibilityBody)) == .productRetired, "\(text(eligibilityBody))")
            }
        }
    }

    @Test("The start is refused while the catalog drops a product customers own, naming each; retired, or never bought, it starts")
    func startRefused() async throws {
        var configuration = try LoneServer.configuration(.sqlite)
        let seeded = Ledger(store: try await Ledger.openStore(url: configuration.databaseURL), catalog: .demo)
        try await seeded.migrate()
        let now = Date()
        for (product, type) in [(Self.premium, ProductType.nonConsumable), (Self.coins, .consumable)] {
            var payload = JWSTransactionDecodedPayload()
            payload.transactionId = UUID().uuidString
            payload.originalTransactionId = payload.transactionId
            payload.productId = product
            payload.type = type
            payload.quantity = 1
            payload.environment = .sandbox
            payload.purchaseDate = now.addingTimeInterval(-60)
            payload.signedDate = payload.purchaseDate
            _ = try await seeded.submit(.init(accountId: "owner", transaction: payload), now: now)
        }
        // Never bought: the yearly plan may go.
        configuration.catalog.products[Self.yearly] = nil
        _ = try await PurchaseServices.open(configuration, roots: TrustRoots())

        configuration.catalog.products[Self.premium] = nil
        configuration.catalog.products[Self.coins] = nil
        do {
            _ = try await PurchaseServices.open(configuration, roots: TrustRoots())
            Issue.record("the server started without products customers own")
        } catch let error as ConfigurationError {
            #expect(error.description.contains("\(Self.coins), \(Self.premium)"), "\(error)")
            #expect(error.description.contains(#""retired": true"#), "\(error)")
        }
        await #expect(throws: ConfigurationError.self) {
            try await PurchaseServices.checkCatalogKeepsOwnedProducts(Ledger(store: seeded.store, catalog: configuration.catalog))
        }

        configuration.catalog.products[Self.premium] = ProductRule.nonConsumable("premium").asRetired
        configuration.catalog.products[Self.coins] = ProductRule.consumable(currency: "coins", amount: 100).asRetired
        let services = try await PurchaseServices.open(configuration, roots: TrustRoots())
        #expect(try await services.ledger.entitlements(accountId: "owner").entitlements.map(\.name) == ["premium"], "still honoured")
        #expect(try await services.ledger.entitlements(accountId: "owner").balances["coins"] == 100)
    }
}
