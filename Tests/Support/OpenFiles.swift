#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// How many file descriptors this process holds.
///
/// Foundation's `Process.run()` on Linux finds the highest open descriptor by reading `/proc/self/fd`, and copies each
/// entry's whole 256-byte `d_name` out of `readdir`'s buffer. When the directory fills that 32 KiB buffer (about 1,350
/// descriptors) the copy of the last entry reads past the buffer's end, and where no page follows, the test process
/// dies of SIGSEGV in `memmove` (two CI runs did, with 1,361 descriptors open). Counting here probes descriptors with
/// `fcntl` instead of reading that directory.
public enum OpenFiles {
    /// Above this, a launch waits: well under the count at which `Process.run()` can read past its buffer.
    public static let launchCeiling = 1_000

    public static func count(below limit: Int32 = 4_096) -> Int {
        var open = 0
        for descriptor in 0..<limit where fcntl(descriptor, F_GETFD) != -1 { open += 1 }
        return open
    }

    /// Blocks the calling thread until fewer than ``launchCeiling`` descriptors are open, or throws after `timeout`.
    static func waitForLaunchRoom(timeout: TimeInterval = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var open = count()
        while open >= launchCeiling {
            guard Date() < deadline else { throw TooManyOpenFiles(open: open) }
            Thread.sleep(forTimeInterval: 0.05)
            open = count()
        }
    }

    public struct TooManyOpenFiles: Error, CustomStringConvertible {
        public let open: Int
        public var description: String {
            "\(open) file descriptors open, for over a minute: Foundation's Process.run() could read past its buffer, so nothing was launched"
        }
    }
}

/// Lets at most `limit` callers run at once; the rest wait in order. Swift Testing starts every test of a suite
/// together, and each live system holds two listeners, their connections and a ledger's files.
public actor ConcurrencyGate {
    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(limit: Int) { self.limit = limit }

    public func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await enter()
        defer { leave() }
        return try await body()
    }

    private func enter() async {
        if running < limit {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func leave() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
