# Sourced by scripts/test (and usable by hand): starts a PostgreSQL cluster in a temporary directory on a free
# loopback port and exports IAPKIT_POSTGRES_URL; stop_throwaway_postgres stops it and removes the directory.
# PostgreSQL refuses to run as root, so the cluster belongs to the `postgres` user when the caller is root.

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$dir" ]; then
    echo "PostgreSQL is not installed; installing Debian's package" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$dir"
}

as_pg_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_throwaway_postgres() {
  local bin port
  bin=$(pg_bin)
  IAPKIT_PG_DIR=$(mktemp -d /tmp/iapkit-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres "$IAPKIT_PG_DIR"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_pg_owner "$bin/initdb" -D "$IAPKIT_PG_DIR/data" -A trust -U postgres >/dev/null
  as_pg_owner "$bin/pg_ctl" -D "$IAPKIT_PG_DIR/data" -l "$IAPKIT_PG_DIR/log" -w \
    -o "-p $port -k $IAPKIT_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=800 ${IAPKIT_PG_OPTIONS:-}" start >/dev/null
  export IAPKIT_PG_DIR IAPKIT_PG_BIN="$bin"
  export IAPKIT_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  echo "throwaway PostgreSQL at $IAPKIT_POSTGRES_URL" >&2
}

stop_throwaway_postgres() {
  if [ -n "${IAPKIT_PG_DIR:-}" ] && [ -d "$IAPKIT_PG_DIR/data" ]; then
    as_pg_owner "$IAPKIT_PG_BIN/pg_ctl" -D "$IAPKIT_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    # Its log outlives it, for a failed run: connection limits and lock waits show there.
    cp "$IAPKIT_PG_DIR/log" "${TMPDIR:-/tmp}/iapkit-pg-last.log" 2>/dev/null || true
    rm -rf "$IAPKIT_PG_DIR"
  fi
}
