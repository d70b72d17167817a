import AppStoreFormats
import AppStoreTrust
import ArgumentParser
import Foundation

/// `iap jws …`
struct JWSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jws", abstract: "Signed data (JWS): transactions, renewal info, app transactions, notifications.",
        subcommands: [Verify.self])

    /// What a JWS holds.
    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case auto, transaction, renewal, app, notification
    }

    /// `iap jws verify FILE`
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a JWS and print its payload.",
            discussion: "FILE holds a compact JWS or a notification body {\"signedPayload\": …}; '-' reads stdin. A notification's nested signed transaction and renewal info are verified too. Exit 0 only when verified; 1 with one typed error line when refused; 3 with --no-verify.")

        @Argument(help: "The JWS file; '-' for stdin.")
        var file: String

        @OptionGroup var trust: TrustOptions

        @Option(help: "What the JWS holds; 'auto' tells from the payload.")
        var type: Kind = .auto

        @Option(name: .customLong("repeat"), help: "Verify a signed transaction this many times and report the time per verification on stderr (a benchmark baseline).")
        var repeatCount: Int = 1

        func run() async throws {
            try await reportingErrors {
                let limits = InputLimits.default
                let bytes = try InputFile.jws(file, limits: limits)
                let jws = try CompactJWS(bytes, limits: limits)
                let kind = type == .auto ? try Self.detect(jws) : type
                if trust.noVerify {
                    Output.note(Output.unverifiedBanner)
                    try printUnverified(jws, kind: kind)
                    Output.note(Output.unverifiedBanner)
                    throw ExitCodes.unverified
                }
                let verifier = SignedDataVerifier(.init(
                    roots: try trust.loadRoots(), bundleId: trust.bundleId, environments: trust.environments,
                    validationTime: trust.validationTime, limits: limits))
                let text = String(decoding: bytes, as: UTF8.self)
                if repeatCount > 1 {
                    guard kind == .transaction else { throw ValidationError("--repeat measures signed transactions only") }
                    _ = try await verifier.verifyTransaction(text)
                    let clock = ContinuousClock()
                    let elapsed = try await clock.measure {
                        for _ in 0..<repeatCount { _ = try await verifier.verifyTransaction(text) }
                    }
                    let each = elapsed / repeatCount
                    Output.note("\(repeatCount) verifications (chain cached): \(Int(each / .nanoseconds(1)) / 1000) µs each")
                }
                switch kind {
                case .transaction: try show(try await verifier.verifyTransaction(text), "signed transaction")
                case .renewal: try show(try await verifier.verifyRenewalInfo(text), "signed renewal info")
                case .app: try show(try await verifier.verifyAppTransaction(text), "signed app transaction")
                case .notification, .auto:
                    let notification = try await verifier.verifyNotification(text)
                    try show(notification, "notification")
                    if let nested = notification.payload.data?.signedTransactionInfo {
                        try show(try await verifier.verifyTransaction(nested), "data.signedTransactionInfo", nested: true)
                    }
                    if let nested = notification.payload.data?.signedRenewalInfo {
                        try show(try await verifier.verifyRenewalInfo(nested), "data.signedRenewalInfo", nested: true)
                    }
                }
            }
        }

        private func show<Payload: Encodable>(_ verified: Verified<Payload>, _ what: String, nested: Bool = false) throws {
            Output.note("verified: \(what), ES256, chained to \(verified.anchor), checked at \(ReceiptDate.rfc3339(verified.validatedAt))")
            if verified.anchor.kind != .apple { Output.note("warning: \(what) is not signed by Apple (\(verified.anchor.kind.rawValue) root)") }
            // With --json, stdout holds exactly one JSON document: the outer payload.
            if trust.json && nested { return }
            if !trust.json { Output.print("\(what):") }
            try Output.json(verified.payload)
        }

        private func printUnverified(_ jws: CompactJWS, kind: Kind) throws {
            switch kind {
            case .transaction: try Output.json(jws.unverifiedPayload(as: JWSTransactionDecodedPayload.self))
            case .renewal: try Output.json(jws.unverifiedPayload(as: JWSRenewalInfoDecodedPayload.self))
            case .app: try Output.json(jws.unverifiedPayload(as: AppTransactionDecodedPayload.self))
            case .notification, .auto: try Output.json(jws.unverifiedPayload(as: ResponseBodyV2DecodedPayload.self))
            }
        }

        /// Tells the payload kind from the fields only that kind has.
        static func detect(_ jws: CompactJWS) throws -> Kind {
            let payload = try jws.payload()
            guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
                throw AppStoreError(.malformed, "JWS payload is not a JSON object")
            }
            if object["notificationType"] != nil { return .notification }
            if object["receiptType"] != nil { return .app }
            if object["transactionId"] != nil { return .transaction }
            if object["autoRenewStatus"] != nil || object["autoRenewProductId"] != nil { return .renewal }
            throw AppStoreError(.malformed, "cannot tell what this JWS holds; pass --type")
        }
    }
}
