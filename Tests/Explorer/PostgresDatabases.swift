import Foundation
import IAPTestSupport

/// A database per history on a PostgreSQL server, made and dropped with `psql` (CREATE DATABASE cannot run inside the
/// transactions the ledger's store opens).
enum PostgresDatabases {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Runs one statement with `psql` against the server `url` names.
    static func run(_ statement: String, on url: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: psql())
        process.arguments = [url.replacingOccurrences(of: "?sslmode=disable", with: ""), "-q", "-v", "ON_ERROR_STOP=1", "-c", statement]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try Subprocess.launch(process)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "psql \(statement): " + String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
    }

    /// `url` naming `database` instead of its own.
    static func url(_ url: String, database: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw Failure(description: "not a URL: \(url)") }
        components.path = "/" + database
        return components.string!
    }

    /// `psql` from the throwaway cluster's binaries, Debian's PostgreSQL directory, or the PATH.
    static func psql() -> String {
        if let bin = ProcessInfo.processInfo.environment["IAPKIT_PG_BIN"] { return bin + "/psql" }
        let installed = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        if let version = installed.sorted(by: { $0.compare($1, options: .numeric) == .orderedAscending }).last {
            return "/usr/lib/postgresql/\(version)/bin/psql"
        }
        return "/usr/bin/psql"
    }
}
