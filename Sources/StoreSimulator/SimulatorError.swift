/// Why the simulator refused something of its own (configuration, catalog, storage).
/// Errors about Apple's formats are `AppStoreError`s.
public enum SimulatorError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The catalog is invalid: duplicate ids, a deleted id re-created, an unreadable file.
    case catalog(String)
    /// The data directory cannot be read or written.
    case storage(String)

    public var description: String {
        switch self {
        case .catalog(let message): "catalog: \(message)"
        case .storage(let message): "storage: \(message)"
        }
    }
}
