import AppStoreFormats
import AppStoreTrust
import Foundation
import Testing

/// The real Apple-signed files in `../shared/vectors`, read in place (never copied into the repository).
enum Vectors {
    /// `IAPKIT_SHARED` overrides; otherwise `../shared` beside the repository.
    static let directory: URL = {
        if let shared = ProcessInfo.processInfo.environment["IAPKIT_SHARED"] {
            return URL(fileURLWithPath: shared).appendingPathComponent("vectors")
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/vectors")
    }()

    static func data(_ name: String) throws -> [UInt8] {
        let url = directory.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            Issue.record("test vector \(url.path) is missing: the tests need ../shared/vectors beside the repository (or IAPKIT_SHARED)")
            throw VectorMissing(path: url.path)
        }
        return Array(data)
    }

    /// A receipt vector as DER, whether stored binary or base64.
    static func receipt(_ name: String) throws -> [UInt8] {
        let raw = try data(name)
        if raw.first == 0x30 { return raw }
        guard let der = Data(base64Encoded: Data(raw), options: .ignoreUnknownCharacters) else {
            throw VectorMissing(path: "\(name) is neither DER nor base64")
        }
        return Array(der)
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try data(name), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func expectedReceipts() throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(data("expected_receipts_decoded.json"))) as! [String: Any]
    }

    static func roots(_ names: String...) throws -> TrustRoots {
        var roots = TrustRoots()
        for name in names { try roots.add(certificateData: data("certs/\(name)"), source: name) }
        return roots
    }

    static var appleReceiptRoot: TrustRoots { get throws { try roots("AppleIncRootCertificate.cer") } }
    static var appleJWSRoot: TrustRoots { get throws { try roots("AppleRootCA-G3.pem") } }
    static var storeKitRoot: TrustRoots { get throws { try roots("StoreKitTestCertificate.cer") } }

    static let appStoreReceipts = [
        "revenuecat/base64encodedreceiptsample1.txt", "kvitto/receipt.der", "kvitto/sandboxReceipt.der",
        "tpinappreceipt/receipt-production.b64", "tpinappreceipt/receipt-sandbox-g5.b64", "tpinappreceipt/receipt-sandbox-legacy.b64",
    ]
    static let xcodeReceipts = [
        "kvitto/storeKitTestReceipt.der", "tpinappreceipt/receipt-xcode.b64", "tpinappreceipt/receipt-xcode-with-purchases.b64",
        "apple-asl-swift-xcode/xcode-app-receipt-empty", "apple-asl-swift-xcode/xcode-app-receipt-with-transaction",
    ]
    static let realJWS = [
        "jws-real/go-iap_signedRenewalInfo_2000000335310644.jws", "jws-real/mingos_signedTransaction_2000000847061981.jws",
    ]
}

struct VectorMissing: Error { let path: String }

/// An expected date string from the vectors' README, parsed independently of IAPKit's own parser.
func expectedDate(_ text: String) -> Date? {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    for format in ["yyyy-MM-dd'T'HH:mm:ssXXXXX", "yyyy-MM-dd'T'HH:mm:ssXX"] {
        formatter.dateFormat = format
        if let date = formatter.date(from: text) { return date }
    }
    return nil
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// Runs `body` and returns the `AppStoreError` it throws; records an issue if it throws nothing or something else.
func appStoreError(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> AppStoreError? {
    do {
        try await body()
        Issue.record("expected an AppStoreError, but it succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as AppStoreError {
        return error
    } catch {
        Issue.record("expected an AppStoreError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
