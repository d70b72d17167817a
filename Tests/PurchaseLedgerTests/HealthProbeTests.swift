import Foundation
@testable import PurchaseLedger
import Testing

/// Reads counted and held open until the test lets them finish.
actor ProbeReads {
    private(set) var started = 0
    private var gates: [CheckedContinuation<Void, Never>] = []
    var failing = false

    func read() async throws {
        started += 1
        await withCheckedContinuation { gates.append($0) }
        if failing { throw LedgerError(.storage, "down") }
    }

    func release() {
        for gate in gates { gate.resume() }
        gates.removeAll()
    }

    func setFailing(_ value: Bool) { failing = value }

    /// Waits until `count` reads have started.
    func waitStarted(_ count: Int) async {
        while started < count { await Task.yield() }
    }
}

@Suite("Health checks share reads but never answer from one that began before they arrived", .timeLimit(.minutes(1)))
struct HealthProbeTests {
    @Test("A check arriving while a read runs waits for the next read; 200 checks at once cost at most two reads")
    func sharedButFresh() async throws {
        let reads = ProbeReads()
        let probe = HealthProbe { try await reads.read() }
        let first = Task { try await probe.check() }
        await reads.waitStarted(1)
        let late = Task { try await probe.check() }
        let crowd = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 { group.addTask { try await probe.check() } }
                try await group.waitForAll()
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(await reads.started == 1, "the arrivals wait for the running read to end before theirs begins")
        await reads.release()
        try await first.value
        await reads.waitStarted(2)
        #expect(await reads.started == 2)
        await reads.release()
        try await late.value
        try await crowd.value
        #expect(await reads.started == 2, "201 checks that arrived during one read shared the next")
    }

    @Test("A database that fails fails every check that arrives after it failed; the next good read answers again")
    func failureIsNotHidden() async throws {
        let reads = ProbeReads()
        let probe = HealthProbe { try await reads.read() }
        await reads.setFailing(true)
        let down = Task { try await probe.check() }
        await reads.waitStarted(1)
        await reads.release()
        await #expect(throws: LedgerError.self) { try await down.value }
        await reads.setFailing(false)
        let up = Task { try await probe.check() }
        await reads.waitStarted(2)
        await reads.release()
        try await up.value
    }

    @Test("A database that hangs fails the checks after the deadline; the next check starts a read of its own, which answers")
    func hangingReadFailsInTime() async throws {
        let reads = ProbeReads()
        // Long enough that the second read is released within it on a loaded machine.
        let probe = HealthProbe(deadline: .seconds(3)) { try await reads.read() }
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: LedgerError.self) { try await probe.check() }
        #expect(clock.now - start < .seconds(20), "failed at the deadline, with the read still hanging")
        #expect(await reads.started == 1)
        let next = Task { try await probe.check() }
        await reads.waitStarted(2)
        await reads.release()   // both the hung read and the new one answer now
        try await next.value
    }

    @Test("The ledger's health check reads the store", arguments: StoreKind.allCases)
    func ledgerHealth(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        try await ledger.checkHealth()
    }
}
