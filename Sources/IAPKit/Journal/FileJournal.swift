import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A journal in a directory, one JSON file per entry. A write goes to a temporary file, is `fsync`ed, renamed over
/// the entry's file, and the directory is `fsync`ed too, so after a crash an entry is either whole or absent.
/// The default on Linux (and a fallback elsewhere); Apple platforms use `KeychainJournal` so entries survive a
/// reinstall.
public struct FileJournal: PurchaseJournal {
    /// The journal's directory (one JSON file per entry).
    public let directory: URL

    /// A journal in `directory`, created if missing.
    public init(directory: URL) throws {
        self.directory = directory
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw JournalError("cannot create the journal directory \(directory.path): \(error)")
        }
    }

    public func write(_ entry: JournalEntry) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        let data = try encoder.encode(entry)
        let final = file(entry.key)
        let temporary = directory.appendingPathComponent(".\(final.deletingPathExtension().lastPathComponent).\(UUID().uuidString).tmp")
        do { try Self.writeSynced(data, to: temporary.path) } catch {
            // A full disk must not also fill up with half-written temporaries, one per retry.
            unlink(temporary.path)
            throw error
        }
        guard rename(temporary.path, final.path) == 0 else {
            unlink(temporary.path)
            throw JournalError("cannot rename into \(final.path): errno \(errno)")
        }
        try Self.syncDirectory(directory.path)
    }

    public func remove(key: String) throws {
        let path = file(key).path
        guard unlink(path) == 0 || errno == ENOENT else { throw JournalError("cannot remove \(path): errno \(errno)") }
        try Self.syncDirectory(directory.path)
    }

    public func entries() throws -> [JournalEntry] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        // A journal that cannot be read is an error, never an empty journal: the client then writes nothing over it.
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory.path) } catch {
            throw JournalError("cannot list the journal directory \(directory.path): \(error)")
        }
        return try names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted().compactMap { name in
            let path = directory.appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                // Removed since the listing (another client on the same journal settled it) is not unreadable.
                if !FileManager.default.fileExists(atPath: path) { return nil }
                throw JournalError("cannot read \(path)")
            }
            // A file that does not decode (or is larger than any entry) was damaged outside the app, since the rename
            // makes a half-written one impossible: skipping it beats refusing every other entry.
            guard data.count <= 4 << 20 else { return nil }
            return try? decoder.decode(JournalEntry.self, from: data)
        }.sorted { $0.createdAt < $1.createdAt }
    }

    /// One file read, not the directory: what each upload and retry asks.
    public func entry(key: String) throws -> JournalEntry? {
        let path = file(key).path
        guard let data = FileManager.default.contents(atPath: path) else {
            if !FileManager.default.fileExists(atPath: path) { return nil }
            throw JournalError("cannot read \(path)")
        }
        guard data.count <= 4 << 20 else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        // Damaged outside the app (the rename makes a half-written one impossible): as `entries()`, skipped.
        return try? decoder.decode(JournalEntry.self, from: data)
    }

    func file(_ key: String) -> URL {
        let safe = String(key.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || $0 == "-" ? Character($0) : "_" })
        return directory.appendingPathComponent(safe + ".json")
    }

    static func writeSynced(_ data: Data, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw JournalError("cannot open \(path): errno \(errno)") }
        defer { close(fd) }
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                guard written > 0 else { throw JournalError("cannot write \(path): errno \(errno)") }
                offset += written
            }
        }
        guard fsync(fd) == 0 else { throw JournalError("cannot fsync \(path): errno \(errno)") }
    }

    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw JournalError("cannot open directory \(path): errno \(errno)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw JournalError("cannot fsync directory \(path): errno \(errno)") }
    }
}
