import AppStoreFormats
import AppStoreTrust
import ArgumentParser
import Foundation

/// `iap receipt …`
struct ReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt", abstract: "App receipts (PKCS#7).", subcommands: [Verify.self])

    /// `iap receipt verify FILE`
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify an app receipt and print what it holds.",
            discussion: "FILE is DER or base64; '-' reads stdin. Exit 0 only when verified; 1 with one typed error line when refused; 3 with --no-verify.")

        @Argument(help: "The receipt file, DER or base64; '-' for stdin.")
        var file: String

        @OptionGroup var trust: TrustOptions

        @Option(name: .customLong("device-id"), help: "The device's identifierForVendor; the receipt's device hash must match it.")
        var deviceId: String?

        @Option(name: .customLong("app-version"), help: "The app version the receipt must name.")
        var appVersion: String?

        func run() async throws {
            try await reportingErrors {
                let limits = InputLimits.default
                let der = try InputFile.receipt(file, limits: limits)
                if trust.noVerify {
                    Output.note(Output.unverifiedBanner)
                    let receipt = try AppReceipt(payload: PKCS7SignedData(berEncoded: der, limits: limits).content, limits: limits)
                    try show(receipt, verified: nil)
                    Output.note(Output.unverifiedBanner)
                    throw ExitCodes.unverified
                }
                var device: [UInt8]?
                if let deviceId {
                    guard let uuid = UUID(uuidString: deviceId) else { throw ValidationError("--device-id must be a UUID") }
                    device = uuid.deviceIdentifierBytes
                }
                let verifier = ReceiptVerifier(.init(
                    roots: try trust.loadRoots(), bundleId: trust.bundleId, applicationVersion: appVersion,
                    environments: trust.environments, validationTime: trust.validationTime, limits: limits))
                let verified = try await verifier.verify(der, deviceIdentifier: device)
                try show(verified.receipt, verified: verified)
            }
        }

        private func show(_ receipt: AppReceipt, verified: VerifiedReceipt?) throws {
            if let verified {
                Output.note("verified: \(verified.digestAlgorithm) signature, chained to \(verified.anchor), checked at \(ReceiptDate.rfc3339(verified.validatedAt))\(deviceId == nil ? "" : ", device hash matches")")
                if verified.anchor.kind != .apple { Output.note("warning: this receipt is not signed by Apple (\(verified.anchor.kind.rawValue) root)") }
            }
            if trust.json {
                try Output.json(LegacyReceipt(receipt))
                return
            }
            func date(_ value: Date?) -> String { value.map(ReceiptDate.rfc3339) ?? "-" }
            Output.print("bundle_id                    \(receipt.bundleId)")
            Output.print("application_version          \(receipt.applicationVersion)")
            Output.print("original_application_version \(receipt.originalApplicationVersion ?? "-")")
            Output.print("receipt_type                 \(receipt.receiptType?.rawValue ?? "-")")
            Output.print("receipt_creation_date        \(date(receipt.receiptCreationDate))")
            Output.print("original_purchase_date       \(date(receipt.originalPurchaseDate))")
            Output.print("expiration_date              \(date(receipt.expirationDate))")
            Output.print("in_app                       \(receipt.inAppPurchases.count) purchase(s)")
            for purchase in receipt.inAppPurchases {
                var line = "  \(purchase.transactionId)  \(purchase.productId)  bought \(date(purchase.purchaseDate))"
                if let expires = purchase.expiresDate { line += "  expires \(ReceiptDate.rfc3339(expires))" }
                if let cancelled = purchase.cancellationDate { line += "  CANCELLED \(ReceiptDate.rfc3339(cancelled))" }
                if purchase.isTrialPeriod == true { line += "  trial" }
                if purchase.isInIntroOfferPeriod == true { line += "  intro" }
                Output.print(line)
            }
        }
    }
}
