import Foundation
import PurchaseAPI
@testable import PurchaseLedger
import Testing

@Suite("Held proofs: each account holds only so many, and the reconciler's claims take accounts in turn")
struct HeldProofFairnessTests {
    /// A ledger of its own: the claims below take whatever is due, and must neither meet other tests' proofs nor leave
    /// theirs behind for them.
    static func withOwnLedger(_ kind: StoreKind, _ body: (Ledger) async throws -> Void) async throws {
        switch kind {
        case .sqlite:
            try await body(try await makeLedger(.sqlite))
        case .postgres:
            try await withOwnPostgresDatabase("held_") { url in
                let ledger = Ledger(store: try await PostgresLedgerStore(url: url), catalog: .demo)
                try await ledger.migrate()
                try await body(ledger)
            }
        }
    }

    @Test("One account's 40 older held proofs do not crowd out another's: the first claim of 20 takes the other account's proof too", arguments: StoreKind.allCases)
    func claimsTakeAccountsInTurn(_ kind: StoreKind) async throws {
        try await Self.withOwnLedger(kind) { ledger in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            for index in 0..<40 {
                try await ledger.holdProof(proofId: "junk-\(index)", accountId: "flood", orderId: nil, kind: .transactionId, proof: "9\(index)",
                                           error: "Apple unavailable", retryAt: now.addingTimeInterval(Double(index - 100)), now: now.addingTimeInterval(-200))
            }
            try await ledger.holdProof(proofId: "real", accountId: "payer", orderId: nil, kind: .transactionId, proof: "2000000001",
                                       error: "Apple unavailable", retryAt: now.addingTimeInterval(-1), now: now.addingTimeInterval(-30))
            let claimed = try await ledger.claimDueProofs(now: now, limit: 20)
            #expect(claimed.count == 20)
            #expect(claimed.contains { $0.proofId == "real" }, "the payer's proof waits behind none of the flood")
            // Within an account, still the longest due first.
            #expect(claimed.filter { $0.accountId == "flood" }.map(\.proofId) == (0..<19).map { "junk-\($0)" })
            #expect(claimed.first { $0.proofId == "real" }?.heldAt == now.addingTimeInterval(-30))
            // Leased: the next claim takes the rest of the flood, none twice.
            let next = try await ledger.claimDueProofs(now: now, limit: 20)
            #expect(Set(next.map(\.proofId)).isDisjoint(with: claimed.map(\.proofId)) && next.count == 20)
        }
    }

    @Test("An account holds at most its limit of pending proofs; the same proof again answers as stored, another account is not limited", arguments: StoreKind.allCases)
    func heldProofsPerAccountAreCapped(_ kind: StoreKind) async throws {
        try await Self.withOwnLedger(kind) { ledger in
            let now = Date()
            func hold(_ id: String, _ account: String) async throws -> PendingProof {
                try await ledger.holdProof(proofId: id, accountId: account, orderId: nil, kind: .transactionId, proof: id, error: "Apple unavailable",
                                           retryAt: now, now: now, perAccountLimit: 3)
            }
            for index in 0..<3 { _ = try await hold("p\(index)", "flood") }
            await #expect(throws: HeldProofLimitReached.self) { try await hold("p3", "flood") }
            #expect(try await hold("p1", "flood").proofId == "p1", "held already: not a new one")
            #expect(try await hold("q0", "payer").accountId == "payer")
            // A decided proof no longer counts.
            try await ledger.updateProof("p0", state: .rejected, error: "not found", now: now)
            #expect(try await hold("p3", "flood").state == .pending)
            #expect(try await ledger.pendingProofs().filter { $0.accountId == "flood" }.count == 3)
        }
    }
}
