"""The machine's durable-write floor: how many write + fdatasync pairs a second this disk takes (the cost of one
SQLite WAL commit with synchronous=FULL), measured for SECONDS in DIRECTORY."""
import os, sys, tempfile, time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
directory = sys.argv[2] if len(sys.argv) > 2 else tempfile.gettempdir()
fd, path = tempfile.mkstemp(dir=directory)
try:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        os.pwrite(fd, b"x" * 4096, (count % 256) * 4096)
        os.fdatasync(fd)
        count += 1
    elapsed = time.perf_counter() - start
    print(f"fdatasync: {count / elapsed:,.0f}/s ({elapsed / count * 1e6:.0f} µs each)")
finally:
    os.close(fd)
    os.unlink(path)
