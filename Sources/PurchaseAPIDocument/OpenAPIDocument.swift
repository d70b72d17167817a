import Foundation
import PurchaseAPI

/// The purchase server's OpenAPI 3.1 document, generated from the contract: the operations of ``APIEndpoint/all`` and
/// the JSON Schemas of their bodies, read from the types themselves (``SchemaReflector``). `iap openapi` writes it to
/// `Sources/PurchaseServer/Resources/openapi.json`, which the server serves at `GET /openapi.json` (docs/API.md).
public struct OpenAPIDocument {
    public let root: JSONValue
    /// Each of `components/schemas` and the contract type it was read from.
    public let schemaTypes: [String: any Decodable.Type]

    public init(endpoints: [APIEndpoint] = APIEndpoint.all) throws {
        let reflector = SchemaReflector()
        var paths: [String: [String: JSONValue]] = [:]
        var responses: [String: JSONValue] = [:]
        for endpoint in endpoints {
            let method = endpoint.method.rawValue
            guard paths[endpoint.path]?[method] == nil else {
                throw SchemaReflector.Failure(description: "\(endpoint.method.rawValue.uppercased()) \(endpoint.path) is listed twice")
            }
            paths[endpoint.path, default: [:]][method] = try Self.operation(endpoint, reflector: reflector, responses: &responses)
        }
        root = [
            "openapi": "3.1.0",
            "info": [
                "title": "IAPKit purchase server",
                "version": "1",
                "description": .string(
                    "The app API (a bearer JWT from the app's own sign-in), Apple's endpoints (signed by Apple), and the admin API (the admin "
                        + "key as a bearer token). Errors answer `{\"error\": {\"code\", \"message\", \"class\"}}`; dates are milliseconds since "
                        + "1970. Generated from the PurchaseAPI module's types by `iap openapi` (docs/API.md): do not edit it by hand."),
            ],
            "paths": .object(paths.mapValues { .object($0) }),
            "components": [
                "schemas": .object(reflector.components),
                "responses": .object(responses),
                "securitySchemes": [
                    APIEndpoint.Credential.accountToken.rawValue: ["type": "http", "scheme": "bearer", "bearerFormat": "JWT"],
                    APIEndpoint.Credential.adminKey.rawValue: ["type": "http", "scheme": "bearer"],
                    APIEndpoint.Credential.metricsKey.rawValue: ["type": "http", "scheme": "bearer"],
                ],
            ],
        ]
        schemaTypes = reflector.types
    }

    /// The bytes `GET /openapi.json` answers and the repository keeps: the same for the same contract, on every platform.
    public var json: Data { Data((root.serialized() + "\n").utf8) }

    private static func operation(_ endpoint: APIEndpoint, reflector: SchemaReflector, responses: inout [String: JSONValue]) throws -> JSONValue {
        var operation: [String: JSONValue] = [
            "summary": .string(endpoint.summary),
            "tags": [.string(endpoint.tag.rawValue)],
            // Written out when empty too: an open operation says so rather than inheriting a default.
            "security": .array(endpoint.credentials.map { [$0.rawValue: []] }),
        ]
        let parameters: [JSONValue] = endpoint.pathParameters.map { name in
            ["name": .string(name), "in": "path", "required": true, "schema": ["type": "string", "minLength": 1, "maxLength": 200]]
        } + endpoint.query.map { parameter in
            ["name": .string(parameter.name), "in": "query", "required": false, "schema": schema(of: parameter.value)]
        }
        if !parameters.isEmpty { operation["parameters"] = .array(parameters) }
        if let request = endpoint.request {
            operation["requestBody"] = ["required": true, "content": ["application/json": ["schema": try reflector.schema(of: request)]]]
        }
        var answers: [String: JSONValue] = [:]
        for reply in endpoint.replies {
            let status = reply.status.map(String.init) ?? "default"
            let answer = try response(reply, reflector: reflector)
            if let shared = reply.shared {
                if let known = responses[shared], known != answer {
                    throw SchemaReflector.Failure(description: "two different answers are shared as \(shared)")
                }
                responses[shared] = answer
                answers[status] = ["$ref": .string("#/components/responses/\(shared)")]
            } else {
                answers[status] = answer
            }
        }
        operation["responses"] = .object(answers)
        return .object(operation)
    }

    private static func response(_ reply: APIEndpoint.Reply, reflector: SchemaReflector) throws -> JSONValue {
        let content: JSONValue = switch reply.body {
        case .json(let type): ["application/json": ["schema": try reflector.schema(of: type)]]
        case .anyJSONObject: ["application/json": ["schema": ["type": "object"]]]
        case .jsonOrCSV(let type): ["application/json": ["schema": try reflector.schema(of: type)], "text/csv": ["schema": ["type": "string"]]]
        case .text(let mediaType): [mediaType: ["schema": ["type": "string"]]]
        }
        var answer: [String: JSONValue] = ["description": .string(reply.description), "content": content]
        if reply.retryAfter {
            answer["headers"] = ["Retry-After": ["description": "seconds to wait", "schema": ["type": "integer", "minimum": 1]]]
        }
        return .object(answer)
    }

    private static func schema(of value: APIEndpoint.QueryParameter.Value) -> JSONValue {
        switch value {
        case .string: ["type": "string"]
        case .boolean: ["type": "boolean"]
        case .integer(let range): ["type": "integer", "minimum": .integer(range.lowerBound), "maximum": .integer(range.upperBound)]
        case .oneOf(let words): ["type": "string", "enum": .array(words.map(JSONValue.string))]
        }
    }
}
