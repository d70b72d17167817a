import Foundation
import Testing

/// The Swift blocks of README.md and docs/SDK.md are code the suite compiles, read from the markdown itself:
/// scripts/typecheck-apple (run by scripts/test after its build) hands them to scripts/markdown-snippets and type-checks
/// each as an iOS app's file against IAPKit and Apple's declarations, the Package.swift lines against PackageDescription.
/// These tests hold that check to its word: no block is left out, and a wrong block fails it.
@Suite("The Swift blocks of the README and the SDK guide are compiled from the markdown")
struct DocumentSnippetTests {
    static let root = AppleTypeCheckTests.root
    static let documents = ["README.md", "docs/SDK.md"]

    @Test("Every ```swift block of README.md and docs/SDK.md is written out to be compiled, none skipped")
    func everyBlockExtracted() throws {
        let out = FileManager.default.temporaryDirectory.appending(path: "iapkit-snippets-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let paths = Self.documents.map { Self.root.appending(path: $0).path }
        let (status, output) = try AppleTypeCheckTests.run(Self.root.appending(path: "scripts/markdown-snippets"), [out.path] + paths)
        #expect(status == 0, "\(output)")

        let blocks = try paths.map { try String(contentsOfFile: $0, encoding: .utf8).components(separatedBy: "\n").filter { $0.trimmingCharacters(in: .whitespaces) == "```swift" }.count }
        #expect(blocks.allSatisfy { $0 >= 2 }, "each document has its package lines and at least one block of app code")
        let written = FileManager.default.enumerator(at: out, includingPropertiesForKeys: nil)?.compactMap { ($0 as? URL)?.pathExtension == "swift" ? $0 : nil } ?? []
        #expect(written.count == blocks.reduce(0, +))
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == String(blocks.reduce(0, +)))
    }

    @Test("A wrong block fails the check with the markdown's file and line: a SwiftUI call, a missing try, a Package.swift label")
    func wrongBlocksFail() throws {
        let copy = FileManager.default.temporaryDirectory.appending(path: "iapkit-snippet-docs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: copy) }
        let mutations = [
            ("docs/SDK.md", "confirmIn: .purchaseAction(purchase)", "confirmIn: .purchaseAction(action: purchase)", "error: extraneous argument label 'action:' in call"),
            ("README.md", "offlineCache: try FileEntitlementsCache", "offlineCache: FileEntitlementsCache", "error: call can throw but is not marked with 'try'"),
            ("README.md", "branch: \"main\"),", "brunch: \"main\"),", "error: no exact matches in call to static method 'package'"),
        ]
        var texts: [String: String] = [:]
        for document in Self.documents { texts[document] = try String(contentsOf: Self.root.appending(path: document), encoding: .utf8) }
        var expected: [String] = []
        for (document, original, wrong, error) in mutations {
            let text = try #require(texts[document])
            let range = try #require(text.range(of: original), "\(document) no longer holds \(original)")
            let line = text[..<range.lowerBound].components(separatedBy: "\n").count
            texts[document] = text.replacingCharacters(in: range, with: wrong)
            let file = copy.appending(path: URL(filePath: document).lastPathComponent).path
            expected.append("\(file):\(line):")
            expected.append(error)
        }
        for (document, text) in texts {
            try text.write(to: copy.appending(path: URL(filePath: document).lastPathComponent), atomically: true, encoding: .utf8)
        }

        let (status, output) = try AppleTypeCheckTests.run(Self.root.appending(path: "scripts/typecheck-apple"), [Self.root.appending(path: "Sources/IAPKit").path]
            + Self.documents.map { copy.appending(path: URL(filePath: $0).lastPathComponent).path })

        #expect(status != 0)
        for text in expected { #expect(output.contains(text), "\(text) not in: \(output)") }
    }
}
