// SQLite's C API from the system library (Debian's libsqlite3-dev; the SDK's on Apple platforms).
#include <sqlite3.h>
