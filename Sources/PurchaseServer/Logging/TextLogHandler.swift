import Logging

/// swift-log's `StreamLogHandler` on standard error, the same lines, but metadata is rendered when a line is written
/// rather than each time a key is set. Hummingbird and the request log set a request id on every request's logger, and
/// at `warning` under load almost none of those loggers write a line: rendering on every set was ~5 % of a health
/// check's CPU (BENCHMARKS.md).
public struct TextLogHandler: LogHandler {
    private var stream: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    public init(label: String) { stream = StreamLogHandler.standardError(label: label) }

    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var stream = stream
        stream.metadata = metadata
        stream.log(event: event)
    }
}
