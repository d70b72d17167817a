import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on loopback that nothing listens on now, for a process the test starts (which binds it a moment later).
/// It is taken below Linux's ephemeral range (32768–60999): a port from the ephemeral range, free when checked, can be
/// handed out again before the process binds it — to another test's server on port 0, or as the source port of any
/// outgoing connection — and the process then serves nothing or the test talks to the wrong server. Below the range
/// only another pick can take it — and no pick hands out a port twice in one test process: two tests picking at once
/// (the suite's tests start together) once got the same one, and the second process to bind it exited ("Address
/// already in use", CI: `iap dev`'s simulator).
public enum FreePort {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var given: Set<Int> = []

    public static func pick() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            let fresh = lock.withLock { given.insert(port).inserted }
            if fresh, try isFree(port) { return port }
        }
        throw CocoaError(.fileWriteUnknown)
    }

    static func isFree(_ port: Int) throws -> Bool {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return bound
    }
}
