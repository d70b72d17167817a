import Foundation

/// Databases of their own on a PostgreSQL server, made and dropped with `psql` (CREATE DATABASE cannot run inside the
/// transactions the ledger's store opens): one per explored history, and one per test that starts a server the way an
/// operator does (`iap serve`, `PurchaseServices.open`), which refuses a ledger whose customers own products its catalog
/// no longer lists — as the suite's shared database does, where other tests sell products of their own.
public enum PostgresDatabases {
    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// A new, empty database on the server `IAPKIT_POSTGRES_URL` names, named from `prefix`: its URL.
    public static func fresh(_ prefix: String) throws -> String {
        guard let server = ProcessInfo.processInfo.environment["IAPKIT_POSTGRES_URL"] else {
            throw Failure(description: "IAPKIT_POSTGRES_URL is not set: run the suite with scripts/test, which starts a throwaway PostgreSQL")
        }
        let name = "iapkit_\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
        try run("CREATE DATABASE \(name)", on: server)
        return try url(server, database: name)
    }

    /// Runs one statement with `psql` against the server `url` names.
    public static func run(_ statement: String, on url: String) throws {
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
    public static func url(_ url: String, database: String) throws -> String {
        guard var components = URLComponents(string: url) else { throw Failure(description: "not a URL: \(url)") }
        components.path = "/" + database
        return components.string!
    }

    /// `psql` from the throwaway cluster's binaries, Debian's PostgreSQL directory, or the PATH.
    public static func psql() -> String {
        if let bin = ProcessInfo.processInfo.environment["IAPKIT_PG_BIN"] { return bin + "/psql" }
        let installed = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        if let version = installed.sorted(by: { $0.compare($1, options: .numeric) == .orderedAscending }).last {
            return "/usr/lib/postgresql/\(version)/bin/psql"
        }
        return "/usr/bin/psql"
    }
}
