# NATS Server with its MQTT listener (MQTT needs JetStream and a server name), built with
# `go install` from the Go module proxy into ~/.cache/fairbench/nats, on loopback: the NATS
# client port, the MQTT port and the HTTP monitoring port (`GET /varz` reports the version),
# JetStream's store in its own data folder. Exports FAIRBENCH_TEST_NATS_MQTT_URL,
# FAIRBENCH_TEST_NATS_PID, FAIRBENCH_TEST_NATS_URL and FAIRBENCH_TEST_NATS_MONITOR_URL.
# Without a Go toolchain it is skipped with a note.

NATS_VERSION=v2.15.2
NATS_CACHE=${FAIRBENCH_NATS_CACHE:-$HOME/.cache/fairbench/nats}
NATS_BIN=$NATS_CACHE/bin/nats-server

_nats_go() {
  if command -v go >/dev/null 2>&1; then command -v go; elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; fi
}

install_nats() {
  [ -x "$NATS_BIN" ] && [ -f "$NATS_CACHE/ready-$NATS_VERSION" ] && return 0
  local go
  go=$(_nats_go)
  if [ -z "$go" ]; then
    log "no Go toolchain: NATS Server is not installed (its tests are skipped)"
    return 0
  fi
  log "building NATS Server $NATS_VERSION (go install) into $NATS_CACHE"
  mkdir -p "$NATS_CACHE"
  GOBIN="$NATS_CACHE/bin" GOPATH="$NATS_CACHE/go" GOFLAGS=-modcacherw CGO_ENABLED=0 \
    "$go" install "github.com/nats-io/nats-server/v2@$NATS_VERSION" >&2 \
    || die "go install of NATS Server $NATS_VERSION failed"
  touch "$NATS_CACHE/ready-$NATS_VERSION"
}

start_nats() {
  local state=$1 dir=$1/nats port mqtt monitor
  if [ ! -x "$NATS_BIN" ]; then
    log "NATS Server is not installed; not started"
    return 0
  fi
  command -v curl >/dev/null 2>&1 || ensure_packages curl
  # A fresh JetStream store each start: retained messages and sessions of an earlier run in the
  # same state folder would otherwise come back.
  rm -rf "$dir/jetstream"
  mkdir -p "$dir/jetstream"
  port=$(free_port "${FAIRBENCH_NATS_PORT:-44222}")
  mqtt=$(free_port "${FAIRBENCH_NATS_MQTT_PORT:-41893}")
  monitor=$(free_port "${FAIRBENCH_NATS_MONITOR_PORT:-48222}")
  cat >"$dir/nats.conf" <<CONF
server_name: fairbench_nats
listen: 127.0.0.1:$port
http: 127.0.0.1:$monitor
max_payload: 8MB
log_file: "$dir/nats.log"
jetstream {
  store_dir: "$dir/jetstream"
  max_memory_store: 256MB
  max_file_store: 2GB
}
mqtt {
  listen: 127.0.0.1:$mqtt
}
CONF
  # Its first lines go to stdout before log_file takes over: keep them out of the caller's pipe.
  "$NATS_BIN" -c "$dir/nats.conf" >"$dir/nats.out" 2>&1 &
  echo $! >"$state/nats.pid"
  # /healthz answers ok once JetStream (which the MQTT listener needs) is up.
  wait_until "NATS Server" 30 "$dir/nats.log" curl -sf "http://127.0.0.1:$monitor/healthz"
  wait_until "NATS Server (MQTT)" 30 "$dir/nats.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$mqtt"
  log "NATS Server $NATS_VERSION: MQTT on 127.0.0.1:$mqtt, NATS on :$port, monitoring on :$monitor (pid $(cat "$state/nats.pid"), data $dir/jetstream)"
  echo "export FAIRBENCH_TEST_NATS_MQTT_URL=mqtt://127.0.0.1:$mqtt"
  echo "export FAIRBENCH_TEST_NATS_PID=$(cat "$state/nats.pid")"
  echo "export FAIRBENCH_TEST_NATS_URL=nats://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_NATS_MONITOR_URL=http://127.0.0.1:$monitor"
}

stop_nats() {
  stop_pid "NATS Server" "$1/nats.pid"
}
