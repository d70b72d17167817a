import AppStoreFormats
import AppStoreTrust
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import StoreSimulator
import Testing

@Suite("When local proof is not enough: verifyReceipt, the Server API, and Apple being down", .timeLimit(.minutes(3)))
struct AskingAppleTests {
    static let premium = "com.example.iapkit.premium"
    static let monthly = "com.example.iapkit.pro.monthly"

    /// The server's services after a deploy whose catalog lacks `productId`.
    static func selling(_ services: PurchaseServices, without productId: String) -> PurchaseServices {
        var products = services.ledger.catalog.products
        products[productId] = nil
        var misconfigured = services
        misconfigured.ledger = Ledger(store: services.ledger.store, catalog: LedgerCatalog(products: products))
        return misconfigured
    }

    /// The server's services on a clock `seconds` later (a reconciler's pass after its backoff).
    static func later(_ services: PurchaseServices, by seconds: TimeInterval) -> PurchaseServices {
        let later = services.now().addingTimeInterval(seconds)
        var moved = services
        moved.now = { later }
        return moved
    }

    @Test("A receipt the server cannot verify locally goes to verifyReceipt: production answers 21007, sandbox grants")
    func receiptThroughVerifyReceipt() async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-rita"])
            let (_, purchase, _) = try await system.buy(Self.premium, account: "rita", storeAccount: "store-rita", submit: false)
            let receipt = try #require(purchase.receipt)
            let (status, answer) = try await system.call(.post, "/v1/purchases", as: "rita", ["receipt": receipt])
            #expect(status == .ok)
            let reply = try decode(PurchaseReply.self, answer)
            #expect(reply.outcome == .granted)
            #expect(reply.entitlements.entitlementNames == ["premium"])
            // The production endpoint was asked first and said 21007; the sandbox endpoint answered.
            let forged = try await system.call(.post, "/v1/purchases", as: "rita", ["receipt": Base64.standardEncode(Array("not a receipt".utf8))])
            #expect(forged.0 == .unprocessableContent)
            #expect(try errorCode(forged.1) == "apple_rejected")
        }
    }

    @Test("A receipt synced by another account of the same Apple ID: each new purchase is looked up for its appAccountToken and goes to its order's account", arguments: [true, false])
    func receiptPurchasesFollowTheirTokens(_ trustReceiptRoot: Bool) async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: trustReceiptRoot, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            let (ann, ben) = ("ann-\(UUID().uuidString.prefix(6))", "ben-\(UUID().uuidString.prefix(6))")
            let household = "store-\(ann)"
            _ = try await system.device(.post, "/sim/accounts", ["id": household])
            // Ben pays on the family iPad; the app dies before it tells the server. Ann opens the app on the iPhone of
            // the same Apple ID and sends the receipt, which lists Ben's purchase without its token.
            let (bensOrder, _, _) = try await system.buy(Self.premium, account: ben, storeAccount: household, submit: false)
            let receipt = try #require(try decode([String: String].self, await system.device(.get, "/sim/accounts/\(household)/receipt"))["receipt"])

            // Apple's Server API down: nothing is bound to Ann; the receipt is held for the reconciler.
            _ = try await system.device(.post, "/sim/faults", ["seed": 3, "rules": [["pathPrefix": "/inApps", "errorRate": 1.0, "errorStatus": 503]]])
            let (heldStatus, _) = try await system.call(.post, "/v1/purchases", as: ann, ["receipt": receipt])
            #expect(heldStatus == .accepted)
            #expect(try await system.entitlements(ann).entitlementNames.isEmpty)

            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            let (status, reply) = try await system.call(.post, "/v1/purchases", as: ann, ["receipt": receipt])
            #expect(status == .ok)
            #expect(try decode(PurchaseReply.self, reply).outcome == .deliveredToOwner, "\(text(reply))")
            #expect(try await system.entitlements(ann).entitlementNames.isEmpty, "Ann did not pay for it")
            #expect(try await system.entitlements(ben).entitlementNames == ["premium"])
            let granted = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
            #expect(granted.contains { $0.orderId == bensOrder.orderId }, "Ben's order is fulfilled by it")
            // The held copy, run by the reconciler later, changes nothing.
            try await system.engine.advanceClock(by: 60)
            _ = try await system.admin(.post, "/admin/reconcile")
            #expect(try await system.entitlements(ann).entitlementNames.isEmpty)
            #expect(try await system.entitlements(ben).entitlementNames == ["premium"])
        }
    }

    @Test("Finish Transaction: with it on, what reached its owner leaves the device's queue though the app died before finish(); off, the queue keeps it",
          arguments: [true, false])
    func finishWithApple(_ on: Bool) async throws {
        try await System.run(.init(deliver: false, finishWithApple: on)) { system in
            let account = "fin-\(UUID().uuidString.prefix(6))"
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-\(account)"])
            // The app uploads and dies before it reads the answer, so it never calls finish().
            let (_, purchase, reply) = try await system.buy(Self.premium, account: account, storeAccount: "store-\(account)")
            #expect(reply?.outcome == .granted)
            let id = try #require(purchase.transactionId)
            func queued() async -> Bool {
                await system.engine.recordedTransactions().first { $0.payload.transactionId == id }?.unfinishedOn.isEmpty == false
            }
            if on {
                // After the answer: the call to Apple, then its count once Apple answered.
                let counted = { system.services.metrics.exposition().contains(#"iapkit_apple_finish_total{result="finished"} 1"#) }
                var waited = 0
                while await queued() || !counted(), waited < 100 {
                    try await Task.sleep(for: .milliseconds(50))
                    waited += 1
                }
                #expect(!(await queued()), "Apple was told the transaction is finished")
                #expect(counted())
            } else {
                try await Task.sleep(for: .milliseconds(300))
                #expect(await queued(), "without the setting, only the device finishes")
            }
        }
    }

    @Test("A bare transaction id is looked up with the Server API, verified and granted")
    func transactionIdLookup() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-tom"])
            let (order, purchase, _) = try await system.buy(Self.premium, account: "tom", storeAccount: "store-tom", submit: false)
            let id = try #require(purchase.transactionId)
            let (status, answer) = try await system.call(.post, "/v1/purchases", as: "tom", PurchaseRequest(transactionId: id, orderId: order.orderId))
            #expect(status == .ok)
            let reply = try decode(PurchaseReply.self, answer)
            #expect(reply.outcome == .granted)
            #expect(reply.orderId == order.orderId)
            let bad = try await system.call(.post, "/v1/purchases", as: "tom", ["transactionId": "../../etc"])
            #expect(bad.0 == .unprocessableContent)
        }
    }

    @Test("A bare transaction id claims nothing nobody holds: another account sending the id of a purchase made without a token is refused (403 possession_required), and the device's signed transaction then binds it to its payer", arguments: LedgerKind.allCases)
    func transactionIdIsNoProofOfPossession(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-vic"])
            // Bought outside the app's flow (an offer code, a promotion): no order, no appAccountToken.
            let bought = try await system.storePurchase(["account": "store-vic", "device": "phone", "productId": Self.premium])
            let id = try #require(bought.transactionId)
            let jws = try #require(bought.signedTransaction)
            // Mallory has the id (a support thread, a screenshot), and an order of her own for the product.
            let order = try decode(OrderReply.self, await system.call(.post, "/v1/orders", as: "mallory", OrderRequest(productId: Self.premium)).1)
            for body in [PurchaseRequest(transactionId: id), PurchaseRequest(transactionId: id, orderId: order.orderId)] {
                let (status, reply) = try await system.call(.post, "/v1/purchases", as: "mallory", body)
                #expect(try status == .forbidden && (errorCode(reply)) == "possession_required", "\(text(reply))")
            }
            #expect(try await system.entitlements("mallory").entitlementNames.isEmpty)
            #expect(try await system.admin(.get, "/admin/transactions/\(id)").0 == .notFound, "nothing stored")
            // Vic's device sends what Apple signed: his.
            let (status, reply) = try await system.call(.post, "/v1/purchases", as: "vic", ["signedTransaction": jws])
            #expect(try status == .ok && (decode(PurchaseReply.self, reply).outcome) == .granted, "\(text(reply))")
            // Now that it is Vic's, his own id lookup is answered; Mallory's is refused as another account's.
            #expect(try decode(PurchaseReply.self, await system.call(.post, "/v1/purchases", as: "vic", PurchaseRequest(transactionId: id)).1).outcome == .alreadyGranted)
            #expect(try await system.call(.post, "/v1/purchases", as: "mallory", ["transactionId": id]).0 == .conflict)
        }
    }

    @Test("Apple down or slow: the receipt is held (202), listed as paid-unfulfilled, and granted by reconciliation later")
    func appleDownThenBack() async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-una"])
            let (order, purchase, _) = try await system.buy(Self.premium, account: "una", storeAccount: "store-una", submit: false)
            let receipt = try #require(purchase.receipt)
            let orderId = order.orderId

            // Down: every verifyReceipt call fails with 503.
            _ = try await system.device(.post, "/sim/faults", ["seed": 7, "rules": [["pathPrefix": "/verifyReceipt", "errorRate": 1.0, "errorStatus": 503],
                                                                                      ["pathPrefix": "/sandbox/verifyReceipt", "errorRate": 1.0, "errorStatus": 503]]])
            let (status, held) = try await system.call(.post, "/v1/purchases", as: "una", ["receipt": receipt, "orderId": orderId])
            #expect(status == .accepted)
            let heldProof = try decode(HeldProofReply.self, held)
            #expect(heldProof.status == "pending")
            // Slow: answers come after the timeout; the same proof is held once.
            _ = try await system.device(.post, "/sim/faults", ["seed": 7, "rules": [["pathPrefix": "/verifyReceipt", "latencyMilliseconds": 1500]]])
            let (slowStatus, slow) = try await system.call(.post, "/v1/purchases", as: "una", ["receipt": receipt, "orderId": orderId])
            #expect(slowStatus == .accepted)
            #expect(try decode(HeldProofReply.self, slow).proofId == heldProof.proofId)
            #expect(try await system.entitlements("una").entitlementNames.isEmpty)

            let lost = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=paid-unfulfilled").1).orders
            #expect(lost.map(\.orderId).contains(orderId))

            // Apple is back: the job's next run grants it.
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            try await system.engine.advanceClock(by: 60)
            let report = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            #expect(report.proofsGranted == 1)
            #expect(try await system.entitlements("una").entitlementNames == ["premium"])
            let granted = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
            #expect(granted.contains { $0.orderId == orderId }, "the receipt's newest purchase of the order's product fulfils it")
            let audit = try decode(AuditReply.self, await system.admin(.get, "/admin/audit").1).entries
            #expect(audit.contains { $0.action.rawValue == "proof-granted" })
        }
    }

    @Test("A held receipt whose order's purchase is refused for a while (its product missing from the catalog) stays pending, though its older purchases are granted, and is granted with its order once the catalog is back")
    func heldReceiptWaitsForItsOrder() async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-ona"])
            // A returning customer: the receipt also lists an earlier purchase, granted before.
            _ = try await system.buy(Self.monthly, account: "ona", storeAccount: "store-ona")
            let (order, purchase, _) = try await system.buy(Self.premium, account: "ona", storeAccount: "store-ona", submit: false)
            let receipt = try #require(purchase.receipt)
            let orderId = order.orderId
            _ = try await system.device(.post, "/sim/faults", ["seed": 7, "rules": [["pathPrefix": "/verifyReceipt", "errorRate": 1.0, "errorStatus": 503],
                                                                                      ["pathPrefix": "/sandbox/verifyReceipt", "errorRate": 1.0, "errorStatus": 503]]])
            #expect(try await system.call(.post, "/v1/purchases", as: "ona", ["receipt": receipt, "orderId": orderId]).0 == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            try await system.engine.advanceClock(by: 60)
            // A deploy with a catalog that lacks the product runs the reconciler.
            let report = try await Reconciler(services: Self.selling(system.services, without: Self.premium)).runOnce()
            #expect(report.proofsGranted == 0 && report.proofsPostponed == 1, "\(report)")
            let pending = try decode(HeldProofsReply.self, await system.admin(.get, "/admin/proofs?state=pending").1).proofs
            #expect(pending.count == 1, "listed for the operator: \(pending)")
            // The catalog is back: the next pass (after the backoff) grants the purchase and fulfils the order.
            let fixed = Self.later(system.services, by: 120)
            #expect(try await Reconciler(services: fixed).runOnce().proofsGranted == 1)
            #expect(try await system.entitlements("ona").entitlementNames.contains("premium"))
            let granted = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=granted").1).orders
            #expect(granted.contains { $0.orderId == orderId })
        }
    }

    @Test("A held receipt synced without an order (StoreKit 1) whose one line is refused for a while stays pending, though its other line is granted; a line of another account's does not reject it")
    func heldReceiptWaitsForEveryLine() async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-pia"])
            // Another account of the app bought without an order on this Apple ID first, and presented it: it is theirs.
            let bare = try await system.storePurchase(["account": "store-pia", "device": "phone", "productId": Self.monthly])
            #expect(try await system.call(.post, "/v1/purchases", as: "pia-brother",
                                          ["signedTransaction": try #require(bare.signedTransaction)]).0 == .ok)
            let (_, purchase, _) = try await system.buy(Self.premium, account: "pia", storeAccount: "store-pia", submit: false)
            let receipt = try #require(purchase.receipt)
            _ = try await system.device(.post, "/sim/faults", ["seed": 7, "rules": [["pathPrefix": "/verifyReceipt", "errorRate": 1.0, "errorStatus": 503],
                                                                                      ["pathPrefix": "/sandbox/verifyReceipt", "errorRate": 1.0, "errorStatus": 503]]])
            #expect(try await system.call(.post, "/v1/purchases", as: "pia", ["receipt": receipt]).0 == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            try await system.engine.advanceClock(by: 60)
            // A deploy whose catalog lacks the premium product: that line is the operator's to fix, the other line is
            // another account's (final). The proof is neither rejected nor taken as done.
            let report = try await Reconciler(services: Self.selling(system.services, without: Self.premium)).runOnce()
            #expect(report.proofsGranted == 0 && report.proofsRejected == 0 && report.proofsPostponed == 1, "\(report)")
            #expect(try decode(HeldProofsReply.self, await system.admin(.get, "/admin/proofs?state=pending").1).proofs.count == 1)
            // The catalog is back: the next pass (after the backoff) grants the premium line.
            let fixed = Self.later(system.services, by: 120)
            #expect(try await Reconciler(services: fixed).runOnce().proofsGranted == 1)
            #expect(try await system.entitlements("pia").entitlementNames == ["premium"])
            #expect(try await system.entitlements("pia-brother").entitlementNames == ["pro"])
        }
    }

    @Test("A held receipt whose order is refused (another account's order named) goes again without the order and is granted by its payment's token; one nothing can change is rejected, not retried for ever",
          arguments: LedgerKind.allCases)
    func heldReceiptWithAnotherAccountsOrder(_ kind: LedgerKind) async throws {
        try await System.run(.init(kind: kind, deliver: false, trustReceiptRoot: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            let (ora, oraStore) = try await system.customer("ora")
            let (_, purchase, _) = try await system.buy(Self.premium, account: ora, storeAccount: oraStore, submit: false)
            let receipt = try #require(purchase.receipt)
            // An order of another account's, named by a client that mixed up its sign-ins.
            let zed = "zed-\(UUID().uuidString.prefix(8))"
            let (_, other) = try await system.call(.post, "/v1/orders", as: zed, OrderRequest(productId: Self.premium))
            let othersOrder = try decode(OrderReply.self, other).orderId
            let appleDown = FaultPlan(seed: 7, rules: [.init(pathPrefix: "/verifyReceipt", errorRate: 1.0, errorStatus: 503),
                                                       .init(pathPrefix: "/sandbox/verifyReceipt", errorRate: 1.0, errorStatus: 503)])
            try await system.inject(appleDown)
            #expect(try await system.call(.post, "/v1/purchases", as: ora, ["receipt": receipt, "orderId": othersOrder]).0 == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            try await system.engine.advanceClock(by: 60)
            let report = try await Reconciler(services: system.services).runOnce()
            #expect(report.proofsGranted == 1 && report.proofsPostponed == 0, "\(report)")
            #expect(try await system.entitlements(ora).entitlementNames == ["premium"])
            #expect(try await system.entitlements(zed).entitlementNames.isEmpty)

            // A receipt whose only line is of a product no longer sold, and long taken by its owner: nothing can change.
            try await system.engine.advanceClock(by: 1)
            let fresh = try #require(try decode([String: String].self, await system.device(.get, "/sim/accounts/\(oraStore)/receipt"))["receipt"])
            #expect(fresh != receipt, "a receipt made later, so held as a proof of its own")
            try await system.inject(appleDown)
            let (_, resent) = try await system.call(.post, "/v1/purchases", as: ora, PurchaseRequest(receipt: fresh))
            #expect((try? decode(HeldProofReply.self, resent))?.status == "pending", "\(text(resent))")
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            let retired = try await Reconciler(services: Self.later(Self.selling(system.services, without: Self.premium), by: 60)).runOnce()
            #expect(retired.proofsRejected == 1 && retired.proofsPostponed == 0, "\(retired)")
        }
    }

    @Test("Without the Server API a held receipt's line names no token: refused for another account's order, it is not bound to the uploader without it, and the payer's own upload then gets it")
    func heldReceiptWithoutTokensKeepsTheOrdersOwner() async throws {
        try await System.run(.init(deliver: false, trustReceiptRoot: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            // Bo orders and pays on the family's Apple ID; the app has not uploaded it yet when Al signs in and a StoreKit 1
            // client sends the receipt with the order it still holds (Bo's).
            let (bo, family) = try await system.customer("bo")
            let al = "al-\(UUID().uuidString.prefix(8))"
            let (order, purchase, _) = try await system.buy(Self.premium, account: bo, storeAccount: family, submit: false)
            let receipt = try #require(purchase.receipt)
            _ = try await system.device(.post, "/sim/faults", ["seed": 7, "rules": [["pathPrefix": "/verifyReceipt", "errorRate": 1.0, "errorStatus": 503],
                                                                                      ["pathPrefix": "/sandbox/verifyReceipt", "errorRate": 1.0, "errorStatus": 503]]])
            #expect(try await system.call(.post, "/v1/purchases", as: al, ["receipt": receipt, "orderId": order.orderId]).0 == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            try await system.engine.advanceClock(by: 60)
            // A server without the Server API: the receipt's lines carry no token.
            var configuration = system.configuration
            configuration.appStore.serverAPIBaseURL = nil
            var services = system.services
            services.verifier = ProofVerifier(roots: system.roots, configuration: configuration, apple: try AppleAccess(configuration))
            let report = try await Reconciler(services: services).runOnce()
            #expect(report.proofsGranted == 0, "\(report)")
            #expect(try await system.entitlements(al).entitlementNames.isEmpty, "Al did not pay for it")
            let (status, answer) = try await system.call(.post, "/v1/purchases", as: bo, PurchaseRequest(signedTransaction: (try #require(purchase.signedTransaction) as String)))
            #expect(try status == .ok && (decode(PurchaseReply.self, answer).outcome) == .granted, "\(status) \(text(answer))")
        }
    }

    @Test("Of a proof's refused lines, one that can still change decides: a final refusal of one line never stands for the proof while another waits for the operator or a retry")
    func decidingRefusal() {
        let final = LedgerError(.transactionBoundElsewhere, "another account's")
        let fixable = LedgerError(.unknownProduct, "not in the catalog")
        let transient = LedgerError(.storage, "database restarting")
        typealias Line = Result<SubmissionResult, LedgerError>
        #expect(Reconciler.decidingRefusal([Line.failure(final), .failure(fixable)])?.code == .unknownProduct)
        #expect(Reconciler.decidingRefusal([Line.failure(final), .failure(transient), .failure(fixable)])?.code == .storage)
        #expect(Reconciler.decidingRefusal([Line.failure(final), .failure(final)])?.code == .transactionBoundElsewhere)
        #expect(Reconciler.decidingRefusal([Line]()) == nil)
        // A held proof nothing can change any more is rejected, not retried for ever: there a final refusal answers.
        #expect(Reconciler.decidingRefusal([Line.failure(fixable), .failure(final)], final: true)?.code == .transactionBoundElsewhere)
        let malformed = LedgerError(.invalidInput, "held from Sandbox; this one says Production")
        #expect(Reconciler.mayStillBeGranted(transient, bound: false))
        #expect(Reconciler.mayStillBeGranted(fixable, bound: false), "a purchase of a product the catalog lacks that no account holds (stored unbound by a notification, or not at all)")
        #expect(!Reconciler.mayStillBeGranted(fixable, bound: true), "a retired product's purchase an account took long ago")
        #expect(!Reconciler.mayStillBeGranted(malformed, bound: false))
        #expect(!Reconciler.mayStillBeGranted(final, bound: false))
        #expect(Reconciler.nothingGranted([Line.failure(final)]) && Reconciler.nothingGranted([Line]()))
        // Rejected for the final line; a client sending the proof again hears the line that is not (it must not finish it).
        let orderOfAnother = LedgerError(.orderAccountMismatch, "the order is another account's")
        let rejected = Reconciler.rejection([Line.failure(final), .failure(orderOfAnother)])
        #expect(rejected?.deciding.code == "transaction_bound_elsewhere" && rejected?.answered.code == "order_account_mismatch")
        #expect(rejected?.deciding.refusalClass == .final && rejected?.answered.refusalClass == .operator)
    }

    @Test("A missed renewal notification is repaired from the Server API by reconciliation")
    func staleSubscriptionRepaired() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-vic"])
            _ = try await system.buy(Self.monthly, account: "vic", storeAccount: "store-vic")
            #expect(try await system.entitlements("vic").entitlementNames == ["pro"])
            // The free week ends and the store renews, but no notification reaches the server.
            try await system.engine.advanceClock(by: 200)
            // Apple's notification history unavailable: this pass must repair on its own (the history would carry the
            // notification that was never delivered).
            _ = try await system.device(.post, "/sim/faults", ["seed": 3, "rules": [["pathPrefix": "/inApps/v1/notifications/history", "errorRate": 1.0,
                                                                                     "errorStatus": 500]]])
            #expect(try await system.entitlements("vic").entitlementNames.isEmpty)
            let report = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            #expect(report.subscriptionsRefreshed == 1)
            #expect(try await system.entitlements("vic").entitlementNames == ["pro"])
            // Nothing changed since: a second run stores nothing new.
            #expect(try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1).subscriptionsRefreshed == 0)
        }
    }

    @Test("A refund notification Apple gave up on is read back from Apple's notification history; while Apple is down the reader stops and resumes")
    func abandonedNotificationRecovered() async throws {
        try await System.run(.init(deliver: false, appleAttempts: 2, appleTimeoutSeconds: 0.5)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-xan"])
            let (_, purchase, _) = try await system.buy(Self.premium, account: "xan", storeAccount: "store-xan")
            let id = try #require(purchase.transactionId)
            #expect(try await system.entitlements("xan").entitlementNames == ["premium"])
            // Apple refunds it; the notification never reaches the server (no webhook delivery here).
            _ = try await system.device(.post, "/sim/transactions/\(id)/refund")
            try await system.engine.advanceClock(by: 60)
            #expect(try await system.entitlements("xan").entitlementNames == ["premium"], "the server has not heard yet")

            // Apple down: the history cannot be read; nothing is skipped, the report says why.
            _ = try await system.device(.post, "/sim/faults", ["seed": 3, "rules": [["pathPrefix": "/inApps/v1/notifications/history", "errorRate": 1.0,
                                                                                     "errorStatus": 503]]])
            let down = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            #expect(down.notificationsRecovered == 0)
            #expect(down.notificationHistoryStalled?.contains("notification history") == true, "\(down)")
            #expect(try await system.entitlements("xan").entitlementNames == ["premium"])

            // Apple back: the refund is applied once, audited, and a second pass finds nothing new.
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            let back = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            // Two were never delivered: the purchase's ONE_TIME_CHARGE and the REFUND.
            #expect(back.notificationsRecovered == 2, "\(back)")
            #expect(back.notificationHistoryStalled == nil)
            #expect(try await system.entitlements("xan").entitlementNames.isEmpty, "the refund ended the entitlement")
            #expect(try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1).notificationsRecovered == 0)
            let audit = try decode(AuditReply.self, await system.admin(.get, "/admin/audit").1).entries
            #expect(audit.contains { $0.action.rawValue == "notification-recovered" && $0.detail.hasPrefix("REFUND") })
        }
    }

    @Test("Admin: closed without the key; a stuck order settled with a transaction, another closed with a note; both audited")
    func adminSettles() async throws {
        try await System.run(.init(deliver: false)) { system in
            let closed = try await system.server.execute(uri: "/admin/orders?state=stuck", method: .get)
            #expect(closed.status == .unauthorized)
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-wes"])
            // Paid in the store, never submitted: after expiry the order is stuck.
            let (order, purchase, _) = try await system.buy(Self.premium, account: "wes", storeAccount: "store-wes", submit: false)
            let (other, _) = try await system.call(.post, "/v1/orders", as: "wes", ["productId": Self.premium])
            #expect(other == .created)
            try await system.engine.advanceClock(by: 86_400 + 1)
            let stuck = try decode(AdminOrdersReply.self, await system.admin(.get, "/admin/orders?state=stuck").1).orders
            let ids = stuck.map(\.orderId)
            #expect(ids.contains(order.orderId))
            let orderId = order.orderId
            let settled = try await system.admin(.post, "/admin/orders/\(orderId)/settle",
                                                 ["transactionId": purchase.transactionId ?? "", "note": "customer emailed the receipt"])
            #expect(settled.0 == .ok)
            #expect(try decode(SettleReply.self, settled.1).state == "granted")
            #expect(try await system.entitlements("wes").entitlementNames == ["premium"])
            let remaining = ids.filter { $0 != orderId }
            for id in remaining {
                #expect(try decode(SettleReply.self, await system.admin(.post, "/admin/orders/\(id)/settle", SettleRequest(note: "abandoned")).1).state == "settled")
            }
            let audit = try decode(AuditReply.self, await system.admin(.get, "/admin/audit").1).entries
            #expect(audit.contains { $0.action.rawValue == "settle-with-transaction" && $0.subject == orderId })
            #expect(audit.contains { $0.action.rawValue == "settle" })
        }
    }

    @Test("An order paid in the store but never reported is found in the Server API history and granted by reconciliation")
    func staleOrderRepaired() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-xia"])
            _ = try await system.buy("com.example.iapkit.coins.100", account: "xia", storeAccount: "store-xia")
            let (order, _, _) = try await system.buy(Self.premium, account: "xia", storeAccount: "store-xia", submit: false)
            #expect(try await system.entitlements("xia").entitlementNames.isEmpty)
            // Apple's notification history unavailable: this pass must repair on its own (the history would carry the
            // notification that was never delivered).
            _ = try await system.device(.post, "/sim/faults", ["seed": 3, "rules": [["pathPrefix": "/inApps/v1/notifications/history", "errorRate": 1.0,
                                                                                     "errorStatus": 500]]])
            try await system.engine.advanceClock(by: 601)
            let report = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            #expect(report.ordersRepaired == 1)
            #expect(try await system.entitlements("xia").entitlementNames == ["premium"])
            let granted = try await system.admin(.get, "/admin/orders?state=granted")
            #expect(try decode(AdminOrdersReply.self, granted.1).orders.contains { $0.orderId == order.orderId })
            #expect(try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1).ordersRepaired == 0, "a repaired order is closed")
        }
    }

    @Test("A long-standing customer's lost order is repaired too: their history is longer than the pages the repair reads, newest first")
    func staleOrderOfLongHistoryRepaired() async throws {
        try await System.run(.init(deliver: false)) { system in
            _ = try await system.device(.post, "/sim/accounts", ["id": "store-yan"])
            _ = try await system.buy("com.example.iapkit.coins.100", account: "yan", storeAccount: "store-yan")
            // 220 coin purchases the app never finished: Apple's history keeps them, 11 pages of 20 before the new one.
            for _ in 0..<220 {
                _ = try await system.device(.post, "/sim/purchases", ["account": "store-yan", "device": "phone", "productId": "com.example.iapkit.coins.100"])
            }
            let (order, _, _) = try await system.buy(Self.premium, account: "yan", storeAccount: "store-yan", submit: false)
            _ = try await system.device(.post, "/sim/faults", ["seed": 3, "rules": [["pathPrefix": "/inApps/v1/notifications/history", "errorRate": 1.0,
                                                                                     "errorStatus": 500]]])
            try await system.engine.advanceClock(by: 601)
            let report = try decode(ReconcileReport.self, await system.admin(.post, "/admin/reconcile").1)
            #expect(report.ordersRepaired == 1, "\(report)")
            #expect(try await system.entitlements("yan").entitlementNames == ["premium"])
            let granted = try await system.admin(.get, "/admin/orders?state=granted")
            #expect(try decode(AdminOrdersReply.self, granted.1).orders.contains { $0.orderId == order.orderId })
        }
    }
}
