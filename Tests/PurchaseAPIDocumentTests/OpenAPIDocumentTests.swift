import Foundation
import PurchaseAPI
import PurchaseAPIDocument
import Testing

@Suite("The OpenAPI document: generated from the contract's types, kept as the server's resource, each schema its type's")
struct OpenAPIDocumentTests {
    static let regenerate = "swift run iap openapi --output Sources/PurchaseServer/Resources/openapi.json"
    static let resource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/PurchaseServer/Resources/openapi.json")

    @Test("The committed resource is the generator's output byte for byte, and generating again gives the same bytes")
    func committed() throws {
        let generated = try OpenAPIDocument().json
        #expect(try OpenAPIDocument().json == generated, "the document must not depend on dictionary order")
        let kept = try Data(contentsOf: Self.resource)
        #expect(kept == generated, "Sources/PurchaseServer/Resources/openapi.json is not what the contract's types generate: run `\(Self.regenerate)`")
    }

    @Test("The table: every path the server answers, 201 for an order, 202 and 429 on purchases, 429 on restore, a refusal on every operation")
    func table() throws {
        let paths = try #require(try OpenAPIDocument().root["paths"]?.objectValue)
        #expect(paths.count == 32 && paths.values.reduce(0) { $0 + ($1.objectValue?.count ?? 0) } == 33)
        for (path, operations) in paths {
            for (method, operation) in operations.objectValue ?? [:] {
                #expect(operation["responses"]?["default"] == ["$ref": "#/components/responses/Refusal"], "\(method) \(path)")
                let declared = Set(path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) })
                let parameters = Set((operation["parameters"]?.arrayValue ?? []).filter { $0["in"] == "path" }.compactMap { $0["name"]?.stringValue })
                #expect(declared == parameters, "\(method) \(path)'s path parameters")
            }
        }
        #expect(Self.keys(paths["/v1/orders"]?["post"]?["responses"]) == ["201", "default"])
        #expect(Self.keys(paths["/v1/purchases"]?["post"]?["responses"]) == ["200", "202", "429", "default"])
        #expect(paths["/v1/restore"]?["post"]?["responses"]?["429"] == ["$ref": "#/components/responses/RateLimited"])
        #expect(paths["/metrics"]?["get"]?["security"] == [["metricsKey": []], ["adminKey": []]])
        #expect(paths["/v1/keys/entitlements"]?["get"]?["responses"]?["200"]?["content"]?["application/x-pem-file"] != nil)
        // The business view answers JSON, or CSV when asked.
        for metrics in ["/admin/metrics/overview", "/admin/metrics/series", "/admin/metrics/cohorts"] {
            #expect(Self.keys(paths[metrics]?["get"]?["responses"]?["200"]?["content"]) == ["application/json", "text/csv"], "\(metrics)")
        }
        #expect(paths["/health"]?["get"]?["responses"]?["200"]?["content"]?["application/json"]?["schema"] == ["$ref": "#/components/schemas/HealthReply"])
    }

    static func keys(_ object: JSONValue?) -> Set<String> { Set(object?.objectValue?.keys.map { $0 } ?? []) }

    @Test("Schemas as the types read: decode is required, decodeIfPresent optional unless always sent; dates, UUIDs, dictionaries, closed and open enums; a flattened body")
    func schemas() throws {
        let schemas = try #require(try OpenAPIDocument().root["components"]?["schemas"])
        func required(_ name: String) -> Set<String> { Set(schemas[name]?["required"]?.arrayValue?.compactMap(\.stringValue) ?? []) }
        func property(_ name: String, _ key: String) -> JSONValue? { schemas[name]?["properties"]?[key] }

        #expect(required("Entitlements.Item") == ["name", "productId", "transactionId", "state", "environment"])
        #expect(property("Entitlements.Item", "appAccountToken") == ["type": "string", "format": "uuid"])
        #expect(property("Entitlements.Item", "expiresAt") == ["type": "integer", "description": "milliseconds since 1970"])
        #expect(property("Entitlements.Item", "state") == ["type": "string"], "open: a newer server's state is kept")
        #expect(property("Entitlements", "balances") == ["type": "object", "additionalProperties": ["type": "integer"]])
        #expect(property("Entitlements", "entitlements") == ["type": "array", "items": ["$ref": "#/components/schemas/Entitlements.Item"]])
        #expect(required("Entitlements") == ["accountId", "entitlements", "balances"])
        // Decoded leniently for old servers, always sent by this one.
        #expect(required("PurchaseReply") == ["transactions", "refused", "entitlements"])
        #expect(property("PurchaseReply", "outcome") == ["type": "string"], "open: an outcome a newer server adds is read as itself")
        #expect(required("PurchaseReply.Refused") == ["transactionId", "code", "message", "class"], "class read leniently, always sent")
        #expect(required("OfferSignReply") == ["kind", "productId"], "kind read leniently, always sent")
        #expect(required("ErrorBody.Detail") == ["code", "message", "class"])
        #expect(property("ErrorBody.Detail", "class") == ["type": "string", "enum": ["final", "operator", "retry"]])
        #expect(property("ErrorBody.Detail", "code") == ["type": "string"])
        // EntitlementsReply flattens Entitlements beside signedEntitlements.
        #expect(Self.keys(schemas["EntitlementsReply"]?["properties"]) == ["accountId", "entitlements", "balances", "cachedAt", "signedEntitlements"])
        #expect(required("EntitlementsReply") == ["accountId", "entitlements", "balances"])
        #expect(property("RestoreRequest", "signedTransactions") == ["type": "array", "items": ["type": "string"]])
        #expect(required("ReconcileReport").count == 7 && !required("ReconcileReport").contains("notificationHistoryStalled"))
    }

    @Test("Every schema of the document decodes into its contract type and back: every property present, or only the required ones; a required one missing does not decode")
    func roundTrip() throws {
        let document = try OpenAPIDocument()
        let schemas = try #require(document.root["components"]?["schemas"]?.objectValue)
        #expect(Set(schemas.keys) == Set(document.schemaTypes.keys))
        #expect(schemas.count > 40, "the app's and the admin's bodies and what they hold")
        let instances = Instances(schemas: schemas)
        for name in schemas.keys.sorted() {
            let comparable = document.schemaTypes[name] as? any (Codable & Equatable).Type
            let type = try #require(comparable, "\(name) is a contract type that compares")
            let hints = (type as? any APISchemaHints.Type)?.alwaysSent ?? []
            for full in [true, false] {
                let instance = try instances.make(["$ref": .string("#/components/schemas/\(name)")], full: full)
                try Self.roundTrip(type, instance, "\(name) (\(full ? "every property" : "required only"))")
            }
            let full = try instances.make(["$ref": .string("#/components/schemas/\(name)")], full: true)
            for key in (schemas[name]?["required"]?.arrayValue ?? []).compactMap(\.stringValue) where !hints.contains(key) {
                var lacking = full.objectValue ?? [:]
                lacking[key] = nil
                #expect(throws: (any Error).self, "\(name) without \(key) must not decode: the schema says it is required") {
                    _ = try APIJSON.decoder().decode(type, from: Data(JSONValue.object(lacking).serialized().utf8))
                }
            }
        }
    }

    static func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ instance: JSONValue, _ what: String) throws {
        let decoded = try APIJSON.decoder().decode(T.self, from: Data(instance.serialized().utf8))
        let encoded = try APIJSON.encoder().encode(decoded)
        #expect(try APIJSON.decoder().decode(T.self, from: encoded) == decoded, "\(what): decoded, encoded, decoded again")
        #expect(try JSONDecoder().decode(JSONValue.self, from: encoded) == instance, "\(what): encodes back to what was decoded")
    }

    @Test("A String enum that is not CaseIterable, or an operation listed twice, stops the generator with what to fix")
    func refusals() throws {
        enum Kind: String, Codable, Hashable, Sendable { case one, two }
        struct Body: Codable, Hashable, Sendable { var kind: Kind }
        let endpoint = APIEndpoint(.post, "/x", "x", tag: .app, credentials: [], request: Body.self, replies: [])
        let unlisted = #expect(throws: (any Error).self) { try OpenAPIDocument(endpoints: [endpoint]) }
        #expect(unlisted.map { "\($0)" }?.contains("CaseIterable") == true)
        let health = APIEndpoint(.get, "/health", "x", tag: .ops, credentials: [], replies: [.ok(HealthReply.self)])
        let twice = #expect(throws: (any Error).self) { try OpenAPIDocument(endpoints: [health, health]) }
        #expect(twice.map { "\($0)" }?.contains("listed twice") == true)
    }
}

/// A JSON instance of a schema: a value of each property's type (the last of an enumeration's).
struct Instances {
    let schemas: [String: JSONValue]
    /// Its digits read the same in either case: the SDK's types write UUIDs upper case, the server's lower.
    static let uuid = "00000000-0000-4000-8000-000000000001"

    func make(_ schema: JSONValue, full: Bool) throws -> JSONValue {
        if let reference = schema["$ref"]?.stringValue {
            let name = String(reference.dropFirst("#/components/schemas/".count))
            return try make(try #require(schemas[name], "\(reference)"), full: full)
        }
        if let words = schema["enum"]?.arrayValue { return try #require(words.last) }
        switch schema["type"]?.stringValue {
        case "string": return schema["format"] == "uuid" ? .string(Self.uuid) : "text"
        // Milliseconds since 1970 that a Date holds exactly.
        case "integer": return 1_700_000_000_000
        case "boolean": return true
        case "array": return [try make(try #require(schema["items"]), full: full)]
        case "object":
            if let additional = schema["additionalProperties"] { return ["coins": try make(additional, full: full)] }
            let required = Set(schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            let properties = (schema["properties"]?.objectValue ?? [:]).filter { full || required.contains($0.key) }
            return .object(try properties.mapValues { try make($0, full: full) })
        default:
            Issue.record("no instance for \(schema.serialized())")
            return .null
        }
    }
}
