import Foundation

/// Products, purchases (joined when tapped twice) and purchases promoted on the App Store.
extension PurchaseClient {
    // MARK: Products

    /// Products by id, cached after the first answer; ids the store does not sell are reported.
    public func products(_ productIds: [String]) async throws -> (products: [StoreProduct], invalidProductIds: [String]) {
        let missing = productIds.filter { productCache[$0] == nil }
        var invalid: [String] = []
        if !missing.isEmpty {
            let answer = try await store.products(missing)
            for product in answer.products { productCache[product.productId] = product }
            invalid = answer.invalidProductIds
        }
        return (productIds.compactMap { productCache[$0] }, invalid)
    }

    /// Whether this device may pay (parental controls and device management can forbid it).
    public func canMakePayments() async -> Bool { await store.canMakePayments() }

    // MARK: Purchase

    /// Buys `productId`: order, payment, journal, upload, finish. A second call for a product whose purchase is
    /// still running joins it (one order, one payment sheet) and gets the same outcome.
    public func purchase(_ productId: String, quantity: Int = 1) async -> PurchaseOutcome {
        await purchase(productId, quantity: quantity, promotionalOffer: nil)
    }

    /// Buys `productId` redeeming what the app's server signs for it: promotional offer `promotionalOffer` (a
    /// retention or win-back offer set up in App Store Connect, signed only for a customer its rules allow), and, with
    /// `serverIntroductoryEligibility`, the server's judgement of the introductory offer (across the customer's Apple
    /// IDs) instead of StoreKit's. A refused signature fails the purchase before anything is ordered or charged.
    public func purchase(_ productId: String, quantity: Int = 1, promotionalOffer: String?, serverIntroductoryEligibility: Bool = false) async -> PurchaseOutcome {
        // A second tap joins the purchase under way only if it asks for the same: an offer must not ride on a full-price payment.
        // Nor may another account's tap, or a tap for another quantity, ride on a payment under way.
        let key = [accountId ?? "", productId, String(quantity), promotionalOffer ?? "", serverIntroductoryEligibility ? "intro" : ""].joined(separator: "\u{0}")
        return await joining(key) {
            await self.performPurchase(productId, quantity: quantity, promotionalOffer: promotionalOffer,
                                       serverIntroductoryEligibility: serverIntroductoryEligibility)
        }
    }

    /// Buys an Advanced Commerce API generic product: `signRequest` asks the app's own server to sign what is sold
    /// (SKUs, prices, period) for the order's `appAccountToken`, which the request must name (the App Store refuses a
    /// request whose token differs from the purchase's), and StoreKit charges what the request says. A request that
    /// cannot be signed fails the purchase before anything is charged, and leaves nothing in the journal. A second tap
    /// while one is under way for the same product joins it: one order, one payment.
    public func purchase(_ productId: String, advancedCommerce signRequest: @escaping @Sendable (_ appAccountToken: UUID) async throws -> String) async -> PurchaseOutcome {
        await joining(["advancedCommerce", accountId ?? "", productId].joined(separator: "\u{0}")) {
            await self.performPurchase(productId, quantity: 1, advancedCommerce: signRequest)
        }
    }

    /// Runs `purchase` unless one with the same key is under way, whose outcome is then the answer.
    /// The purchase leaves the table as it ends, not when its caller resumes: a tap in between is a new purchase.
    private func joining(_ key: String, _ purchase: @escaping @Sendable () async -> PurchaseOutcome) async -> PurchaseOutcome {
        if let running = purchasesInFlight[key] { return await running.task.value }
        let id = UUID()
        // Isolated to this actor, the task cannot start before the table holds it.
        let task = Task {
            let outcome = await purchase()
            self.purchaseEnded(key, id)
            return outcome
        }
        purchasesInFlight[key] = (id, task)
        return await task.value
    }

    private func purchaseEnded(_ key: String, _ id: UUID) {
        if purchasesInFlight[key]?.id == id { purchasesInFlight[key] = nil }
    }

    private func performPurchase(_ productId: String, quantity: Int, promotionalOffer: String? = nil,
                                 serverIntroductoryEligibility: Bool = false,
                                 advancedCommerce signRequest: (@Sendable (UUID) async throws -> String)? = nil) async -> PurchaseOutcome {
        guard await store.canMakePayments() else { return .failed(PurchaseFailure(.paymentsNotAllowed, "payments are not allowed on this device")) }
        // The account the order is for: a sign-in change during the payment must not move the payment.
        let owner = accountId
        var offers = SignedOffers()
        if promotionalOffer != nil || serverIntroductoryEligibility {
            do {
                offers = try await server.signOffers(productId: productId, promotionalOffer: promotionalOffer,
                                                     introductoryOfferEligibility: serverIntroductoryEligibility,
                                                     appTransaction: try? await store.appTransaction())
            } catch let failure as PurchaseFailure {
                return .failed(failure)
            } catch {
                return .failed(PurchaseFailure(.offerRefused, "\(error)"))
            }
            // Signed for the account signed in when asked: another one now would pay with the first one's offer.
            guard accountId == owner else { return .failed(PurchaseFailure(.offerRefused, "the account changed while the offer was being signed")) }
        }
        eventBroadcast.send(.creatingOrder(productId: productId))
        let order: PurchaseServerClient.Order
        // For the owner, checked by the server against the token it gets: the sign-in may change while the token is
        // fetched, and an order of the other account, paid and journaled as the owner's, would never be accepted.
        do { order = try await server.createOrder(productId: productId, expectedAccountId: owner) } catch let failure as PurchaseFailure {
            return .failed(failure)
        } catch {
            return .failed(PurchaseFailure(.orderFailed, "\(error)"))
        }
        let intent = JournalEntry(kind: .intent, orderId: order.orderId, productId: productId, appAccountToken: order.appAccountToken, accountId: owner)
        do { try journal.write(intent) } catch {
            return .failed(PurchaseFailure(.orderFailed, "the journal cannot be written, so no payment is started: \(error)"))
        }
        if let signRequest {
            do { offers.advancedCommerceJWS = try await signRequest(order.appAccountToken) } catch {
                try? journal.remove(key: intent.key)
                return .failed(PurchaseFailure(.offerRefused, "the app's server did not sign the Advanced Commerce request: \(error)"))
            }
            guard accountId == owner else {
                try? journal.remove(key: intent.key)
                return .failed(PurchaseFailure(.offerRefused, "the account changed while the request was being signed"))
            }
        }
        eventBroadcast.send(.awaitingPayment(orderId: order.orderId))
        let result: StorePurchaseResult
        do { result = try await store.purchase(productId, appAccountToken: order.appAccountToken, quantity: quantity, offers: offers) } catch {
            // No answer from the store: whether it charged is unknown. The intent stays, so a transaction arriving
            // later still finds its order.
            return .failed(PurchaseFailure(.storeFailed, "\(error)"))
        }
        switch result {
        case .purchased(let transaction):
            checkpointObserver?(.afterPayment)
            return await deliver(transaction, orderId: order.orderId, accountId: owner)
        case .pending:
            eventBroadcast.send(.pendingApproval(productId: productId))
            return .pendingApproval
        case .cancelled:
            try? journal.remove(key: intent.key)
            return .cancelled
        case .failed(let reason):
            try? journal.remove(key: intent.key)
            return .failed(PurchaseFailure(.storeFailed, reason))
        }
    }

    /// A purchase started on the App Store's product page. Held — in the journal, so a relaunch keeps it — until
    /// ``readyForPromotedPurchases()`` (e.g. after sign-in), then bought as any purchase.
    public func handlePromotedPurchase(_ productId: String) async -> PurchaseOutcome? {
        guard readyForPromoted else {
            if !promoted.contains(productId) { promoted.append(productId) }
            do { try journal.write(JournalEntry(kind: .promoted, orderId: nil, productId: productId, appAccountToken: nil, accountId: accountId)) } catch {
                eventBroadcast.send(.journalFailed(transactionId: nil, reason: "a promoted purchase of \(productId) is held in memory only: \(error)"))
            }
            return nil
        }
        return await purchase(productId)
    }

    /// The app can take promoted purchases now: the held ones (this launch's and earlier ones from the journal) run,
    /// in order.
    @discardableResult
    public func readyForPromotedPurchases() async -> [PurchaseOutcome] {
        readyForPromoted = true
        var held = promoted
        promoted = []
        for entry in (try? journal.entries()) ?? [] where entry.kind == .promoted && !held.contains(entry.productId) { held.append(entry.productId) }
        var outcomes: [PurchaseOutcome] = []
        for productId in held {
            outcomes.append(await purchase(productId))
            try? journal.remove(key: JournalEntry(kind: .promoted, orderId: nil, productId: productId, appAccountToken: nil).key)
        }
        return outcomes
    }
}
