import AppStoreFormats
import Foundation
import Hummingbird
import HummingbirdTesting
import IAPTestSupport
import PurchaseAPI
import PurchaseLedger
@testable import PurchaseServer
import StoreSimulator
import Testing

@Suite("Apple-backed look-ups bounded: per-account and overall limits, Apple's \"not found\" remembered, junk neither resent nor kept", .timeLimit(.minutes(3)))
struct AppleLookupLimitsTests {
    static let premium = "com.example.iapkit.premium"
    static let lookups = "/inApps/v1/transactions/"

    /// A transaction id Apple has never issued.
    static func randomId() -> String { String(UInt64.random(in: 100_000_000_000_000...999_999_999_999_999)) }

    /// How many requests reached the simulator's Apple endpoints under `prefix`.
    static func calls(_ system: System, to prefix: String) async throws -> Int {
        try decode([String: Int].self, await system.device(.get, "/sim/calls?prefix=\(prefix)"))["count"] ?? -1
    }

    /// Submits a proof as `account`, with the answer's headers.
    static func submit(_ system: System, as account: String, _ body: PurchaseRequest) async throws -> (HTTPResponse.Status, Data, HTTPFields) {
        let response = try await system.server.execute(uri: "/v1/purchases", method: .post,
                                                       headers: [.authorization: "Bearer \(try await system.token(account))"],
                                                       body: ByteBuffer(bytes: try encodeRequest(body)))
        return (response.status, Data(response.body.readableBytesView), response.headers)
    }

    static func code(_ reply: Data) -> String? { (try? errorCode(reply))?.rawValue }

    /// The server's services on a clock `seconds` later (a reconciler's pass after its backoff).
    static func later(_ services: PurchaseServices, by seconds: TimeInterval) -> PurchaseServices {
        let later = services.now().addingTimeInterval(seconds)
        var moved = services
        moved.now = { later }
        return moved
    }

    static var appleDown: FaultPlan { FaultPlan(seed: 5, rules: [.init(pathPrefix: "/inApps", errorRate: 1.0, errorStatus: 503)]) }

    @Test("60 random transaction ids from one account make at most 20 Server API calls; the rest are answered 429 rate_limited with Retry-After, and another account's real purchase is looked up all the same")
    func floodOfRandomIds() async throws {
        try await System.run(.init(deliver: false)) { system in
            let flooder = "flood-\(UUID().uuidString.prefix(8))"
            var statuses: [UInt16: Int] = [:]
            for _ in 0..<60 {
                let (status, reply, headers) = try await Self.submit(system, as: flooder, PurchaseRequest(transactionId: Self.randomId()))
                statuses[UInt16(status.code), default: 0] += 1
                if status == .tooManyRequests {
                    #expect(Self.code(reply) == "rate_limited")
                    #expect((try? decode(ErrorBody.self, reply))?.error.class?.rawValue == "retry", "the device keeps its transaction and comes back")
                    #expect(Int(headers[.retryAfter] ?? "") ?? 0 >= 1, "\(headers)")
                } else {
                    #expect(status == .unprocessableContent && Self.code(reply) == "transaction_id_not_found", "\(status) \(text(reply))")
                }
            }
            #expect(try await Self.calls(system, to: Self.lookups) <= 20)
            #expect(statuses[429] == 40, "\(statuses)")

            let (payer, store) = try await system.customer("payer")
            let (_, purchase, _) = try await system.buy(Self.premium, account: payer, storeAccount: store, submit: false)
            let (status, reply, _) = try await Self.submit(system, as: payer, PurchaseRequest(transactionId: (try #require(purchase.transactionId) as String)))
            #expect(try status == .ok && (decode(PurchaseReply.self, reply).outcome) == .granted, "\(status) \(text(reply))")
        }
    }

    @Test("The same unknown transaction id asked twice, and by another account, makes one Server API call: Apple's \"not found\" is remembered")
    func notFoundIsRemembered() async throws {
        try await System.run(.init(deliver: false)) { system in
            let id = Self.randomId()
            for account in ["ask-\(UUID().uuidString.prefix(6))", "ask-\(UUID().uuidString.prefix(6))"] {
                for _ in 0..<2 {
                    let (status, reply, _) = try await Self.submit(system, as: account, PurchaseRequest(transactionId: id))
                    #expect(status == .unprocessableContent && Self.code(reply) == "transaction_id_not_found", "\(status) \(text(reply))")
                }
            }
            #expect(try await Self.calls(system, to: Self.lookups) == 1)
        }
    }

    @Test("A \"receipt\" that does not parse here is sent to verifyReceipt once, not once per retry, and refused")
    func junkReceiptSentOnce() async throws {
        try await System.run(.init(deliver: false, appleAttempts: 4)) { system in
            let junk = Base64.standardEncode((0..<64 * 1024).map { _ in UInt8.random(in: 0...255) })
            let (status, reply, _) = try await Self.submit(system, as: "junk-\(UUID().uuidString.prefix(6))", PurchaseRequest(receipt: junk))
            #expect(status == .unprocessableContent && Self.code(reply) == "apple_rejected", "\(status) \(text(reply))")
            #expect(try await Self.calls(system, to: "/verifyReceipt") == 1)
            #expect(try await Self.calls(system, to: "/sandbox/verifyReceipt") == 0)
        }
    }

    /// Reconciler passes at these offsets from now (in seconds, the server's clock moved as after each backoff).
    static func passes(_ system: System, at offsets: [TimeInterval]) async throws -> [Reconciler.Report] {
        var reports: [Reconciler.Report] = []
        for offset in offsets { reports.append(try await Reconciler(services: Self.later(system.services, by: offset)).runOnce()) }
        return reports
    }

    static let hour: TimeInterval = 3600

    @Test("A held transaction id Apple still does not know three days on, after three such answers, is rejected; one it knows, held beside it, is granted at the first pass")
    func heldNotFoundIsRejected() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (payer, store) = try await system.customer("payer")
            let (_, purchase, _) = try await system.buy(Self.premium, account: payer, storeAccount: store, submit: false)
            try await system.inject(Self.appleDown)
            let junker = "junk-\(UUID().uuidString.prefix(6))"
            let (junkStatus, junk, _) = try await Self.submit(system, as: junker, PurchaseRequest(transactionId: Self.randomId()))
            let (realStatus, _, _) = try await Self.submit(system, as: payer, PurchaseRequest(transactionId: (try #require(purchase.transactionId) as String)))
            #expect(junkStatus == .accepted && realStatus == .accepted)
            let junkProof = try decode(HeldProofReply.self, junk).proofId
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)

            // Just after the upload, "not found" may be Apple not caught up yet: the junk waits, the real one is granted.
            let first = try await Reconciler(services: Self.later(system.services, by: 60)).runOnce()
            #expect(first.proofsGranted == 1 && first.proofsPostponed == 1 && first.proofsRejected == 0, "\(first)")
            #expect(try await system.entitlements(payer).entitlementNames == ["premium"])
            // Three days on, but Apple's second answer only: still waiting (a server that was down for days does not
            // reject on the first answer it gets).
            let daysOn = try await Reconciler(services: Self.later(system.services, by: 73 * Self.hour)).runOnce()
            #expect(daysOn.proofsPostponed == 1 && daysOn.proofsRejected == 0, "\(daysOn)")
            #expect(try await system.services.ledger.pendingProofs().first { $0.proofId == junkProof }?.notFoundAnswers == 2)
            // The third "not found", three days on: rejected, no longer retried.
            let last = try await Reconciler(services: Self.later(system.services, by: 74 * Self.hour)).runOnce()
            #expect(last.proofsRejected == 1, "\(last)")
            #expect(try await system.services.ledger.pendingProofs(state: .rejected).contains { $0.proofId == junkProof })
            #expect(try await system.services.ledger.pendingProofs().allSatisfy { $0.proofId != junkProof })
        }
    }

    @Test("A transaction id held while Apple is down, then answered \"not found\" for hours (Apple behind), stays pending and is granted once Apple knows it")
    func heldNotFoundForAWhileIsGranted() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (payer, store) = try await system.customer("payer")
            // The simulator numbers transactions in order: the next purchase's id is the one after this one's.
            let (_, earlier, _) = try await system.buy("com.example.iapkit.coins.100", account: payer, storeAccount: store, submit: false)
            let earlierId = try #require(earlier.transactionId)
            let next = String(try #require(Int64(earlierId)) + 1)
            try await system.inject(Self.appleDown)
            let (status, held, _) = try await Self.submit(system, as: payer, PurchaseRequest(transactionId: next))
            #expect(status == .accepted, "\(status) \(text(held))")
            let proofId = try decode(HeldProofReply.self, held).proofId
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)

            // Apple is back but does not know the id yet, for a day.
            for report in try await Self.passes(system, at: [60, 2 * Self.hour, 24 * Self.hour]) {
                #expect(report.proofsPostponed == 1 && report.proofsRejected == 0 && report.proofsGranted == 0, "\(report)")
            }
            #expect(try await system.services.ledger.pendingProofs().contains { $0.proofId == proofId })

            // Apple catches up: the purchase is there, and the next pass grants it.
            let (_, purchase, _) = try await system.buy(Self.premium, account: payer, storeAccount: store, submit: false)
            #expect(purchase.transactionId == next)
            let report = try await Reconciler(services: Self.later(system.services, by: 26 * Self.hour)).runOnce()
            #expect(report.proofsGranted == 1 && report.proofsRejected == 0, "\(report)")
            #expect(try await system.entitlements(payer).entitlementNames == ["premium"])
            #expect(try await system.services.ledger.pendingProofs(state: .granted).contains { $0.proofId == proofId })
        }
    }

    @Test("A held proof decided since and sent again while Apple is down is answered as it was decided, not 202: a rejected one with its refusal, the granted one as granted")
    func decidedProofSentAgainIsNotHeld() async throws {
        try await System.run(.init(deliver: false)) { system in
            let (payer, store) = try await system.customer("payer")
            let (_, purchase, _) = try await system.buy(Self.premium, account: payer, storeAccount: store, submit: false)
            let realId = try #require(purchase.transactionId)
            let (junker, junkId, taker) = ("junk-\(UUID().uuidString.prefix(6))", Self.randomId(), "taker-\(UUID().uuidString.prefix(6))")
            try await system.inject(Self.appleDown)
            #expect(try await Self.submit(system, as: junker, PurchaseRequest(transactionId: junkId)).0 == .accepted)
            #expect(try await Self.submit(system, as: payer, PurchaseRequest(transactionId: realId)).0 == .accepted)
            // Another account's upload of it: its token names the payer's order, so it is delivered to the payer.
            #expect(try await Self.submit(system, as: taker, PurchaseRequest(transactionId: realId)).0 == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)
            let reports = try await Self.passes(system, at: [60, 73 * Self.hour, 74 * Self.hour])
            #expect(reports.map(\.proofsGranted).reduce(0, +) == 2 && reports.map(\.proofsRejected).reduce(0, +) == 1, "\(reports)")
            #expect(try await system.services.ledger.pendingProofs().isEmpty)

            // Apple down again, and the proofs sent again.
            try await system.inject(Self.appleDown)
            let (realStatus, realAnswer, _) = try await Self.submit(system, as: payer, PurchaseRequest(transactionId: realId))
            let realReply = try decode(PurchaseReply.self, realAnswer)
            #expect(realStatus == .ok && realReply.outcome == .alreadyGranted && realReply.transactionId == realId,
                    "\(realStatus) \(realReply)")
            #expect(realReply.entitlements.entitlementNames == ["premium"], "\(realReply)")
            let (takerStatus, takerAnswer, _) = try await Self.submit(system, as: taker, PurchaseRequest(transactionId: realId))
            let takerReply = try decode(PurchaseReply.self, takerAnswer)
            #expect(takerStatus == .ok && takerReply.outcome == .deliveredToOwner && takerReply.entitlements.entitlementNames.isEmpty,
                    "\(takerStatus) \(takerReply)")
            // The junk id, on a server that no longer remembers Apple's "not found" (as once that expired): the refusal
            // it was rejected with, class operator (the device keeps it and asks again once Apple can be asked).
            var configuration = system.configuration
            configuration.appStore.lookupLimits = .init(notFoundSeconds: 0)
            var forgetful = system.services
            forgetful.verifier = ProofVerifier(roots: system.roots, configuration: configuration, apple: try AppleAccess(configuration))
            await #expect {
                _ = try await ProofIntake(services: forgetful).take(.transactionId(junkId), accountId: junker, orderId: nil)
            } throws: { error in
                (error as? APIError)?.code == ProofIntake.notFoundCode && (error as? APIError)?.refusalClass == .operator
            }
            #expect(try await system.services.ledger.pendingProofs().isEmpty, "nothing held again")
        }
    }

    @Test("One account's flood of older held proofs does not delay another account's real proof: the first reconciler pass grants it")
    func floodDoesNotStarveRealProof() async throws {
        try await System.run(.init(deliver: false)) { system in
            let now = system.services.now()
            for index in 0..<40 {
                try await system.services.ledger.holdProof(proofId: "flood-\(UUID().uuidString)", accountId: "flooder", orderId: nil, kind: .transactionId,
                                                           proof: Self.randomId(), error: "Apple unavailable", retryAt: now.addingTimeInterval(Double(index - 100)),
                                                           now: now.addingTimeInterval(-300))
            }
            let (payer, store) = try await system.customer("payer")
            let (_, purchase, _) = try await system.buy(Self.premium, account: payer, storeAccount: store, submit: false)
            try await system.inject(Self.appleDown)
            let (status, _, _) = try await Self.submit(system, as: payer, PurchaseRequest(transactionId: (try #require(purchase.transactionId) as String)))
            #expect(status == .accepted)
            _ = try await system.simulator.execute(uri: "/sim/faults", method: .delete)

            let report = try await Reconciler(services: Self.later(system.services, by: 60)).runOnce()
            #expect(report.proofsGranted == 1, "\(report)")
            #expect(try await system.entitlements(payer).entitlementNames == ["premium"])
        }
    }

    @Test("While Apple is down, an account holds at most its limit of proofs: the next is answered 429 with Retry-After and not kept; another account still holds its own")
    func heldProofsPerAccountAreCapped() async throws {
        try await System.run(.init(deliver: false)) { system in
            var configuration = system.configuration
            configuration.appStore.lookupLimits = .init(perAccount: 100, heldProofsPerAccount: 2)
            var services = system.services
            services.verifier = ProofVerifier(roots: system.roots, configuration: configuration, apple: try AppleAccess(configuration))
            try await system.inject(Self.appleDown)
            let intake = ProofIntake(services: services)
            let flooder = "flood-\(UUID().uuidString.prefix(6))"
            for _ in 0..<2 {
                guard case .held = try await intake.take(.transactionId(Self.randomId()), accountId: flooder, orderId: nil) else {
                    Issue.record("held while Apple is down")
                    return
                }
            }
            await #expect {
                try await intake.take(.transactionId(Self.randomId()), accountId: flooder, orderId: nil)
            } throws: { error in
                (error as? AppleLookupRefused)?.retryAfter ?? 0 >= 1
            }
            #expect(try await services.ledger.pendingProofs().filter { $0.accountId == flooder }.count == 2)
            guard case .held = try await intake.take(.transactionId(Self.randomId()), accountId: "other-\(UUID().uuidString.prefix(6))", orderId: nil) else {
                Issue.record("another account is not limited by the first's held proofs")
                return
            }
        }
    }

    @Test("A limit out of range is refused at start, naming its key, never quietly taken as another", arguments: [
        AppleLookupLimitSettings(perSecond: 0), .init(perAccount: 0), .init(perAccountWindowSeconds: -1), .init(notFoundSeconds: 90_000),
        .init(heldProofsPerAccount: 0),
    ])
    func limitsOutOfRangeRefused(_ limits: AppleLookupLimitSettings) throws {
        var configuration = ServerConfiguration()
        configuration.appStore.lookupLimits = limits
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        configuration.appStore.lookupLimits = .init(perAccount: 5, perSecond: 1)
        try configuration.validate()
    }
}
