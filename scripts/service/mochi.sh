# mochi-mqtt (a Go MQTT broker), built with `go install` into ~/.cache/fairbench/go, on
# loopback (all three of its listeners). Exports FAIRBENCH_TEST_MOCHI_URL and
# FAIRBENCH_TEST_MOCHI_PID. Without a Go toolchain it is skipped with a note.

MOCHI_VERSION=v2.7.9
MOCHI_GO=${FAIRBENCH_GO_CACHE:-$HOME/.cache/fairbench/go}
MOCHI_BIN=$MOCHI_GO/bin/cmd

_go() {
  if command -v go >/dev/null 2>&1; then command -v go; elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; fi
}

install_mochi() {
  [ -x "$MOCHI_BIN" ] && return 0
  local go
  go=$(_go)
  if [ -z "$go" ]; then
    log "no Go toolchain: mochi-mqtt is not installed (its tests are skipped)"
    return 0
  fi
  echo "install: mochi-mqtt $MOCHI_VERSION (go install)" >&2
  GOBIN="$MOCHI_GO/bin" GOPATH="$MOCHI_GO/path" GOFLAGS=-modcacherw \
    "$go" install "github.com/mochi-mqtt/server/v2/cmd@$MOCHI_VERSION" >&2 \
    || die "go install of mochi-mqtt $MOCHI_VERSION failed"
}

start_mochi() {
  local state=$1 dir=$1/mochi port ws info
  if [ ! -x "$MOCHI_BIN" ]; then
    log "mochi-mqtt is not installed; not started"
    return 0
  fi
  mkdir -p "$dir"
  port=$(free_port "${FAIRBENCH_MOCHI_PORT:-42883}")
  ws=$(free_port $((port + 1)))
  info=$(free_port $((ws + 1)))
  "$MOCHI_BIN" -tcp "127.0.0.1:$port" -ws "127.0.0.1:$ws" -info "127.0.0.1:$info" >"$dir/mochi.log" 2>&1 &
  echo $! >"$state/mochi.pid"
  wait_until mochi-mqtt 20 "$dir/mochi.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
  log "mochi-mqtt on 127.0.0.1:$port (pid $(cat "$state/mochi.pid"))"
  echo "export FAIRBENCH_TEST_MOCHI_URL=mqtt://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_MOCHI_PID=$(cat "$state/mochi.pid")"
}
