import AppStoreFormats
import AppStoreTrust
import ArgumentParser
import Foundation
import Logging

/// Options shared by every command that verifies something.
struct TrustOptions: ParsableArguments {
    @Option(name: .customLong("root"), help: ArgumentHelp("A trusted root certificate (DER or PEM). Repeatable. Also read from IAP_TRUST_ROOTS (colon-separated paths). Named roots replace Apple's bundled ones.", valueName: "CERT"))
    var roots: [String] = []

    @Flag(name: .customLong("no-apple-roots"), help: "Do not trust Apple's bundled roots when no root is named.")
    var noAppleRoots = false

    @Option(name: .customLong("at"), help: "When to check the signing chain: 'creation' (the payload's signing or creation date, as Apple's libraries do) or 'now'.")
    var at: CheckTime = .creation

    @Option(name: .customLong("bundle-id"), help: "The bundle id the payload must name.")
    var bundleId: String?

    @Flag(name: .customLong("allow-xcode"), help: "Accept Xcode (StoreKit Testing) payloads. They prove nothing about a real payment.")
    var allowXcode = false

    @Flag(help: "Print Apple's JSON shape only (verifyReceipt's 'receipt' object, or the JWS payload with Apple's field names).")
    var json = false

    @Flag(name: .customLong("no-verify"), help: "Decode only, without checking any signature. Exits 3, never 0.")
    var noVerify = false

    enum CheckTime: String, ExpressibleByArgument, CaseIterable {
        case creation, now
    }

    var validationTime: ValidationTime { at == .now ? .now : .signingDate }

    var environments: Set<AppStoreEnvironment> {
        allowXcode ? [.production, .sandbox, .xcode] : [.production, .sandbox]
    }

    /// Loads the roots — those named, or else Apple's bundled ones — and tells the operator on stderr what the trust
    /// set lacks.
    func loadRoots() throws -> TrustRoots {
        var paths = roots
        if let fromEnvironment = ProcessInfo.processInfo.environment["IAP_TRUST_ROOTS"] {
            paths += fromEnvironment.split(separator: ":").map(String.init).filter { !$0.isEmpty }
        }
        let trust = try TrustRoots.load(paths, trustingApple: !noAppleRoots)
        for warning in trust.warnings { Output.note("warning: \(warning)") }
        return trust
    }
}

/// Where output goes: results on stdout, diagnostics on stderr.
enum Output {
    /// Set by `iap serve --log-format json`: notes go through the logging system, one JSON object a line.
    nonisolated(unsafe) static var logger: Logger?

    static func note(_ line: String) {
        if let logger {
            logger.notice("\(line)")
            return
        }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static func print(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func json(_ value: some Encodable) throws {
        let data = try AppStoreJSON.encoder(sortedKeys: true, pretty: true).encode(value)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static let unverifiedBanner = "*** NOT VERIFIED: decoded only (--no-verify). Nothing here is proven to come from Apple. ***"
}

/// Exit codes: 0 verified, 1 refused (a typed error), 3 decoded without verification.
enum ExitCodes {
    static let refused = ExitCode(1)
    static let unverified = ExitCode(3)
}

/// Runs a command body, turning an `AppStoreError` or an input file that cannot be read into one line on stderr and
/// exit code 1.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as AppStoreError {
        Output.note("error: \(error.code.rawValue): \(error.message)")
        throw ExitCodes.refused
    } catch let error as InputFile.Unreadable {
        Output.note("error: \(error)")
        throw ExitCodes.refused
    }
}
