import Foundation

/// Products, purchases (joined when tapped twice) and purchases promoted on the App Store.
extension PurchaseClient {
    // MARK: Products

    /// Products by id, cached after the first answer; ids the store does not sell are reported. Throws
    /// ``PurchaseFailure/Code/storeUnavailable`` when the store cannot be asked.
    public func products(_ productIds: [String]) async throws(PurchaseFailure) -> (products: [StoreProduct], invalidProductIds: [String]) {
        let missing = productIds.filter { productCache[$0] == nil }
        var invalid: [String] = []
        if !missing.isEmpty {
            let answer: (products: [StoreProduct], invalidProductIds: [String])
            do { answer = try await store.products(missing) } catch { throw storeFailure(error, productId: nil) }
            for product in answer.products { productCache[product.productId] = product }
            invalid = answer.invalidProductIds
        }
        return (productIds.compactMap { productCache[$0] }, invalid)
    }

    /// Whether this device may pay (parental controls and device management can forbid it). False too when the store
    /// cannot be asked.
    public func canMakePayments() async -> Bool { (try? await store.canMakePayments()) ?? false }

    // MARK: Purchase

    /// Buys `productId`: order, payment, journal, upload, finish. A second call for a product whose purchase is
    /// still running joins it (one order, one payment sheet) and gets the same outcome.
    ///
    /// `confirmIn`: where StoreKit shows the payment sheet — Apple asks UIKit apps to name the scene or view controller
    /// (`.scene(_:)`, `.viewController(_:)`), SwiftUI apps to pass the environment's `PurchaseAction`
    /// (`.purchaseAction(_:)`), macOS apps the window.
    public func purchase(_ productId: String, quantity: Int = 1, confirmIn confirmation: PurchaseConfirmation? = nil) async -> PurchaseOutcome {
        await purchase(productId, quantity: quantity, promotionalOffer: nil, confirmIn: confirmation)
    }

    /// Buys `productId` redeeming what the app's server signs for it: promotional offer `promotionalOffer` (a
    /// retention or win-back offer set up in App Store Connect, signed only for a customer its rules allow), and, with
    /// `serverIntroductoryEligibility`, the server's judgement of the introductory offer (across the customer's Apple
    /// IDs) instead of StoreKit's. A refused signature fails the purchase before anything is ordered or charged.
    public func purchase(_ productId: String, quantity: Int = 1, promotionalOffer: String?, serverIntroductoryEligibility: Bool = false,
                         confirmIn confirmation: PurchaseConfirmation? = nil) async -> PurchaseOutcome {
        // A second tap joins the purchase under way only if it asks for the same: an offer must not ride on a full-price payment.
        // Nor may another account's tap, or a tap for another quantity, ride on a payment under way.
        let key = [accountId ?? "", productId, String(quantity), promotionalOffer ?? "", serverIntroductoryEligibility ? "intro" : ""].joined(separator: "\u{0}")
        return await joining(key) {
            await self.performPurchase(productId, quantity: quantity, promotionalOffer: promotionalOffer,
                                       serverIntroductoryEligibility: serverIntroductoryEligibility, confirmation: confirmation)
        }
    }

    /// Buys an Advanced Commerce API generic product: `signRequest` asks the app's own server to sign what is sold
    /// (SKUs, prices, period) for the order's `appAccountToken`, which the request must name (the App Store refuses a
    /// request whose token differs from the purchase's), and StoreKit charges what the request says. A request that
    /// cannot be signed fails the purchase before anything is charged, and leaves nothing in the journal. A second tap
    /// while one is under way for the same product joins it: one order, one payment.
    public func purchase(_ productId: String, confirmIn confirmation: PurchaseConfirmation? = nil,
                         advancedCommerce signRequest: @escaping @Sendable (_ appAccountToken: UUID) async throws -> String) async -> PurchaseOutcome {
        await joining(["advancedCommerce", accountId ?? "", productId].joined(separator: "\u{0}")) {
            await self.performPurchase(productId, quantity: 1, confirmation: confirmation, advancedCommerce: signRequest)
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
                                 serverIntroductoryEligibility: Bool = false, winBackOfferId: String? = nil,
                                 confirmation: PurchaseConfirmation? = nil,
                                 advancedCommerce signRequest: (@Sendable (UUID) async throws -> String)? = nil) async -> PurchaseOutcome {
        let outcome = await attemptPurchase(productId, quantity: quantity, promotionalOffer: promotionalOffer,
                                            serverIntroductoryEligibility: serverIntroductoryEligibility, winBackOfferId: winBackOfferId,
                                            confirmation: confirmation, advancedCommerce: signRequest)
        return ended(outcome, productId: productId)
    }

    /// Every purchase's events end: a spinner driven by them stops on a cancel or a failure too (the paid endings have
    /// their own events, sent where they happen).
    func ended(_ outcome: PurchaseOutcome, productId: String) -> PurchaseOutcome {
        switch outcome {
        case .cancelled: send(.cancelled(productId: productId))
        case .failed(let failure): send(.failed(productId: productId, failure))
        default: break
        }
        return outcome
    }

    private func attemptPurchase(_ productId: String, quantity: Int, promotionalOffer: String?, serverIntroductoryEligibility: Bool,
                                 winBackOfferId: String?, confirmation: PurchaseConfirmation?,
                                 advancedCommerce signRequest: (@Sendable (UUID) async throws -> String)?) async -> PurchaseOutcome {
        // The account the order is for: a sign-in change during the payment must not move the payment. Nobody signed
        // in: no order, no payment — a payment nobody ordered would go to whoever signs in next.
        let owner = accountId
        guard owner != nil else { return .failed(PurchaseFailure(.notSignedIn, "no account is signed in: sign one in with logIn(_:token:)")) }
        do {
            guard try await store.canMakePayments() else {
                return .failed(PurchaseFailure(.paymentsNotAllowed, "payments are not allowed on this device"))
            }
        } catch {
            return .failed(storeFailure(error, productId: productId))
        }
        guard accountId == owner else { return .failed(PurchaseFailure(.accountMismatch, "the sign-in changed before the order was made")) }
        var offers = SignedOffers()
        if promotionalOffer != nil || serverIntroductoryEligibility {
            do {
                offers = try await server.signOffers(productId: productId, promotionalOffer: promotionalOffer,
                                                     introductoryOfferEligibility: serverIntroductoryEligibility,
                                                     appTransaction: try? await store.appTransaction())
            } catch {
                return .failed(error)
            }
            // Signed for the account signed in when asked: another one now would pay with the first one's offer.
            guard accountId == owner else { return .failed(PurchaseFailure(.accountMismatch, "the account changed while the offer was being signed")) }
        }
        let order: PurchaseServerClient.Order
        switch await openOrder(productId, owner: owner) {
        case .success(let opened): order = opened
        case .failure(let failure): return .failed(failure)
        }
        let intent = JournalEntry(kind: .intent, orderId: order.orderId, productId: productId, appAccountToken: order.appAccountToken, accountId: owner)
        if let signRequest {
            do { offers.advancedCommerceJWS = try await signRequest(order.appAccountToken) } catch {
                orderEnded(intent, .notStarted)
                log("the Advanced Commerce request was not signed: \(error)")
                return .failed(PurchaseFailure(.offerRefused, "the app's server did not sign the Advanced Commerce request"))
            }
            guard accountId == owner else {
                orderEnded(intent, .notStarted)
                return .failed(PurchaseFailure(.accountMismatch, "the account changed while the request was being signed"))
            }
        }
        send(.awaitingPayment(productId: productId, orderId: order.orderId))
        let result: StorePurchaseResult
        do {
            result = try await store.purchase(StorePurchaseRequest(productId: productId, appAccountToken: order.appAccountToken, quantity: quantity,
                                                                   offers: offers, winBackOfferId: winBackOfferId, confirmation: confirmation))
        } catch {
            let storeError = error as? StoreError
            if storeError?.chargedNothing == true { orderEnded(intent, storeError == .userCancelled ? .cancelled : .failed) }
            if storeError == .userCancelled { return .cancelled }
            // Otherwise whether it charged is unknown: the intent stays, so a transaction arriving later still finds its order.
            return .failed(storeFailure(error, productId: productId))
        }
        return await paymentEnded(result, productId: productId, intent: intent, owner: owner)
    }

    /// An order for `owner`, its intent journaled before any payment can start.
    func openOrder(_ productId: String, owner: String?) async -> Result<PurchaseServerClient.Order, PurchaseFailure> {
        send(.creatingOrder(productId: productId))
        let order: PurchaseServerClient.Order
        // For the owner, checked by the server against the token it gets: the sign-in may change while the token is
        // fetched, and an order of the other account, paid and journaled as the owner's, would never be accepted.
        // With the device's checks: a server refusing this device says so now, before the payment sheet, not after
        // Apple has charged.
        do { order = try await server.createOrder(productId: productId, expectedAccountId: owner, deviceIntegrity: deviceIntegrity) } catch {
            return .failure(error)
        }
        let intent = JournalEntry(kind: .intent, orderId: order.orderId, productId: productId, appAccountToken: order.appAccountToken, accountId: owner)
        do { try journal.write(intent) } catch {
            log("the journal refused the intent: \(error)")
            orderEnded(intent, .notStarted)
            return .failure(PurchaseFailure(.orderFailed, "the purchase journal cannot be written, so no payment was started"))
        }
        return .success(order)
    }

    /// What a payment the store answered comes to: delivered when paid; the order's intent gone when nothing was charged.
    func paymentEnded(_ result: StorePurchaseResult, productId: String, intent: JournalEntry?, owner: String?) async -> PurchaseOutcome {
        switch result {
        case .purchased(let transaction):
            checkpointObserver?(.afterPayment)
            // The store answered with what the Apple ID already owned, bought through another order (the App Store
            // charges nothing for an owned non-consumable or an active subscription's same product): this order was not
            // paid and ends; the transaction goes as its own token says, without this order's id.
            if let intent, transaction.appAccountToken != intent.appAccountToken {
                orderEnded(intent, .alreadyOwned)
                return await deliver(transaction, orderId: nil, accountId: owner)
            }
            return await deliver(transaction, orderId: intent?.orderId, accountId: owner)
        case .pending(let requestId):
            send(.pendingApproval(productId: productId, requestId: requestId))
            return .pendingApproval
        case .cancelled:
            if let intent { orderEnded(intent, .cancelled) }
            return .cancelled
        case .failed(let reason):
            if let intent { orderEnded(intent, .failed) }
            log("the store failed the payment of \(productId): \(reason)")
            // The adapters' reasons are sentences of their own (StoreKit's become StoreErrors, thrown), never a body.
            return .failed(PurchaseFailure(.storeFailed, "the store did not complete the payment: \(reason)"))
        }
    }

    /// An order whose payment ended with nothing charged: its intent leaves the journal, and the server hears why, so
    /// that its operator's list of lost orders holds only orders that may have been paid. The report is sent on its
    /// own: the customer's cancel is answered at once, not after a round trip that may wait on a dead network; one that
    /// does not arrive leaves the order on that list, as before.
    func orderEnded(_ intent: JournalEntry, _ reason: OrderAbandonRequest.Reason) {
        try? journal.remove(key: intent.key)
        guard let orderId = intent.orderId else { return }
        let server = server, log = log, id = UUID()
        orderEndReports[id] = Task {
            do { try await server.abandonOrder(orderId, reason: reason) } catch { log("order \(orderId)'s end (\(reason)) was not reported: \(error)") }
            self.orderEndReported(id)
        }
    }

    private func orderEndReported(_ id: UUID) { orderEndReports[id] = nil }

    /// Waits until the reports of orders ended with nothing charged, sent so far, were answered or failed: for a
    /// process about to exit (a command-line tool, a test), which would otherwise drop them on its way out.
    public func orderEndReportsSent() async {
        for report in Array(orderEndReports.values) { await report.value }
    }

    /// What a store's error means to the app: StoreKit's own reasons typed, anything else the store unreachable.
    func storeFailure(_ error: any Error, productId: String?) -> PurchaseFailure {
        log("store error\(productId.map { " for \($0)" } ?? ""): \(error)")
        guard let storeError = error as? StoreError else {
            if let failure = error as? PurchaseFailure, failure.code == .responseTooLarge { return failure }
            return PurchaseFailure(.storeUnavailable, "the App Store could not be reached")
        }
        return switch storeError {
        case .userCancelled: PurchaseFailure(.storeFailed, "the customer cancelled")
        case .networkError: PurchaseFailure(.storeUnavailable, "the App Store could not be reached")
        case .systemError(let reason): PurchaseFailure(.storeUnavailable, "the App Store is not available: \(reason)")
        case .unknown: PurchaseFailure(.storeUnavailable, "the App Store is not available on this device now")
        case .notAvailableInStorefront: PurchaseFailure(.notAvailableInStorefront, "this product is not sold in the customer's storefront")
        case .notEntitled: PurchaseFailure(.storeFailed, "the app is not entitled to this App Store feature")
        case .unsupported: PurchaseFailure(.unsupported, "the App Store does not offer this on this device")
        case .invalidQuantity: PurchaseFailure(.storeFailed, "the store does not sell this quantity")
        case .productUnavailable: PurchaseFailure(.unknownProduct, "the store does not sell this product")
        case .purchaseNotAllowed: PurchaseFailure(.paymentsNotAllowed, "purchases are not allowed for this customer")
        case .ineligibleForOffer: PurchaseFailure(.offerRefused, "the customer is not eligible for this offer")
        case .invalidOfferIdentifier, .invalidOfferPrice, .invalidOfferSignature, .missingOfferParameters:
            PurchaseFailure(.offerRefused, "the store refused the offer")
        case .duplicateRequest: PurchaseFailure(.storeFailed, "a refund was already requested for this purchase")
        case .refundRequestFailed: PurchaseFailure(.storeFailed, "the refund request could not be made")
        }
    }

    /// A purchase started on the App Store's product page. Held — in the journal, with the win-back offer the App
    /// Store showed with it, so a relaunch keeps both — until ``readyForPromotedPurchases()`` (e.g. after sign-in), then
    /// bought as any purchase.
    public func handlePromotedPurchase(_ intent: PromotedPurchase) async -> PurchaseOutcome? {
        guard promoted.ready else {
            // The first tap is the purchase held, in memory and in the journal alike (a second one would replace the
            // journal's copy, and its offer, by key).
            guard promoted.hold(intent) else { return nil }
            do { try journal.write(JournalEntry(promoted: intent, accountId: accountId)) } catch {
                send(.journalFailed(productId: intent.productId, transactionId: nil,
                                    reason: "a promoted purchase of \(intent.productId) is held in memory only: \(error)"))
            }
            return nil
        }
        return await buyPromoted(intent)
    }

    /// A promoted purchase of `productId` without an offer.
    public func handlePromotedPurchase(_ productId: String) async -> PurchaseOutcome? {
        await handlePromotedPurchase(PromotedPurchase(productId: productId))
    }

    private func buyPromoted(_ intent: PromotedPurchase) async -> PurchaseOutcome {
        guard let offer = intent.winBackOfferId else { return await purchase(intent.productId) }
        return await joining(["winBack", accountId ?? "", intent.productId, offer].joined(separator: "\u{0}")) {
            await self.performPurchase(intent.productId, quantity: 1, winBackOfferId: offer)
        }
    }

    /// The app can take promoted purchases now: the held ones (this launch's and earlier ones from the journal) run,
    /// in order, each with its win-back offer.
    @discardableResult
    public func readyForPromotedPurchases() async -> [PurchaseOutcome] {
        let held = promoted.release(journaled: (try? journal.entries()) ?? [])
        var outcomes: [PurchaseOutcome] = []
        for intent in held {
            let outcome = await buyPromoted(intent)
            outcomes.append(outcome)
            // Released while nobody is signed in: nothing was ordered, and it stays held for the next launch.
            if case .failed(let failure) = outcome, failure.code == .notSignedIn { continue }
            try? journal.remove(key: JournalEntry(promoted: intent).key)
        }
        return outcomes
    }
}
