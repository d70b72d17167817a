import Foundation
#if canImport(os)
import os
#endif

extension PurchaseLog {
    #if canImport(os)
    private static let logger = Logger(subsystem: "IAPKit", category: "purchases")
    #endif

    /// Where `.debug` writes: the unified log where there is one (Console.app, `log stream`), standard error elsewhere.
    static func system(_ line: String) {
        #if canImport(os)
        logger.debug("\(line, privacy: .public)")
        #else
        FileHandle.standardError.write(Data("[IAPKit] \(line)\n".utf8))
        #endif
    }
}
