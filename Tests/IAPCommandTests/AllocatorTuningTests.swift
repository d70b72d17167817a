@testable import iap
import Testing

@Suite("The server's allocator settings")
struct AllocatorTuningTests {
    #if canImport(Glibc)
    @Test("glibc takes the server's trim threshold")
    func glibcTakesTheThreshold() {
        #expect(AllocatorTuning.keepFreedMemoryForReuse(environment: [:]))
    }
    #endif

    @Test("An operator's GLIBC_TUNABLES naming the trim threshold is left to decide")
    func operatorsTunablesWin() {
        #expect(!AllocatorTuning.keepFreedMemoryForReuse(environment: ["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=65536"]))
    }
}
