import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import IAPKit
import PurchaseAPI
import PurchaseLedger
import PurchaseServer
import StoreSimulator

extension HistoryRun {
    /// Runs `steps`, checking what can be checked after each, then brings the world to rest and checks everything.
    func run(_ steps: [Step]) async -> (violations: [Violation], checks: [Int: Int]) {
        for (index, step) in steps.enumerated() {
            currentStepIndex = index
            // Real time passes between events: without it, two signatures of one transaction could carry the same
            // signedDate, which Apple's millisecond clock makes all but impossible.
            try? await engine.advanceClock(by: 1)
            do { try await perform(step) } catch {
                record(0, "the step itself failed: \(error)")
            }
            if case .deliver(.inOrder) = step { await checkpoint() }
            if !violations.isEmpty { break }
        }
        currentStepIndex = nil
        if violations.isEmpty {
            do {
                try await quiesce()
                await checkAtRest()
            } catch {
                record(0, "bringing the world to rest failed: \(error)", atEnd: true)
            }
        }
        return (violations, checks)
    }

    func perform(_ step: Step) async throws {
        switch step {
        case .buy(let index, let product, let end, let crash):
            let device = devices[index]
            guard !device.dead.value, let client = device.client, let store = device.store else { return }
            await store.setNextOutcome(end == .success ? nil : end.rawValue)
            if let crash {
                await client.setCheckpointObserver { [dead = device.dead] point in if point == crash { dead.value = true } }
            }
            _ = await client.purchase(product.productId)
            await client.setCheckpointObserver(nil)
        case .launch(let index):
            await launch(devices[index])
            await checkJournalAfterLaunch(devices[index])
        case .reinstall(let index):
            let device = devices[index]
            await device.client?.stop()
            device.dead.value = true
            try? FileManager.default.removeItem(at: device.journalDirectory)
            await launch(device)
            await checkJournalAfterLaunch(device)
        case .signIn(let index, let account):
            let device = devices[index]
            device.signedIn.value = Self.appAccounts[account]
            guard !device.dead.value, let client = device.client else { return }
            await client.logIn(Self.appAccounts[account])
            await client.waitForBackgroundWork()
        case .retry(let index):
            guard !devices[index].dead.value, let client = devices[index].client else { return }
            await client.retryDue()
        case .updates(let index):
            let device = devices[index]
            guard !device.dead.value, let client = device.client, let store = device.store else { return }
            for transaction in (try? await store.unfinished()) ?? [] {
                _ = await client.deliver(transaction, orderId: nil, accountId: nil)
            }
        case .restore(let index, let crash):
            let device = devices[index]
            guard !device.dead.value, let client = device.client else { return }
            if crash {
                await client.setCheckpointObserver { [dead = device.dead] point in if point == .duringRestore { dead.value = true } }
            }
            _ = try? await client.restore()
            await client.setCheckpointObserver(nil)
        case .spend(let index, let amount):
            let device = devices[index]
            guard !device.dead.value, let client = device.client, let account = device.signedIn.value else { return }
            // A spend of the same amount by the same account as the device's last is that spend retried (its answer
            // lost): the same key.
            let key: String
            if let last = device.lastSpend, last.amount == amount, last.account == account { key = last.key } else { key = UUID().uuidString }
            device.lastSpend = (key, amount, account)
            let before = ownership.spentTotals()[account, default: 0]
            guard (try? await client.server.spend(currency: "coins", amount: Int64(amount), idempotencyKey: key)) != nil else { return }
            // Never more than Apple ever charged the account for, less what it spent before. (Refunds are left out of
            // this bound: until their notification arrives the server cannot know of them; at rest the balance must
            // equal Apple's record to the coin.)
            let credited = await engine.recordedTransactions().filter {
                $0.payload.productId == ExploredProduct.coins.productId && ownership.owner(of: $0.payload) == account
            }.reduce(Int64(0)) { $0 + 100 * Int64($1.payload.quantity ?? 1) }
            checked(3)
            if key != device.lastSpendAccepted, Int64(amount) > credited - before {
                record(3, "\(account) was allowed to spend \(amount) coins; Apple charged it for \(credited), less \(before) spent")
            }
            device.lastSpendAccepted = key
        case .network(let index, let up):
            devices[index].offline.value = !up
        case .journal(let index, let fails):
            devices[index].journalRefuses.value = fails
        case .answerRequest(let pick, let approve):
            let requests = await engine.recordedRequests()
            guard !requests.isEmpty else { return }
            let request = requests[pick % requests.count]
            if approve { _ = try await engine.approve(request.requestId) } else { _ = try await engine.decline(request.requestId) }
        case .refund(let pick):
            try await refundCharged(pick: pick, percentage: nil)
        case .proratedRefund(let pick, let percentage):
            try await refundCharged(pick: pick, percentage: percentage)
        case .reverseRefund(let pick):
            let refunded = await engine.recordedTransactions().filter { $0.sharedFrom == nil && $0.payload.revocationDate != nil }
            guard !refunded.isEmpty, let id = refunded[pick % refunded.count].payload.transactionId else { return }
            _ = try await engine.reverseRefund(id)
        case .autoRenew(let pick, let on):
            let series = await engine.recordedSeries().filter { $0.sharedFrom == nil }
            guard !series.isEmpty else { return }
            _ = try await engine.setAutoRenew(originalTransactionId: series[pick % series.count].originalTransactionId, enabled: on)
        case .billing(let account, let fails):
            _ = try await engine.setBillingFails(account: Self.storeAccounts[account], fails)
        case .family(let share):
            _ = try await engine.setFamily(organizer: Self.storeAccounts[0], members: share ? [Self.storeAccounts[1]] : [])
        case .advance(let seconds):
            try await engine.advanceClock(by: TimeInterval(seconds))
        case .deliver(let fault):
            try await deliverNotifications(fault)
        case .serverRestart:
            try await redeploy(bundleId: serverBundleId)
        case .serverMisconfigured(let wrong):
            try await redeploy(bundleId: wrong ? "com.example.another-app" : Self.bundleId)
        case .apple(let fault):
            appleFault.value = fault
        case .syncReceipt(let index):
            guard !devices[index].dead.value, let client = devices[index].client else { return }
            // Refused, held for Apple, or unreachable: the receipt stays on the device; nothing else depends on it.
            _ = try? await client.syncReceipt()
        case .receiptsByApple(let byApple):
            try await redeploy(bundleId: serverBundleId, receiptsByApple: byApple)
        case .strangerSendsId(let pick, let account):
            try await strangerSendsId(pick: pick, account: Self.appAccounts[account])
        case .reconcile:
            try await reconcile()
        case .dieInside(let index, let recovery, let checkpoint):
            let device = devices[index]
            guard !device.dead.value, let client = device.client else { return }
            await client.setCheckpointObserver { [dead = device.dead] point in if point == checkpoint { dead.value = true } }
            switch recovery {
            case .retry: try await perform(.retry(device: index))
            case .updates: try await perform(.updates(device: index))
            case .signIn(let account): try await perform(.signIn(device: index, account: account))
            }
            await client.setCheckpointObserver(nil)
        }
    }

    /// Delivers the notifications due now as `fault` says; each attempt is recorded as Apple records it (a failed
    /// one is retried on Apple's schedule).
    /// Apple refunds one of the charged, unrefunded transactions: all of it, or `percentage` milliunits of it.
    func refundCharged(pick: Int, percentage: Int?) async throws {
        let charged = await engine.recordedTransactions().filter { $0.sharedFrom == nil && $0.payload.revocationDate == nil }
        guard !charged.isEmpty, let id = charged[pick % charged.count].payload.transactionId else { return }
        _ = try await engine.refund(id, percentage: percentage)
    }

    func deliverNotifications(_ fault: DeliveryFault) async throws {
        var due = try await engine.dueNotifications()
        switch fault {
        case .inOrder, .duplicated, .lost, .abandoned: break
        case .reversed: due.reverse()
        case .partial: due = Array(due.prefix(due.count / 2))
        }
        let failures = Dictionary(await engine.undeliveredNotifications().map { ($0.uuid, $0.failedAttempts) }, uniquingKeysWith: { a, _ in a })
        for notification in due {
            if fault == .abandoned {
                try await engine.recordAttempt(notification.uuid, result: .noResponse, retries: false)
                continue
            }
            // `lost` loses an attempt Apple will retry; `abandoned` is the loss for good, after the last one.
            if fault == .lost, failures[notification.uuid, default: 0] < StoreEngine.retryScheduleHours.count {
                try await engine.recordAttempt(notification.uuid, result: .noResponse)
                continue
            }
            var result = await post(notification.signedPayload)
            if fault == .duplicated, result == .success { result = await post(notification.signedPayload) }
            try await engine.recordAttempt(notification.uuid, result: result)
        }
    }

    /// A transaction id proves nothing about who paid: the server may grant the account what its own order paid for,
    /// or deliver the transaction to the account whose order did, but never grant another's to it for the id.
    func strangerSendsId(pick: Int, account: String) async throws {
        let recorded = await engine.recordedTransactions()
        guard !recorded.isEmpty, let http = server.http else { return }
        let payload = recorded[pick % recorded.count].payload
        guard let id = payload.transactionId else { return }
        var request = URLRequest(url: URL(string: "http://server/v1/purchases")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(try await token(for: account))", forHTTPHeaderField: "Authorization")
        request.httpBody = Data(#"{"transactionId":"\#(id)"}"#.utf8)
        // Not observed: an id presents nothing.
        guard let (data, response) = try? await http.send(request) else { return }
        let reply = try? APIJSON.decoder().decode(PurchaseReply.self, from: data)
        if (response as? HTTPURLResponse)?.statusCode == 200, reply?.outcome == .granted, ownership.owner(of: payload) != account {
            record(1, "\(id) was granted to \(account), which only sent its id (its owner: \(ownership.owner(of: payload) ?? "nobody yet"))")
        }
        saw("stranger's id answered \((response as? HTTPURLResponse)?.statusCode ?? 0)")
    }

    func post(_ signedPayload: String) async -> SendAttemptResult {
        guard let http = server.http else { return .noResponse }
        var request = URLRequest(url: URL(string: "http://server/v1/notifications/appstore")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        // A JWS is base64url and dots: nothing to escape (and JSONSerialization escapes slowly, character by character).
        request.httpBody = Data(("{\"signedPayload\":\"" + signedPayload + "\"}").utf8)
        guard let (data, response) = try? await http.send(request) else { return .noResponse }
        if ProcessInfo.processInfo.environment["IAPKIT_EXPLORE_TRACE"] != nil {
            print("notification → \((response as? HTTPURLResponse)?.statusCode ?? 0) \(String(decoding: data, as: UTF8.self))")
        }
        return (200...206).contains((response as? HTTPURLResponse)?.statusCode ?? 0) ? .success : .unsuccessfulHTTPResponseCode
    }

    /// The end of the history: the operator fixes the server, every app is launched online with a writable disk, each
    /// account with a payment waiting on a device signs in there, and Apple's retries of undelivered notifications
    /// arrive. What Apple charged must have reached its owner by then.
    func quiesce() async throws {
        if !serverConfigured { try await redeploy(bundleId: Self.bundleId) }
        appleFault.value = .up
        for device in devices {
            device.offline.value = false
            device.journalRefuses.value = false
            await launch(device)
        }
        for device in devices {
            let waiting = Set(((try? FileJournal(directory: device.journalDirectory).entries()) ?? [])
                .filter { $0.kind == .paid }.compactMap(\.accountId)).subtracting([device.signedIn.value ?? ""])
            for account in waiting.sorted() {
                device.signedIn.value = account
                await device.client?.logIn(account)
                await device.client?.waitForBackgroundWork()
            }
        }
        try await deliverEverything()
        // Notifications Apple gave up on are the reconciler's to recover; it runs as it would on its timer.
        try await reconcile()
        // Renewals minted meanwhile reach the devices' queues: the apps take them as StoreKit hands them over.
        for device in devices { try await perform(.updates(device: device.index)) }
        try await deliverEverything()
        try await reconcile()
    }

    /// One pass of the server's reconciliation job at the App Store's time. With Apple up and the server configured,
    /// a pass must read Apple's notification history to the present; a loaded machine may let a call time out, so
    /// the job's timer is allowed four more passes before that is a failure of its own.
    func reconcile() async throws {
        for attempt in 1...5 {
            guard let services = server.services else { return }
            let report = try await Reconciler(services: services).runOnce()
            try await presentResolvedReceipts(services)
            guard let stalled = report.notificationHistoryStalled, appleFault.value == .up, serverConfigured else { return }
            if attempt == 5 { record(0, "the reconciler stopped reading Apple's notification history: \(stalled)") }
        }
    }

    /// Held receipts the reconciler has now verified and granted are presented by their account: the purchases the
    /// server then verified, as it verifies them now (verifyReceipt's latest_receipt_info when it asks Apple and the
    /// receipt holds a subscription; the receipt's own purchases otherwise).
    func presentResolvedReceipts(_ services: PurchaseServices) async throws {
        let granted = Set(try await services.ledger.pendingProofs(state: .granted).map(\.proofId))
        for (account, text) in ownership.takeHeldReceipts(resolved: granted) {
            guard let der = Base64.decode(text.utf8), let container = try? PKCS7SignedData(berEncoded: der),
                  let receipt = try? AppReceipt(payload: container.content) else { continue }
            var ids = receipt.inAppPurchases.compactMap(\.transactionId)
            if receiptsByApple, receipt.inAppPurchases.contains(where: { $0.productType == .autoRenewableSubscription }), let first = ids.first {
                ids = await engine.history(containing: first).filter { $0.type != .consumable }.compactMap(\.transactionId)
            }
            ownership.presented(ids: ids, by: account)
            saw("held receipt granted by the reconciler")
        }
    }

    /// Delivers every notification Apple would still send (a due one now, a failed one at its retry).
    func deliverEverything() async throws {
        for notification in await engine.undeliveredNotifications() {
            try await engine.recordAttempt(notification.uuid, result: await post(notification.signedPayload))
        }
    }
}
