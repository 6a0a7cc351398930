# PostgreSQL 15 from Debian, on loopback, with scram passwords over TCP; plus a second instance
# that accepts only TLS (ssl=on, hostssl + hostnossl reject) with the state folder's test
# certificates, on 127.0.0.1 and 127.0.0.2 (the certificate names only 127.0.0.1 and localhost,
# so 127.0.0.2 is the name-mismatch case). Its data directory is a copy of the first one's fresh
# initdb (a cold copy: nothing has started yet), so it costs no initdb of its own.
# Exports FAIRBENCH_TEST_POSTGRES_URL, FAIRBENCH_TEST_POSTGRES_TLS_URL (sslmode=verify-full with
# the test CA) and FAIRBENCH_TEST_POSTGRES_TLS_MISMATCH_URL (the same server at 127.0.0.2).
# FAIRBENCH_PG_LISTEN=ADDRESS puts the first instance on that address instead of 127.0.0.1, with
# passwords accepted from its /24 (the host side of a test's network namespaces).

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

install_postgres() {
  ensure_packages postgresql-15 postgresql-contrib openssl
}

start_postgres() {
  local state=$1 dir=$1/postgres port listen=${FAIRBENCH_PG_LISTEN:-127.0.0.1}
  [ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed (scripts/install-servers postgres)"
  port=$(free_port "${FAIRBENCH_PG_PORT:-55432}")
  mkdir -p "$dir"
  printf '%s\n' "$PASSWORD" >"$dir/password"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir"; fi
  as_user postgres "$PG_BIN/initdb" -D "$dir/data" --username=fairbench --pwfile="$dir/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  _prepare_postgres_tls "$state"
  if [ "$listen" != 127.0.0.1 ]; then
    echo "host all all ${listen%.*}.0/24 scram-sha-256" >>"$dir/data/pg_hba.conf"
  fi
  as_user postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=$listen -k $dir -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; die "PostgreSQL did not start"; }
  head -1 "$dir/data/postmaster.pid" >"$state/postgres.pid"
  log "PostgreSQL on $listen:$port (pid $(cat "$state/postgres.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_POSTGRES_URL=postgres://fairbench:$PASSWORD@$listen:$port/postgres"
  _start_postgres_tls "$state"
}

# The TLS instance's data directory: a cold copy of the fresh cluster, its key and certificate
# (PostgreSQL wants the key owned by its user and private), and TLS-only client rules.
_prepare_postgres_tls() {
  local state=$1 dir=$1/postgres-tls
  test_tls "$state"
  mkdir -p "$dir"
  cp -a "$state/postgres/data" "$dir/data"
  cp "$TLS_DIR/server.pem" "$dir/server.crt"
  cp "$TLS_DIR/server.key" "$dir/server.key"
  chmod 600 "$dir/server.key"
  cat >"$dir/data/pg_hba.conf" <<HBA
local     all all                trust
hostssl   all all 127.0.0.1/32   scram-sha-256
hostssl   all all 127.0.0.2/32   scram-sha-256
hostnossl all all 127.0.0.1/32   reject
hostnossl all all 127.0.0.2/32   reject
HBA
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir"; fi
}

_start_postgres_tls() {
  local state=$1 dir=$1/postgres-tls port url
  port=$(free_port "${FAIRBENCH_PG_TLS_PORT:-55452}")
  as_user postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1,127.0.0.2 -k $dir -c max_connections=200 -c ssl=on \
        -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" start >/dev/null \
    || { cat "$dir/server.log" >&2; die "PostgreSQL (TLS) did not start"; }
  head -1 "$dir/data/postmaster.pid" >"$state/postgres-tls.pid"
  log "PostgreSQL, TLS only, on 127.0.0.1:$port and 127.0.0.2:$port (pid $(cat "$state/postgres-tls.pid"), data $dir/data)"
  url="postgres://fairbench:$PASSWORD@127.0.0.1:$port/postgres?sslmode=verify-full&sslrootcert=$TLS_DIR/ca.pem"
  echo "export FAIRBENCH_TEST_POSTGRES_TLS_URL='$url'"
  echo "export FAIRBENCH_TEST_POSTGRES_TLS_MISMATCH_URL='${url/127.0.0.1/127.0.0.2}'"
}

# SIGINT is PostgreSQL's fast shutdown.
stop_postgres() {
  stop_pid PostgreSQL "$1/postgres.pid" INT
  stop_pid "PostgreSQL (TLS)" "$1/postgres-tls.pid" INT
}

# SIGQUIT is its immediate shutdown: no checkpoint, every client cut off, as in a crash.
crash_postgres() {
  stop_pid PostgreSQL "$1/postgres.pid" QUIT
  stop_pid "PostgreSQL (TLS)" "$1/postgres-tls.pid" QUIT
}
