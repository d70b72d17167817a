import Foundation
import Testing

/// The documentation a newcomer reads stays whole: the README is a front door (short, pointing at the guides), every
/// relative link in it and in docs/*.md reaches a file — and, with `#anchor`, a heading of that file, by GitHub's slug —
/// and the architecture map lives in the repository.
@Suite("The docs: a short README that links the guides, every relative link resolving, the architecture kept here")
struct DocsLinksTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// README.md and every Markdown file directly under docs/, as repository-relative paths.
    static func documents() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md"] + docs
    }

    /// The lines of `markdown` outside fenced code blocks (``` or ~~~), each with inline code spans removed.
    static func prose(_ markdown: String) -> [String] {
        var lines: [String] = []
        var fence: String?
        for line in markdown.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let open = fence {
                if trimmed.hasPrefix(open) { fence = nil }
                continue
            }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                fence = String(trimmed.prefix(3))
                continue
            }
            lines.append(withoutCodeSpans(line))
        }
        return lines
    }

    /// `line` with each `code span` taken out (a link inside one is not a link).
    static func withoutCodeSpans(_ line: String) -> String {
        var result = ""
        var inCode = false
        for character in line {
            if character == "`" { inCode.toggle(); continue }
            if !inCode { result.append(character) }
        }
        return result
    }

    /// The targets of the Markdown links and images in `markdown`: what stands between `](` and `)`, without a title.
    static func linkTargets(in markdown: String) -> [String] {
        var targets: [String] = []
        for line in prose(markdown) {
            var rest = Substring(line)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                let target = after[..<close].split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
                if !target.isEmpty { targets.append(target.trimmingCharacters(in: CharacterSet(charactersIn: "<>"))) }
                rest = after[after.index(after: close)...]
            }
        }
        return targets
    }

    /// GitHub's anchor for a heading's text: lower case, inline markup dropped, every character that is not a letter,
    /// a digit, `-` or `_` removed, and each space made `-`.
    static func slug(_ heading: String) -> String {
        var text = heading
        // A link in a heading reads as its text.
        while let open = text.range(of: "]("), let close = text[open.upperBound...].firstIndex(of: ")"),
              let bracket = text[..<open.lowerBound].lastIndex(of: "[") {
            text = String(text[..<bracket]) + text[text.index(after: bracket)..<open.lowerBound] + text[text.index(after: close)...]
        }
        var slug = ""
        for character in text.lowercased() {
            if character == " " {
                slug.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                slug.append(character)
            }
        }
        return slug
    }

    /// The anchors of `markdown`'s ATX headings, outside code blocks; a repeated heading gets `-1`, `-2`, … as on GitHub.
    static func anchors(in markdown: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for line in prose(markdown) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let hashes = trimmed.prefix { $0 == "#" }
            guard (1...6).contains(hashes.count), trimmed.dropFirst(hashes.count).first == " " else { continue }
            var text = trimmed.dropFirst(hashes.count).trimmingCharacters(in: .whitespaces)
            while text.hasSuffix("#") { text = String(text.dropLast()).trimmingCharacters(in: .whitespaces) }
            let base = slug(text)
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }

    /// What is wrong with `target`, a link in the document at `path` (repository-relative); nil when it resolves.
    static func problem(with target: String, in path: String) throws -> String? {
        // Links with a scheme (https:, mailto:) leave the repository: not checked here.
        if let colon = target.firstIndex(of: ":"), !target[..<colon].contains("/"), !target[..<colon].contains("#") { return nil }
        let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let file = String(parts[0])
        let anchor = parts.count > 1 ? String(parts[1]) : nil
        let resolved = file.isEmpty ? path : normalized(path.split(separator: "/").dropLast().map(String.init) + file.split(separator: "/").map(String.init))
        guard !resolved.hasPrefix("..") else { return "\(path): \(target) — outside the repository" }
        let url = root.appendingPathComponent(resolved)
        guard FileManager.default.fileExists(atPath: url.path) else { return "\(path): \(target) — no file \(resolved)" }
        guard let anchor, !anchor.isEmpty else { return nil }
        guard resolved.hasSuffix(".md") else { return nil }
        let headings = anchors(in: try String(contentsOf: url, encoding: .utf8))
        return headings.contains(anchor.lowercased()) ? nil : "\(path): \(target) — no heading #\(anchor) in \(resolved)"
    }

    /// Repository-relative path components joined, `.` dropped and `..` taken back; `..` past the root stays, and
    /// names a file outside the repository that does not exist.
    static func normalized(_ components: [String]) -> String {
        var result: [String] = []
        for component in components where component != "." && !component.isEmpty {
            if component == "..", let last = result.last, last != ".." { result.removeLast() } else { result.append(component) }
        }
        return result.joined(separator: "/")
    }

    @Test("README.md is a front door: at most 200 lines and 16 KB")
    func readmeIsShort() throws {
        let readme = try Self.read("README.md")
        var lines = readme.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        #expect(lines.count <= 200, "README.md has \(lines.count) lines: move the reference into docs/")
        #expect(readme.utf8.count <= 16 * 1024, "README.md is \(readme.utf8.count) bytes: move the reference into docs/")
    }

    @Test("README.md links at least four guides under docs/")
    func readmeLinksGuides() throws {
        let guides = Set(Self.linkTargets(in: try Self.read("README.md"))
            .map { String($0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]) }
            .filter { $0.hasPrefix("docs/") && $0.hasSuffix(".md") })
        #expect(guides.count >= 4, "README.md links \(guides.sorted())")
        for guide in guides {
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(guide).path), "\(guide) is missing")
        }
    }

    @Test("Every relative link in README.md and docs/*.md reaches a file, and each #anchor a heading of it")
    func linksResolve() throws {
        var problems: [String] = []
        var checked = 0
        for path in try Self.documents() {
            for target in Self.linkTargets(in: try Self.read(path)) {
                checked += 1
                if let problem = try Self.problem(with: target, in: path) { problems.append(problem) }
            }
        }
        #expect(checked > 0)
        #expect(problems.isEmpty, "broken links:\n\(problems.joined(separator: "\n"))")
    }

    @Test("docs/ARCHITECTURE.md exists: the project's map is kept in the repository")
    func architectureIsHere() throws {
        let architecture = try Self.read("docs/ARCHITECTURE.md")
        #expect(architecture.contains("## Modules"))
    }

    @Test("The checker itself: GitHub's slugs, links outside code, a missing file and a missing heading are seen")
    func checkerSeesProblems() throws {
        #expect(Self.slug("1. App Store Connect") == "1-app-store-connect")
        #expect(Self.slug("Trust: Apple's roots and what `is` checked") == "trust-apples-roots-and-what-is-checked")
        #expect(Self.slug("IAPKit — architecture") == "iapkit--architecture")
        #expect(Self.slug("See [the API](API.md) now") == "see-the-api-now")
        #expect(Self.anchors(in: "# A\n## A\n```\n# B\n```\n") == ["a", "a-1"])
        #expect(Self.linkTargets(in: "[a](x.md) `[b](y.md)` [c](https://e.com \"t\")\n```\n[d](z.md)\n```\n") == ["x.md", "https://e.com"])
        #expect(try Self.problem(with: "https://example.com/x", in: "README.md") == nil)
        #expect(try Self.problem(with: "docs/NO_SUCH_FILE.md", in: "README.md") != nil)
        #expect(try Self.problem(with: "docs/ARCHITECTURE.md#no-such-heading", in: "README.md") != nil)
        #expect(try Self.problem(with: "ARCHITECTURE.md#modules-and-what-each-may-import", in: "docs/API.md") == nil)
        #expect(try Self.problem(with: "../README.md", in: "docs/API.md") == nil)
    }
}
