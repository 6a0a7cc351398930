# aedes (a Node.js MQTT 3.1.1 broker) through aedes-cli from npm, installed under
# ~/.cache/fairbench/aedes without install scripts, on loopback, with its default in-memory
# persistence (retained messages and clean-session-false sessions live until it stops).
# It speaks MQTT 3.1/3.1.1 only (an MQTT 5 CONNECT gets `20 02 00 01`) and has no shared
# subscriptions; it does not publish its version on $SYS. Exports FAIRBENCH_TEST_AEDES_URL and
# FAIRBENCH_TEST_AEDES_PID.

AEDES_CLI_VERSION=1.0.2
AEDES_VERSION=1.2.0
AEDES_CACHE=${FAIRBENCH_AEDES_CACHE:-$HOME/.cache/fairbench/aedes}
AEDES_BIN=$AEDES_CACHE/node_modules/aedes-cli/bin/aedes

install_aedes() {
  [ -f "$AEDES_CACHE/ready-$AEDES_CLI_VERSION-$AEDES_VERSION" ] && return 0
  # A Node.js that is already there (with its own npm) is used as it is.
  command -v npm >/dev/null 2>&1 || ensure_packages nodejs npm
  log "installing aedes-cli $AEDES_CLI_VERSION with aedes $AEDES_VERSION (npm) into $AEDES_CACHE"
  mkdir -p "$AEDES_CACHE"
  [ -f "$AEDES_CACHE/package.json" ] || echo '{"name": "fairbench-aedes", "private": true}' >"$AEDES_CACHE/package.json"
  (cd "$AEDES_CACHE" && npm install --no-audit --no-fund --ignore-scripts \
    "aedes-cli@$AEDES_CLI_VERSION" "aedes@$AEDES_VERSION" >"$AEDES_CACHE/install.log" 2>&1) \
    || { tail -30 "$AEDES_CACHE/install.log" >&2; die "npm install of aedes-cli $AEDES_CLI_VERSION failed"; }
  touch "$AEDES_CACHE/ready-$AEDES_CLI_VERSION-$AEDES_VERSION"
}

start_aedes() {
  local state=$1 dir=$1/aedes port
  [ -f "$AEDES_CACHE/ready-$AEDES_CLI_VERSION-$AEDES_VERSION" ] || die "aedes is not installed (scripts/install-servers aedes)"
  mkdir -p "$dir"
  port=$(free_port "${FAIRBENCH_AEDES_PORT:-41903}")
  # Only the TCP listener (no ws/tls), on loopback; the working directory is its own folder.
  (cd "$dir" && exec node "$AEDES_BIN" start --host 127.0.0.1 --port "$port" --protos tcp \
    --broker-id fairbench-aedes >"$dir/aedes.log" 2>&1) &
  echo $! >"$state/aedes.pid"
  wait_until aedes 30 "$dir/aedes.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
  log "aedes $AEDES_VERSION (aedes-cli $AEDES_CLI_VERSION) on 127.0.0.1:$port (pid $(cat "$state/aedes.pid"))"
  echo "export FAIRBENCH_TEST_AEDES_URL=mqtt://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_AEDES_PID=$(cat "$state/aedes.pid")"
}
