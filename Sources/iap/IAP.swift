import ArgumentParser

/// `iap`: IAPKit's command-line tool.
@main
struct IAP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap",
        abstract: "IAPKit: verify what the App Store signs, and simulate the App Store.",
        subcommands: [ReceiptCommand.self, JWSCommand.self, SimulatorCommand.self]
    )
}
