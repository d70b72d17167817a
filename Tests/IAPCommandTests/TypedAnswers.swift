import Foundation
import PurchaseAPI

/// Answers read as the types they are: the purchase server's as the contract's (`PurchaseAPI`), the simulator's device
/// endpoints and the `iap` commands' output as the small types below.
extension Data {
    /// The body as `T`, with the API's conventions (dates in milliseconds since 1970).
    func decoded<T: Decodable>(as type: T.Type) throws -> T {
        try APIJSON.decoder().decode(T.self, from: self)
    }

    /// The body as text, for a failure's message.
    var utf8Text: String { String(decoding: self, as: UTF8.self) }
}

extension String {
    /// The text (an answer's body, a command's output) as `T`.
    func decoded<T: Decodable>(as type: T.Type) throws -> T {
        try Data(utf8).decoded(as: T.self)
    }
}

/// The line `iap app` prints: what happened and what the account owns (`AppCommand.report`).
struct AppLine: Decodable, CustomStringConvertible {
    var outcome: String?
    var balances: [String: Int64]?
    var entitlements: [String]?
    /// Paid transactions still in the device's journal, as `transactionId:accountId`.
    var journaled: [String]?
    /// A failure's message.
    var message: String?
    /// Not printed by the app: the test adds the tail of its stderr when it failed.
    var stderr: String?
    /// The line as printed.
    var text = ""

    private enum CodingKeys: String, CodingKey { case outcome, balances, entitlements, journaled, message }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decodeIfPresent(String.self, forKey: .outcome)
        balances = try container.decodeIfPresent([String: Int64].self, forKey: .balances)
        entitlements = try container.decodeIfPresent([String].self, forKey: .entitlements)
        journaled = try container.decodeIfPresent([String].self, forKey: .journaled)
        message = try container.decodeIfPresent(String.self, forKey: .message)
    }

    var description: String { text + (stderr.map { " stderr: \($0)" } ?? "") }
}

/// The simulator's state file (`sim/state.json`), as far as the tests read it: every transaction it minted.
struct SimulatorState: Decodable {
    struct Minted: Decodable {
        struct Payload: Decodable {
            var transactionId: String?
            var productId: String?
            var appAccountToken: String?
        }

        var payload: Payload
        /// The simulator's account (the Apple ID) it was charged to.
        var account: String
        /// Devices that have not finished it yet.
        var unfinishedOn: [String]?
    }

    var transactions: [String: Minted]
}

/// A line of `--log-format json`: any JSON object; the request log's fields (strings) read where they are strings.
struct LogLine: Decodable {
    var message: String?
    var requestId: String?
    var path: String?
    var status: String?
    var method: String?
    var error: String?

    private enum CodingKeys: String, CodingKey { case message, requestId, path, status, method, error }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func text(_ key: CodingKeys) -> String? { (try? container.decodeIfPresent(String.self, forKey: key)) ?? nil }
        (message, requestId, path) = (text(.message), text(.requestId), text(.path))
        (status, method, error) = (text(.status), text(.method), text(.error))
    }
}
