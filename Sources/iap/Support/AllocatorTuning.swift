import CAllocator
import Foundation

/// The server's allocator settings, set once before it starts.
enum AllocatorTuning {
    /// How many free bytes a thread's heap keeps at its top before glibc gives them back to the kernel (default 128 KiB).
    static let trimThreshold: Int32 = 4 << 20

    /// glibc gives a thread's free memory back as soon as 128 KiB lie free at the top of its heap (`madvise`), and the
    /// next requests fault the same pages in again: under a load of already-granted purchases (an SDK's retries, a
    /// restore) the kernel's TLB shootdowns and page faults took ~5 % of the CPU, and their rate on SQLite rose ~1.2×
    /// with this threshold; new purchases, which do not give memory back, ran as fast as before (BENCHMARKS.md). What is
    /// kept is bounded: at most this threshold per heap, above the peak. An operator's `GLIBC_TUNABLES` naming
    /// `trim_threshold` wins. Answers whether the setting was made.
    @discardableResult
    static func keepFreedMemoryForReuse(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        if environment["GLIBC_TUNABLES"]?.contains("trim_threshold") == true { return false }
        return iapkit_set_trim_threshold(trimThreshold) == 1
    }
}
