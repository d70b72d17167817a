import Foundation

/// What makes a configuration file's mistakes plain, and what `iap serve --print-config` shows.
extension ServerConfiguration {
    /// Decodes a configuration file, refusing a key this server does not know (a typo would otherwise be a setting
    /// silently left at its default) and naming the key of a value of the wrong type.
    public static func decode(_ data: Data, file: String) throws -> ServerConfiguration {
        let configuration: ServerConfiguration
        do {
            configuration = try JSONDecoder().decode(ServerConfiguration.self, from: data)
        } catch let error as DecodingError {
            throw ConfigurationError("configuration file \(file): \(describe(error))")
        } catch {
            throw ConfigurationError("configuration file \(file) is not JSON: \(error)")
        }
        let given = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        let understood = try? JSONSerialization.jsonObject(with: JSONEncoder().encode(configuration))
        let unknown = unknownKeys(given, understood, path: "")
        if !unknown.isEmpty {
            throw ConfigurationError("configuration file \(file): unknown key\(unknown.count > 1 ? "s" : "") \(unknown.joined(separator: ", ")) "
                                     + "(docs/CONFIGURATION.md lists every key)")
        }
        return configuration
    }

    /// The key paths given (with a value) that the decoded configuration does not hold: keys nothing read.
    static func unknownKeys(_ given: Any?, _ understood: Any?, path: String) -> [String] {
        if let object = given as? [String: Any] {
            let known = understood as? [String: Any] ?? [:]
            return object.keys.sorted().flatMap { key -> [String] in
                let value = object[key]!
                if value is NSNull { return [] }
                let child = path.isEmpty ? key : "\(path).\(key)"
                guard let counterpart = known[key] else { return [child] }
                return unknownKeys(value, counterpart, path: child)
            }
        }
        if let array = given as? [Any], let known = understood as? [Any] {
            return array.indices.flatMap { index in
                index < known.count ? unknownKeys(array[index], known[index], path: "\(path)[\(index)]") : []
            }
        }
        return []
    }

    static func describe(_ error: DecodingError) -> String {
        func name(_ path: [any CodingKey]) -> String {
            path.reduce("") { text, key in
                if let index = key.intValue { return text + "[\(index)]" }
                return text.isEmpty ? key.stringValue : text + "." + key.stringValue
            }
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "key \(name(context.codingPath)) must be \(typeName(type))"
        case .valueNotFound(let type, let context):
            return "key \(name(context.codingPath)) must be \(typeName(type)), not null"
        case .keyNotFound(let key, let context):
            return "key \(name(context.codingPath + [key])) is required"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "key \(name(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: String(describing: type).contains("Dictionary") ? "an object" : "\(type)"
        }
    }

    /// The configuration in effect as JSON, every secret replaced by `"<set>"` and any password in a URL by `***`.
    public func printable() throws -> String {
        var shown = self
        func masked(_ value: String?) -> String? { value.map { $0.isEmpty ? "" : "<set>" } }
        shown.adminKey = masked(adminKey)
        shown.metricsKey = masked(metricsKey)
        shown.auth.hs256Secret = masked(auth.hs256Secret)
        shown.appStore.sharedSecret = masked(appStore.sharedSecret)
        shown.webhooks?.secret = masked(webhooks?.secret) ?? ""
        shown.webhooks?.url = Self.withoutPassword(webhooks?.url ?? "")
        shown.database = Self.withoutPassword(databaseURL)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(shown), as: UTF8.self)
    }

    static func withoutPassword(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? url
    }
}
