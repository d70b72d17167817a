import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore

/// An app backend receiving IAPKit's webhooks in tests: checks each request's signature with the shared secret, and
/// answers 200 — or, while `failing`, 503 — keeping every delivery it saw.
public actor WebhookReceiver {
    public struct Delivery: Sendable {
        public var eventId: String
        public var type: String
        public var body: [String: String]
        public var signatureValid: Bool
        public var accepted: Bool
    }

    public let secret: String
    public private(set) var deliveries: [Delivery] = []
    public var failing = false

    public init(secret: String) { self.secret = secret }

    public func setFailing(_ failing: Bool) { self.failing = failing }

    /// Deliveries answered 200, by event id.
    public var accepted: [Delivery] { deliveries.filter(\.accepted) }

    func receive(eventId: String, type: String, signature: String, body: String) -> Bool {
        // t=<unix>,v1=<hex hmac of "<t>.<body>">
        var parts: [String: String] = [:]
        for item in signature.split(separator: ",") {
            let pair = item.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parts[String(pair[0])] = String(pair[1]) }
        }
        var valid = false
        if let t = parts["t"], let v1 = parts["v1"] {
            let mac = HMAC<SHA256>.authenticationCode(for: Array("\(t).\(body)".utf8), using: SymmetricKey(data: Array(secret.utf8)))
            valid = mac.map { String(format: "%02x", $0) }.joined() == v1
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        let accepted = !failing
        deliveries.append(Delivery(eventId: eventId, type: type, body: object.mapValues { "\($0)" }, signatureValid: valid, accepted: accepted))
        return accepted
    }

    /// Serves on a loopback port while `body` runs; `body` gets the URL to configure.
    public func serve(_ body: @Sendable (String) async throws -> Void) async throws {
        let router = Router()
        router.post("hooks") { request, _ in
            let buffer = try await request.body.collect(upTo: 1 << 20)
            let ok = await self.receive(eventId: request.headers[HTTPField.Name("IAPKit-Event-Id")!] ?? "", type: request.headers[HTTPField.Name("IAPKit-Event-Type")!] ?? "",
                                        signature: request.headers[HTTPField.Name("IAPKit-Signature")!] ?? "", body: String(buffer: buffer))
            return Response(status: ok ? .ok : .serviceUnavailable)
        }
        try await Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0))).test(.live) { client in
            try await body("http://127.0.0.1:\(client.port!)/hooks")
        }
    }
}
