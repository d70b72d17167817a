import ArgumentParser
import Foundation
import IAPKit
import PurchaseServer

/// `iap app …`: the app side as a process — PurchaseClient over the simulator and a purchase server — for trying
/// the flow by hand and for crash tests (`--crash-at` kills the process at a point of the flow, with no clean-up).
struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Act as the app: buy, resume (a launch), or restore, through PurchaseClient against the simulator and a server.",
        subcommands: [Buy.self, Resume.self, Restore.self])

    struct Options: ParsableArguments {
        @Option(help: "The simulator's base URL.") var simulator: String = "http://127.0.0.1:8090"
        @Option(help: "The purchase server's base URL.") var server: String = "http://127.0.0.1:8080"
        @Option(help: "The server's HS256 secret for app tokens.") var secret: String
        @Option(help: "The app's account id (the token's sub).") var account: String
        @Option(name: .customLong("store-account"), help: "The simulator account paying.") var storeAccount: String
        @Option(help: "The device.") var device: String = "phone"
        @Option(help: "The journal directory.") var journal: String
        @Option(name: .customLong("entitlements-key"), help: "A PEM file with the server's entitlements key (GET /v1/keys/entitlements): believe only signed answers.")
        var entitlementsKey: String?
        @Option(name: .customLong("crash-at"), help: "Exit at once (code 137) at this point: \(PurchaseClient.Checkpoint.allCases.map(\.rawValue).joined(separator: ", ")).")
        var crashAt: String?

        func client() async throws -> (PurchaseClient, SimulatorStore) {
            guard let simulatorURL = URL(string: simulator), let serverURL = URL(string: server) else { throw ValidationError("not a URL") }
            let store = SimulatorStore(baseURL: simulatorURL, account: storeAccount, device: device, pollInterval: .milliseconds(100))
            let (secret, account) = (secret, account)
            var verifier: EntitlementsVerifier?
            if let entitlementsKey {
                guard let pem = try? String(contentsOfFile: entitlementsKey, encoding: .utf8) else { throw ValidationError("cannot read \(entitlementsKey)") }
                verifier = try EntitlementsVerifier(publicKeyPEM: pem)
            }
            let server = PurchaseServerClient(baseURL: serverURL, timeout: 10, verifier: verifier) {
                try await AccountAuthenticator.issueToken(account: account, secret: secret)
            }
            // The journal belongs to the device, not the account: several accounts signing in on one device share it,
            // and each entry says which account ordered it.
            let client = PurchaseClient(store: store, server: server, journal: try FileJournal(directory: URL(fileURLWithPath: journal)),
                                        accountId: account, retryDelays: [.milliseconds(200)])
            if let crashAt {
                guard let point = PurchaseClient.Checkpoint(rawValue: crashAt) else { throw ValidationError("unknown --crash-at \(crashAt)") }
                await client.setCheckpointObserver { reached in if reached == point { Output.note("crashing at \(reached.rawValue)"); _exit(137) } }
            }
            return (client, store)
        }
    }

    /// Prints one JSON line: what happened and what the account owns.
    static func report(_ outcome: String, _ entitlements: Entitlements?, journaled: [JournalEntry]? = nil, message: String? = nil) throws {
        struct Line: Encodable {
            var outcome: String; var balances: [String: Int64]?; var entitlements: [String]?
            /// Paid transactions still in the device's journal, as `transactionId:accountId`.
            var journaled: [String]?
            /// A failure's message, as the app would show it (the code alone told a newcomer "store_unavailable" for an
            /// Apple ID the simulator does not have).
            var message: String?
        }
        let waiting = journaled?.filter { $0.kind == .paid }.map { "\($0.transactionId ?? ""):\($0.accountId ?? "")" }
        let data = try JSONEncoder().encode(Line(outcome: outcome, balances: entitlements?.balances, entitlements: entitlements?.entitlements.map(\.name),
                                                 journaled: waiting, message: message))
        Output.print(String(decoding: data, as: UTF8.self))
    }

    struct Buy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Buy a product the way an app does.")
        @OptionGroup var options: Options
        @Option(help: "The product id.") var product: String
        @Option(help: "How the store ends the payment: userCancelled, failed, deferred, interrupted.") var outcome: String?

        func run() async throws {
            let (client, store) = try await options.client()
            if let outcome { await store.setNextOutcome(outcome) }
            let result = await client.purchase(product)
            // A cancel's report to the server goes on its own: this process must not exit before it is sent.
            await client.orderEndReportsSent()
            switch result {
            case .granted(let owned): try AppCommand.report("granted", owned)
            case .paidPendingDelivery: try AppCommand.report("paidPendingDelivery", nil)
            case .paidDeliveryDelayed: try AppCommand.report("paidDeliveryDelayed", nil)
            case .paidNotJournaled: try AppCommand.report("paidNotJournaled", nil)
            case .deliveredToOwner: try AppCommand.report("deliveredToOwner", nil)
            case .pendingApproval: try AppCommand.report("pendingApproval", nil)
            case .cancelled: try AppCommand.report("cancelled", nil)
            case .failed(let failure): try AppCommand.report("failed:\(failure.code.rawValue)", nil, message: failure.message)
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Launch: resume unfinished work, then print the entitlements.")
        @OptionGroup var options: Options

        func run() async throws {
            let (client, _) = try await options.client()
            let resumed = await client.start()
            await client.stop()
            try AppCommand.report("resumed:\(resumed)", try? await client.entitlements(),
                                  journaled: try? FileJournal(directory: URL(fileURLWithPath: options.journal)).entries())
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Restore purchases.")
        @OptionGroup var options: Options

        func run() async throws {
            let (client, _) = try await options.client()
            try AppCommand.report("restored", try await client.restore())
        }
    }
}
