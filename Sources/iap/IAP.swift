import ArgumentParser

/// `iap`: IAPKit's command-line tool.
@main
struct IAP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap",
        abstract: "IAPKit: the purchase server, the simulated App Store, and tools to verify what the App Store signs.",
        subcommands: [DemoCommand.self, ServeCommand.self, DevCommand.self, SimulatorCommand.self, ReceiptCommand.self, JWSCommand.self, MintCommand.self, AppCommand.self, OrdersCommand.self, WebhooksCommand.self, MetricsCommand.self, OpenAPICommand.self]
    )
}
