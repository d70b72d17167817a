import PurchaseLedger
import ServiceLifecycle

/// The ledger's store for the length of a service group: once the group shuts down it closes the store — SQLite's
/// writer commits what is queued and closes the file, PostgreSQL's client closes its connections. First among
/// ``PurchaseServices/backgroundServices(reconcileEvery:logger:)`` when ``PurchaseServices/closesStoreOnShutdown`` is
/// set, it stops last: after the HTTP server has answered its last request and the other services have ended (a group
/// stops its services in reverse order).
///
/// The store is opened before the group runs, not by it: migrations and the catalog check run before the server
/// starts (``PurchaseServices/open(_:roots:)``), so its PostgreSQL client runs from the store's opening.
public struct LedgerStoreService: Service {
    let store: any LedgerStore

    public init(store: any LedgerStore) { self.store = store }

    public func run() async throws {
        // A graceful shutdown or a cancellation: either way the group is ending.
        try? await gracefulShutdown()
        try await store.close()
    }
}
