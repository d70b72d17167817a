// SQLite's C API from the system library (Debian's libsqlite3-dev; the SDK's on Apple platforms).
#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call: the one setting the ledger changes, as a plain function.
// How large a statement (savepoint) journal grows in memory before SQLite spills it to a temporary file. Process-wide,
// and only before SQLite's first use: SQLITE_MISUSE after it.
static inline int iapkit_sqlite_statement_journal_spill(int bytes) {
    return sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, bytes);
}
