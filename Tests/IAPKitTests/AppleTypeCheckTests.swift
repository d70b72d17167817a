import Foundation
import Testing

/// scripts/typecheck-apple, which scripts/test runs right after its build, type-checks the SDK's Apple-only code against
/// Apple's declarations (Tests/AppleDeclarations). That check is worth something only if it can fail: here it runs on
/// a copy of the sources with one StoreKit call given a wrong argument label, and must fail with the compiler's error.
@Suite("The Linux type-check of the Apple-only code fails on a wrong StoreKit call")
struct AppleTypeCheckTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("Product.products(for:) called with another label: the check fails with the compiler's error, for iOS and macOS")
    func wrongArgumentLabel() throws {
        let copy = FileManager.default.temporaryDirectory.appending(path: "iapkit-apple-typecheck-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: Self.root.appending(path: "Sources/IAPKit"), to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        let file = copy.appending(path: "Store/StoreKitStore.swift")
        let source = try String(contentsOf: file, encoding: .utf8)
        let call = "Product.products(for: productIds)"
        try #require(source.contains(call))
        try source.replacingOccurrences(of: call, with: "Product.products(identifiers: productIds)").write(to: file, atomically: true, encoding: .utf8)

        let (status, output) = try Self.run(Self.root.appending(path: "scripts/typecheck-apple"), [copy.path])

        #expect(status != 0)
        let error = "error: incorrect argument label in call (have 'identifiers:', expected 'for:')"
        #expect(output.contains("iOS (UIKit) failed") && output.contains("macOS (AppKit) failed"), "\(output)")
        #expect(output.contains(error), "\(output)")
    }

    /// Runs a program to its end: its exit status and its output and errors together.
    static func run(_ program: URL, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = program
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        // Read to the end before waiting: a full pipe would otherwise stall the script.
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
