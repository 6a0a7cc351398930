# pouchdb-server 4.2 from npm (PouchDB over LevelDB behind express-pouchdb): it speaks the CouchDB
# HTTP API and serves the couchdb target's tests. It is not Apache CouchDB, and reports say so
# (the target names the server from its own `GET /`). Installed under ~/.cache/fairbench/pouchdb
# without running install scripts: leveldown loads the prebuilt binding its package ships, and
# the optional sqlite3 backend (which would download or compile one) is never used.
# Exports FAIRBENCH_TEST_POUCHDB_URL.

POUCHDB_VERSION=4.2.0
POUCHDB_CACHE=${FAIRBENCH_POUCHDB_CACHE:-$HOME/.cache/fairbench/pouchdb}
POUCHDB_BIN=$POUCHDB_CACHE/node_modules/pouchdb-server/bin/pouchdb-server

install_pouchdb() {
  [ -f "$POUCHDB_CACHE/ready-$POUCHDB_VERSION" ] && return 0
  ensure_packages curl
  # A Node.js that is already there (with its own npm) is used as it is.
  command -v npm >/dev/null 2>&1 || ensure_packages nodejs npm
  log "installing pouchdb-server $POUCHDB_VERSION (npm) into $POUCHDB_CACHE"
  mkdir -p "$POUCHDB_CACHE"
  [ -f "$POUCHDB_CACHE/package.json" ] || echo '{"name": "fairbench-pouchdb", "private": true}' >"$POUCHDB_CACHE/package.json"
  (cd "$POUCHDB_CACHE" && npm install --no-audit --no-fund --ignore-scripts "pouchdb-server@$POUCHDB_VERSION" >"$POUCHDB_CACHE/install.log" 2>&1) \
    || { tail -30 "$POUCHDB_CACHE/install.log" >&2; die "npm install of pouchdb-server $POUCHDB_VERSION failed"; }
  touch "$POUCHDB_CACHE/ready-$POUCHDB_VERSION"
}

start_pouchdb() {
  local state=$1 dir=$1/pouchdb port
  [ -f "$POUCHDB_CACHE/ready-$POUCHDB_VERSION" ] || die "pouchdb-server is not installed (scripts/install-servers pouchdb)"
  port=$(free_port "${FAIRBENCH_POUCHDB_PORT:-45984}")
  mkdir -p "$dir/data"
  # It writes its config and log into the working directory: keep both in its own folder.
  (cd "$dir" && exec node "$POUCHDB_BIN" --host 127.0.0.1 --port "$port" --dir "$dir/data" \
    --config "$dir/config.json" --no-stdout-logs >"$dir/pouchdb.log" 2>&1) &
  echo $! >"$state/pouchdb.pid"
  wait_until pouchdb-server 60 "$dir/pouchdb.log" curl -sf "http://127.0.0.1:$port/"
  log "pouchdb-server $POUCHDB_VERSION on 127.0.0.1:$port (pid $(cat "$state/pouchdb.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_POUCHDB_URL=couchdb://127.0.0.1:$port"
}
