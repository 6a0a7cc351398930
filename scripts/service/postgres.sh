# PostgreSQL 15 from Debian, on loopback, with scram passwords over TCP.
# Exports FAIRBENCH_TEST_POSTGRES_URL.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

install_postgres() {
  ensure_packages postgresql-15 postgresql-contrib
}

start_postgres() {
  local state=$1 dir=$1/postgres port
  [ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed (scripts/install-servers postgres)"
  port=$(free_port "${FAIRBENCH_PG_PORT:-55432}")
  mkdir -p "$dir"
  printf '%s\n' "$PASSWORD" >"$dir/password"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir"; fi
  as_user postgres "$PG_BIN/initdb" -D "$dir/data" --username=fairbench --pwfile="$dir/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  as_user postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; die "PostgreSQL did not start"; }
  head -1 "$dir/data/postmaster.pid" >"$state/postgres.pid"
  log "PostgreSQL on 127.0.0.1:$port (pid $(cat "$state/postgres.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_POSTGRES_URL=postgres://fairbench:$PASSWORD@127.0.0.1:$port/postgres"
}

# SIGINT is PostgreSQL's fast shutdown.
stop_postgres() { stop_pid PostgreSQL "$1/postgres.pid" INT; }

# SIGQUIT is its immediate shutdown: no checkpoint, every client cut off, as in a crash.
crash_postgres() { stop_pid PostgreSQL "$1/postgres.pid" QUIT; }
