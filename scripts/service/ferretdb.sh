# FerretDB v1 (MongoDB wire protocol over PostgreSQL), built from the Go module proxy into
# ~/.cache/fairbench/ferretdb, with the PostgreSQL handler on a PostgreSQL 15 of its own (so the
# tests' PostgreSQL stays untouched); both on loopback. Exports FAIRBENCH_TEST_FERRETDB_URL.

FERRETDB_VERSION=v1.24.2
FERRETDB_CACHE=${FAIRBENCH_FERRETDB_CACHE:-$HOME/.cache/fairbench/ferretdb}
FERRETDB_BIN=$FERRETDB_CACHE/bin/ferretdb
FERRETDB_PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

ferretdb_go() {
  if command -v go >/dev/null 2>&1; then command -v go; elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; fi
}

install_ferretdb() {
  ensure_packages postgresql-15 curl
  [ -x "$FERRETDB_BIN" ] && return 0
  local go src
  go=$(ferretdb_go)
  [ -n "$go" ] || die "FerretDB needs a Go toolchain to build; none was found"
  log "building FerretDB $FERRETDB_VERSION from the Go module proxy into $FERRETDB_CACHE"
  export GOPATH="$FERRETDB_CACHE/go" GOFLAGS=-modcacherw
  # `go install …@version` builds a binary that panics at start: the module lacks the
  # build/version/version.txt its release process generates. So build from a copy that has it.
  src=$("$go" mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || die "downloading the FerretDB $FERRETDB_VERSION module failed"
  rm -rf "$FERRETDB_CACHE/src"
  cp -r "$src" "$FERRETDB_CACHE/src"
  chmod -R u+w "$FERRETDB_CACHE/src"
  echo "$FERRETDB_VERSION" >"$FERRETDB_CACHE/src/build/version/version.txt"
  (cd "$FERRETDB_CACHE/src" && "$go" build -trimpath -buildvcs=false -o "$FERRETDB_BIN" ./cmd/ferretdb) >&2 \
    || die "building FerretDB $FERRETDB_VERSION failed"
  unset GOPATH GOFLAGS
}

start_ferretdb() {
  local state=$1 dir=$1/ferretdb pg_port port debug
  [ -x "$FERRETDB_BIN" ] || die "FerretDB is not installed (scripts/install-servers ferretdb)"
  [ -x "$FERRETDB_PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed (scripts/install-servers ferretdb)"
  pg_port=$(free_port "${FAIRBENCH_FERRETDB_PG_PORT:-55532}")
  port=$(free_port "${FAIRBENCH_FERRETDB_PORT:-47017}")
  debug=$(free_port $((port + 1)))
  mkdir -p "$dir/state"
  printf '%s\n' "$PASSWORD" >"$dir/password"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir"; fi
  as_user postgres "$FERRETDB_PG_BIN/initdb" -D "$dir/pg" --username=fairbench --pwfile="$dir/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb for FerretDB's PostgreSQL failed"; }
  as_user postgres "$FERRETDB_PG_BIN/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
    -o "-p $pg_port -c listen_addresses=127.0.0.1 -k $dir" start >/dev/null \
    || { cat "$dir/pg.log" >&2; die "FerretDB's PostgreSQL did not start"; }
  head -1 "$dir/pg/postmaster.pid" >"$state/ferretdb-postgres.pid"
  as_user postgres "$FERRETDB_PG_BIN/createdb" -h "$dir" -p "$pg_port" -U fairbench ferretdb \
    || die "creating FerretDB's database failed"
  "$FERRETDB_BIN" --handler=postgresql \
    --postgresql-url="postgres://fairbench:$PASSWORD@127.0.0.1:$pg_port/ferretdb" \
    --listen-addr="127.0.0.1:$port" --debug-addr="127.0.0.1:$debug" --state-dir="$dir/state" \
    --telemetry=disable --log-level=warn >"$dir/ferretdb.log" 2>&1 &
  echo $! >"$state/ferretdb.pid"
  wait_until FerretDB 60 "$dir/ferretdb.log" curl -sf "http://127.0.0.1:$debug/debug/readyz"
  log "FerretDB $FERRETDB_VERSION on 127.0.0.1:$port (pid $(cat "$state/ferretdb.pid"), PostgreSQL on $pg_port, data $dir/pg)"
  echo "export FAIRBENCH_TEST_FERRETDB_URL=mongodb://127.0.0.1:$port/"
}

stop_ferretdb() {
  stop_pid FerretDB "$1/ferretdb.pid"
  stop_pid "FerretDB's PostgreSQL" "$1/ferretdb-postgres.pid" INT
}
