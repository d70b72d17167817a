/// Health checks that share database reads without answering from an old one: a check waits for a read that *began
/// after it arrived*. At most one read runs and one waits to start; every check arriving meanwhile joins the waiting
/// one. A load balancer's probes (or a load test of `/health`) then cost the database one read per round trip, not
/// one per request, and a database that stopped answering fails every check that arrives after it stopped.
actor HealthProbe {
    private let read: @Sendable () async throws -> Void
    private var running: Task<Void, any Error>?
    private var waiting: Task<Void, any Error>?

    init(read: @escaping @Sendable () async throws -> Void) {
        self.read = read
    }

    func check() async throws {
        let task: Task<Void, any Error>
        if let waiting {
            task = waiting
        } else {
            let previous = running
            task = Task { [read] in
                if let previous {
                    _ = await previous.result
                    self.started()
                }
                try await read()
            }
            if previous == nil { running = task } else { waiting = task }
        }
        let result = await task.result
        if running == task { running = nil }
        try result.get()
    }

    /// The waiting read begins: checks arriving from now on wait for the next one.
    private func started() {
        if let waiting {
            running = waiting
            self.waiting = nil
        }
    }
}
