import Foundation

/// The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a commit survives a power cut.
///
/// One writer thread owns the write connection and its prepared statements. Callers enqueue and await; the writer
/// takes everything queued (up to `maximumGroup`), runs it as one transaction with a savepoint per operation (a
/// failing operation rolls back alone), commits once — one fsync for the group — and only then answers each caller.
/// Reads run on WAL reader connections in the caller's own thread and never take the write lock.
public final class SQLiteLedgerStore: SQLLedgerStore, @unchecked Sendable {
    public var operations: LedgerStoreOperations { LedgerStoreOperations(self) }
    public let kind = LedgerStoreKind.sqlite
    public let path: String

    private let writer: SQLiteWriter
    private let readersLock = NSLock()
    private var idleReaders: [SQLiteConnection] = []
    /// The reader of ``readMany(_:)`` while idle, and whether it exists (it may be out on a read).
    private var idleManyReader: SQLiteConnection?
    private var manyReaderOpen = false
    /// The page cache of ``readMany(_:)``'s reader (KiB), against SQLite's 2 MB default of every other reader.
    static let manyReaderCacheKiB = 16_000
    private let inMemory: Bool

    /// Opens (creating if needed) the database at `path`, or an in-memory one for `:memory:`. `maximumGroup` is the
    /// most operations committed together.
    public init(path: String, maximumGroup: Int = 64) throws {
        self.path = path
        inMemory = path == ":memory:"
        if !inMemory {
            try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        let connection = try SQLiteConnection(path: path)
        // Savepoint journals stay in memory (SQLiteConnection.statementJournalInMemory).
        // wal_autocheckpoint=4000 (16 MB of WAL, SQLite's default is 1000 pages): the pages a purchase changes again and
        // again (an index's last leaf, an account's balance) are copied into the database once per checkpoint, so
        // fewer checkpoints copy fewer pages and sync the file less often. Measured in A/B pairs: purchases +13 % and
        // +17 %, server CPU per purchase -9 %; notifications +8 % and +11 %, their p99 19 -> 30 ms (each of them adds
        // pages no later one changes, so a checkpoint copies more at once). The checkpoint stays inside a commit on the
        // writer thread: SQLite restarts the log only once a checkpoint has copied all of it, which one running beside a
        // writer that never pauses may never do (SQLite's wal.html), and the log would grow.
        try connection.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=4000")
        writer = SQLiteWriter(connection: connection, maximumGroup: max(1, maximumGroup))
    }

    deinit {
        // A store dropped without close() still stops its thread, which closes the connection when the queue is done.
        writer.stop()
    }

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            writer.enqueue(SQLiteWriteJob(body: body, answer: PendingAnswer(continuation)))
        }
    }

    /// Writes waiting for the writer's next group (tests: operations queued behind a held writer run as one group).
    var queuedWrites: Int { writer.queued }

    func read<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        // An in-memory database has no second connection to read from.
        if inMemory { return try await write(body) }
        let reader = try checkOutReader()
        return try await run(body, on: reader) { self.checkIn($0) }
    }

    /// A read on one reader kept for reads of many rows, with a larger page cache: the business view's instant at a
    /// million purchases touches more index pages than SQLite's default 2 MB cache holds, and read them again from the
    /// file at each request (a fifth of its time in the kernel copying them; BENCHMARKS.md, run 6). One such reader, so
    /// the memory is bounded: a second read of many rows meanwhile takes an ordinary reader.
    func readMany<R: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> R) async throws -> R {
        if inMemory { return try await write(body) }
        let take: ManyReader = readersLock.withLock {
            if let reader = idleManyReader { idleManyReader = nil; return .kept(reader) }
            if manyReaderOpen { return .ordinary }
            manyReaderOpen = true
            return .open
        }
        let reader: SQLiteConnection
        switch take {
        case .ordinary:
            return try await run(body, on: try checkOutReader()) { self.checkIn($0) }
        case .kept(let kept):
            reader = kept
        case .open:
            do {
                reader = try SQLiteConnection(path: path)
                try reader.exec("PRAGMA query_only=ON; PRAGMA cache_size=-\(Self.manyReaderCacheKiB)")
            } catch {
                readersLock.withLock { manyReaderOpen = false }
                throw error
            }
        }
        return try await run(body, on: reader, checkIn: { reader in self.readersLock.withLock { self.idleManyReader = reader } },
                             closed: { self.readersLock.withLock { self.manyReaderOpen = false } })
    }

    /// Which reader a read of many rows takes: the kept one, a new kept one, or (the kept one out) an ordinary one.
    private enum ManyReader { case kept(SQLiteConnection), open, ordinary }

    /// `body` in one read transaction on `reader`, which goes back through `checkIn` (or is closed when its
    /// transaction cannot end: its next BEGIN would fail). Its statements never suspend: the read runs on the caller's
    /// thread from start to end.
    private func run<R>(_ body: (any SQLExecutor) async throws -> R, on reader: SQLiteConnection, checkIn: (SQLiteConnection) -> Void,
                        closed: () -> Void = {}) async throws -> R {
        do {
            try reader.exec("BEGIN")
        } catch {
            reader.close()
            closed()
            throw error
        }
        let result: Result<R, any Error>
        do {
            result = .success(try await body(reader))
        } catch {
            result = .failure(error)
        }
        if (try? reader.exec("COMMIT")) != nil { checkIn(reader) } else { reader.close(); closed() }
        return try result.get()
    }

    public func close() async throws {
        writer.stop()
        await writer.finished()
        readersLock.withLock {
            idleReaders.forEach { $0.close() }
            idleReaders = []
            idleManyReader?.close()
            idleManyReader = nil
        }
    }

    private func checkOutReader() throws -> SQLiteConnection {
        if let reader = readersLock.withLock({ idleReaders.popLast() }) { return reader }
        let reader = try SQLiteConnection(path: path)
        try reader.exec("PRAGMA query_only=ON")
        return reader
    }

    private func checkIn(_ reader: SQLiteConnection) {
        readersLock.withLock {
            if idleReaders.count < 8 { idleReaders.append(reader) } else { reader.close() }
        }
    }
}

/// The writer: a task on a thread of its own (``ThreadTaskExecutor``) that owns the write connection, takes queued
/// operations in groups and commits each group once. An operation's statements never suspend, so the whole group runs
/// on that thread with no hop; its waits (for the queue, for a commit's fsync) hold that thread only.
final class SQLiteWriter: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let maximumGroup: Int
    private let queue = JobQueue<any SQLiteWrite>(threads: 1)
    private let thread = ThreadTaskExecutor(name: "iapkit.ledger.sqlite.writer")

    init(connection: SQLiteConnection, maximumGroup: Int) {
        self.connection = connection
        self.maximumGroup = maximumGroup
        Task(executorPreference: thread) { [self] in await run() }
    }

    func enqueue(_ job: any SQLiteWrite) {
        if !queue.enqueue(job) { job.deliver(commitError: LedgerError(.storage, "the SQLite store is closed")) }
    }

    /// Writes waiting for the next group.
    var queued: Int { queue.count }

    /// Lets the queue drain, then ends the thread.
    func stop() { queue.stop() }

    func finished() async { await queue.finished() }

    private func run() async {
        while true {
            // Blocks the writer's own thread until operations are queued.
            let group = queue.take(upTo: maximumGroup)
            if group.isEmpty { break }
            await commit(group)
        }
        connection.close()
        queue.threadEnded()
        thread.stop()
    }

    /// One transaction for the group, a savepoint per operation, one commit; then every answer.
    private func commit(_ group: [any SQLiteWrite]) async {
        let writer = connection
        do {
            _ = try writer.rows("BEGIN IMMEDIATE", [])
        } catch {
            group.forEach { $0.deliver(commitError: error) }
            return
        }
        let alone = group.count == 1
        var poisoned: (any Error)?
        for job in group {
            do {
                if !alone { _ = try writer.rows("SAVEPOINT op", []) }
                let succeeded = await job.run(writer)
                if !alone {
                    if !succeeded { _ = try writer.rows("ROLLBACK TO op", []) }
                    _ = try writer.rows("RELEASE op", [])
                }
                // SQLite rolls the whole transaction back by itself on some failures (a full disk, an I/O error): then
                // the operations before this one are gone too, and none of the group may be answered as done.
                if !writer.inTransaction {
                    poisoned = LedgerError(.storage, "SQLite rolled the transaction back")
                    break
                }
            } catch {
                poisoned = error
                break
            }
        }
        if let poisoned {
            if writer.inTransaction { _ = try? writer.rows("ROLLBACK", []) }
            group.forEach { $0.deliver(commitError: poisoned) }
            return
        }
        do {
            _ = try writer.rows(alone && !group[0].succeeded ? "ROLLBACK" : "COMMIT", [])
            group.forEach { $0.deliver(commitError: nil) }
        } catch {
            if writer.inTransaction { _ = try? writer.rows("ROLLBACK", []) }
            group.forEach { $0.deliver(commitError: error) }
        }
    }
}

/// A queued write, its result type erased for the writer's queue.
protocol SQLiteWrite: AnyObject {
    /// Runs the operation's body; returns whether it succeeded (a failure is rolled back to its savepoint).
    func run(_ connection: SQLiteConnection) async -> Bool
    var succeeded: Bool { get }
    func deliver(commitError: (any Error)?)
}

final class SQLiteWriteJob<R: Sendable>: SQLiteWrite {
    let body: @Sendable (any SQLExecutor) async throws -> R
    let answer: PendingAnswer<R>

    init(body: @escaping @Sendable (any SQLExecutor) async throws -> R, answer: PendingAnswer<R>) {
        self.body = body
        self.answer = answer
    }

    func run(_ connection: SQLiteConnection) async -> Bool {
        do {
            answer.hold(.success(try await body(connection)))
            return true
        } catch {
            answer.hold(.failure(error))
            return false
        }
    }

    var succeeded: Bool { if case .success = answer.result { true } else { false } }

    func deliver(commitError: (any Error)?) { answer.deliver(commitError: commitError) }
}

/// A thread of its own that runs the tasks preferring it (`Task(executorPreference:)`): a task whose awaits never
/// suspend runs on it from start to end, and may block it, as it would never block one of the pool's threads.
final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once its queued jobs have run.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            let taken = jobs
            jobs = []
            condition.unlock()
            if taken.isEmpty { return }
            for job in taken { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}
