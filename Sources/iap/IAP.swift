import ArgumentParser

/// `iap`: IAPKit's command-line tool.
@main
struct IAP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap",
        abstract: "IAPKit: verify and decode what the App Store signs.",
        subcommands: [ReceiptCommand.self, JWSCommand.self]
    )
}
