import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PurchaseAPI

/// `iap orders …`: the operator's view of lost orders, through a running server's admin API.
struct OrdersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "orders",
        abstract: "List and settle orders on a running purchase server (admin API).",
        subcommands: [List.self, Settle.self, Reconcile.self])

    struct Connection: ParsableArguments {
        @Option(help: "The purchase server's base URL.") var server: String = "http://127.0.0.1:8080"
        @Option(name: .customLong("admin-key"), help: "The server's admin key (or IAPKIT_ADMIN_KEY).") var adminKey: String?

        /// Calls the admin API; prints the JSON answer; a non-2xx answer exits 1 with the server's error.
        func call(_ method: String, _ path: String, body: [String: Any]? = nil) async throws {
            Output.print(String(decoding: try await fetch(method, path, body: body), as: UTF8.self))
        }

        /// The body of a 2xx answer; otherwise exits 1 with the refusal's status, code and message on stderr.
        func fetch(_ method: String, _ path: String, body: [String: Any]? = nil) async throws -> Data {
            guard let key = adminKey ?? ProcessInfo.processInfo.environment["IAPKIT_ADMIN_KEY"] else {
                throw ValidationError("--admin-key (or IAPKIT_ADMIN_KEY) is required")
            }
            guard let url = URL(string: server + path) else { throw ValidationError("not a URL: \(server)") }
            var request = URLRequest(url: url)
            request.httpMethod = method
            request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
            if let body { request.httpBody = try JSONSerialization.data(withJSONObject: body) }
            let data: Data, response: URLResponse
            do {
                (data, response) = try await URLSession.shared.data(for: request)
            } catch {
                Output.note("error: no answer from \(server): \(error.localizedDescription)")
                throw ExitCode(1)
            }
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard (200..<300).contains(status) else {
                if let refusal = try? APIJSON.decoder().decode(ErrorBody.self, from: data) {
                    Output.note("error: HTTP \(status) \(refusal.error.code.rawValue): \(refusal.error.message)")
                } else {
                    // Not the API's error body (a proxy's page, an older server): shown as it came.
                    Output.note("error: HTTP \(status): \(String(decoding: data, as: UTF8.self))")
                }
                throw ExitCode(1)
            }
            return data
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Orders in a state: paid-unfulfilled (default), stuck, abandoned, created, granted, settled.")
        @OptionGroup var connection: Connection
        @Option(help: "The state.") var state: String = "paid-unfulfilled"
        @Flag(help: "Print the server's JSON answer instead of a table.") var json = false
        func run() async throws {
            let data = try await connection.fetch("GET", "/admin/orders?state=\(state.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-"])) ?? state)")
            guard !json else { return Output.print(String(decoding: data, as: UTF8.self)) }
            let orders = try APIJSON.decoder().decode(AdminOrdersReply.self, from: data).orders
            guard !orders.isEmpty else { return Output.print("no orders \(state)") }
            // The abandoned column only where an order was: most states never have one.
            let abandoned = orders.contains { $0.abandonedAt != nil }
            var table = TextTable(header: ["order", "account", "product", "state", "transaction", "created (UTC)"] + (abandoned ? ["abandoned (UTC)"] : []))
            for order in orders {
                table.rows.append([order.orderId, order.accountId, order.productId, order.state, order.transactionId ?? "-", TextTable.minute(order.createdAt)]
                                  + (abandoned ? [order.abandonedAt.map { "\(TextTable.minute($0)) \(order.abandonReason ?? "")" } ?? ""] : []))
            }
            Output.print(table.lines.joined(separator: "\n"))
        }
    }

    struct Settle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Settle an order: grant a transaction to it, or close it with a note.")
        @OptionGroup var connection: Connection
        @Argument(help: "The order id.") var orderId: String
        @Option(name: .customLong("transaction-id"), help: "Grant this transaction (looked up with the Server API).") var transactionId: String?
        @Option(help: "Why (kept in the audit log).") var note: String
        func run() async throws {
            var body: [String: Any] = ["note": note]
            if let transactionId { body["transactionId"] = transactionId }
            try await connection.call("POST", "/admin/orders/\(orderId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-"])) ?? orderId)/settle", body: body)
        }
    }

    struct Reconcile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the reconciliation job now.")
        @OptionGroup var connection: Connection
        func run() async throws { try await connection.call("POST", "/admin/reconcile") }
    }
}

/// `iap webhooks list|replay|test`: the outbox of events for the app's backend, on a running purchase server.
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "List, replay and test outgoing webhooks on a running purchase server (admin API).",
        subcommands: [List.self, Replay.self, Test.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Events, newest first: all, or pending, delivered or failed.")
        @OptionGroup var connection: OrdersCommand.Connection
        @Option(help: "pending, delivered or failed.") var state: String?
        func run() async throws {
            let query = state.map { "?state=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)" } ?? ""
            try await connection.call("GET", "/admin/webhooks" + query)
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send an event again from its first attempt.")
        @OptionGroup var connection: OrdersCommand.Connection
        @Argument(help: "The event id.") var eventId: String
        func run() async throws {
            try await connection.call("POST", "/admin/webhooks/\(eventId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-", "_", "."])) ?? eventId)/replay")
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Queue a TEST event for the backend.")
        @OptionGroup var connection: OrdersCommand.Connection
        func run() async throws { try await connection.call("POST", "/admin/webhooks/test") }
    }
}
