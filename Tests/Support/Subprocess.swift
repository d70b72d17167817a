import Foundation

/// Runs a program to completion without blocking a Swift concurrency thread.
///
/// These machines have two cores, so the cooperative pool has two threads; a test that waits for a subprocess on one
/// of them (while another waits too) starves the in-process servers that subprocess is calling. The waiting here
/// happens on a thread of its own.
public enum Subprocess {
    /// Held from creating a child's pipes until its stdin is written and closed: a child spawned concurrently would
    /// otherwise inherit the write end of another child's stdin, which then never sees end-of-file.
    private static let spawnLock = NSLock()

    /// Launches `process` (already set up). Every launch in the tests comes here: it takes the launch lock, and waits
    /// while this process holds so many descriptors that Foundation's `Process.run()` could crash (``OpenFiles``).
    public static func launch(_ process: Process) throws {
        spawnLock.lock()
        defer { spawnLock.unlock() }
        try OpenFiles.waitForLaunchRoom()
        try process.run()
    }

    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    public static func run(_ executable: String, _ arguments: [String], stdin: Data? = nil,
                           environment: [String: String]? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = arguments
                    if let environment { process.environment = environment }
                    spawnLock.lock()
                    do { try OpenFiles.waitForLaunchRoom() } catch { spawnLock.unlock(); throw error }
                    let out = Pipe(), err = Pipe(), input = Pipe()
                    process.standardOutput = out
                    process.standardError = err
                    process.standardInput = input
                    do {
                        try process.run()
                        if let stdin { input.fileHandleForWriting.write(stdin) }
                        try input.fileHandleForWriting.close()
                    } catch {
                        spawnLock.unlock()
                        throw error
                    }
                    spawnLock.unlock()
                    // Read both pipes concurrently so neither fills up and stalls the child.
                    let group = DispatchGroup()
                    nonisolated(unsafe) var errData = Data()
                    group.enter()
                    Thread { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }.start()
                    let outData = out.fileHandleForReading.readDataToEndOfFile()
                    group.wait()
                    process.waitUntilExit()
                    continuation.resume(returning: Result(status: process.terminationStatus,
                                                          stdout: String(decoding: outData, as: UTF8.self),
                                                          stderr: String(decoding: errData, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    /// Starts a long-running program and returns it; stop it with `terminate()`. Output is discarded, standard error
    /// written to `stderrFile` when given.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, stderrFile: URL? = nil) throws -> Process {
        spawnLock.lock()
        defer { spawnLock.unlock() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
        process.standardOutput = FileHandle.nullDevice
        if let stderrFile {
            _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: stderrFile)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        process.standardInput = FileHandle.nullDevice
        try OpenFiles.waitForLaunchRoom()
        try process.run()
        return process
    }
}
