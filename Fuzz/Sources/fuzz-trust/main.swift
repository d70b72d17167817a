import AppStoreFormats
import AppStoreTrust
import Foundation
import FuzzSupport

/// The verifiers on hostile input, trusting Apple's real roots (from ../shared/vectors/certs when the run has them):
/// a JWS and a receipt are checked all the way (chain, signature, policies) and never trap, whatever they hold.
let roots: TrustRoots = {
    var roots = TrustRoots()
    let directory = ProcessInfo.processInfo.environment["IAPKIT_FUZZ_ROOTS"] ?? "../../shared/vectors/certs"
    for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasSuffix(".cer") || name.hasSuffix(".pem") {
        if let data = FileManager.default.contents(atPath: directory + "/" + name) { try? roots.add(certificateData: [UInt8](data), source: name) }
    }
    return roots
}()
let jws = SignedDataVerifier(.init(roots: roots))
let receipts = ReceiptVerifier(.init(roots: roots))

/// libFuzzer calls synchronously; the verifiers are async.
final class Done: @unchecked Sendable { let semaphore = DispatchSemaphore(value: 0) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = bytes(start, count)
    let done = Done()
    Task {
        _ = try? await jws.verifyTransaction(String(decoding: input, as: UTF8.self))
        _ = try? await receipts.verify(input)
        done.semaphore.signal()
    }
    done.semaphore.wait()
    return 0
}
