import Foundation
import Logging

/// One JSON object a line on standard error (`iap serve --log-format json`): `time` (ISO 8601, UTC), `level`, `label`,
/// `message`, and the metadata's keys. For log collectors; the text format stays the default.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        write(level: event.level, message: event.message, metadata: event.metadata)
    }

    func write(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?) {
        var object: [String: String] = [:]
        for (key, value) in metadata.merging(explicit ?? [:], uniquingKeysWith: { _, new in new }) { object[key] = "\(value)" }
        object["time"] = Date().formatted(.iso8601)
        object["level"] = level.rawValue
        object["label"] = label
        object["message"] = message.description
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        data.append(0x0A)
        FileHandle.standardError.write(data)
    }
}
