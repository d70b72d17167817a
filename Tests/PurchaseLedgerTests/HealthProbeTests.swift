import Foundation
@testable import PurchaseLedger
import Testing

/// Reads counted and held open until the test lets them finish.
actor ProbeReads {
    private(set) var started = 0
    private var gates: [CheckedContinuation<Void, Never>] = []
    var failing = false
    /// Reads wait for ``release()``; without holding they answer at once.
    var holding = true

    func read() async throws {
        started += 1
        if holding { await withCheckedContinuation { gates.append($0) } }
        if failing { throw LedgerError(.storage, "down") }
    }

    func release() {
        for gate in gates { gate.resume() }
        gates.removeAll()
    }

    func setFailing(_ value: Bool) { failing = value }

    func setHolding(_ value: Bool) { holding = value }

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

    @Test("A database that hangs fails the checks at the deadline; until it answers every check fails at once and starts no read; then checks read again")
    func hangingReadFailsInTime() async throws {
        let reads = ProbeReads()
        let probe = HealthProbe(deadline: .milliseconds(200)) { try await reads.read() }
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: LedgerError.self) { try await probe.check() }
        #expect(clock.now - start < .seconds(20), "failed at the deadline, with the read still hanging")
        for _ in 0..<50 { await #expect(throws: LedgerError.self) { try await probe.check() } }
        #expect(await reads.started == 1, "no read piles up behind the hung one")
        await reads.setHolding(false)
        await reads.release()   // the hung read answers, late; the probe hears of it right after
        var passed = false
        for _ in 0..<500 where !passed {
            passed = (try? await probe.check()) != nil
            if !passed { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(passed, "once the hung read answered, a check reads again and passes")
        #expect(await reads.started >= 2)
    }

    @Test("Checks queued behind a read that hangs fail at its deadline with it; no second read starts beside the hung one")
    func queuedBehindHungRead() async throws {
        let reads = ProbeReads()
        let probe = HealthProbe(deadline: .milliseconds(200)) { try await reads.read() }
        let first = Task { try await probe.check() }
        await reads.waitStarted(1)
        let queued = Task { try await probe.check() }
        await #expect(throws: LedgerError.self) { try await first.value }
        await #expect(throws: LedgerError.self) { try await queued.value }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await reads.started == 1, "the queued check did not start a read while the first still hangs")
        await reads.setHolding(false)
        await reads.release()
    }

    @Test("The ledger's health check reads the store", arguments: StoreKind.allCases)
    func ledgerHealth(_ kind: StoreKind) async throws {
        let ledger = try await makeLedger(kind)
        // The check's own 5 s deadline is the server's: on two cores under the whole suite, a new PostgreSQL ledger's
        // first read once took longer (CI, three times across the sessions). A check that timed out fails the next
        // ones without reading until its read answers, so the store is given a minute to answer once;
        // then a check must pass, reading.
        let clock = ContinuousClock(), end = clock.now + .seconds(60)
        while clock.now < end, (try? await ledger.checkHealth()) == nil { try await Task.sleep(for: .milliseconds(250)) }
        try await ledger.checkHealth()
    }
}
