import NIOCore
import NIOPosix

// `iap serve` runs Swift Concurrency's jobs on the server's own event loops (NIO's singleton group, which Hummingbird
// and PostgresNIO already use), so a request no longer hops from an event loop to Concurrency's pool and back at each
// step. Measured (BENCHMARKS.md, 2026-11-25): server CPU per purchase 7–14 % lower on SQLite, 19 % on PostgreSQL.
// Nothing the server runs blocks an event loop on NIO's `wait()`: the PostgreSQL workers and the SQLite writer wait
// on threads of their own. Other commands keep Swift's default executor.
if CommandLine.arguments.dropFirst().first == "serve" {
    NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
}

/// In an async function the command's async `main` is chosen, not ParsableCommand's synchronous one.
func runCommand() async {
    await IAP.main()
}
await runCommand()
