import Foundation
import Testing

/// The README's code is the code the suite compiles: each block marked `<!-- snippet: PATH -->` is, byte for byte, the
/// file at PATH, which `scripts/typecheck-apple` type-checks against Apple's signatures (an app's code imports UIKit).
@Suite("The README's snippets are the files the suite compiles")
struct ReadmeSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Each marked block of `markdown`: the path it names and the code under it.
    static func snippets(in markdown: String) -> [(path: String, code: String)] {
        var found: [(String, String)] = []
        let lines = markdown.components(separatedBy: "\n")
        for (index, line) in lines.enumerated() {
            guard line.hasPrefix("<!-- snippet: "), line.hasSuffix(" -->"), index + 1 < lines.count, lines[index + 1] == "```swift" else { continue }
            let path = String(line.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
            let body = lines[(index + 2)...].prefix { $0 != "```" }
            found.append((path, body.joined(separator: "\n") + "\n"))
        }
        return found
    }

    @Test("The README's SDK snippet is Tests/Snippets/ReadmeSDK.swift as written")
    func readmeMatches() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let snippets = Self.snippets(in: readme)
        #expect(snippets.map(\.path).contains("Tests/Snippets/ReadmeSDK.swift"))
        for snippet in snippets {
            let file = try String(contentsOf: Self.root.appendingPathComponent(snippet.path), encoding: .utf8)
            #expect(snippet.code == file, "README's block differs from \(snippet.path)")
        }
    }

    @Test("A block that differs from its file is seen")
    func differenceSeen() {
        let markdown = "<!-- snippet: X.swift -->\n```swift\nlet a = 1\n```\n"
        #expect(Self.snippets(in: markdown).first?.code == "let a = 1\n")
        #expect(Self.snippets(in: markdown).first?.code != "let a = 2\n")
    }
}
