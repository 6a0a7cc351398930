# Weaviate, built with `go install` from the Go module proxy into ~/.cache/fairbench/weaviate
# (about 8.5 minutes on 2 cores), one node on loopback with its own data folder, no vectorizer
# module, anonymous access, telemetry and the Go profiler (:6060) off. Exports
# FAIRBENCH_TEST_WEAVIATE_URL (weaviate://127.0.0.1:PORT, the REST port) and
# FAIRBENCH_TEST_WEAVIATE_PID. Without a Go toolchain it is skipped with a note.
#
# What still binds beyond loopback: Weaviate 1.35 listens on every interface for its gRPC API
# (GRPC_PORT) and its internal cluster data port (CLUSTER_DATA_BIND_PORT), whatever the
# settings say (both listen on ":PORT"); the REST API (--host), gossip (CLUSTER_BIND_ADDR) and
# Raft (CLUSTER_ADVERTISE_ADDR) stay on 127.0.0.1. Both are free ports of their own here.

WEAVIATE_VERSION=v1.35.2
WEAVIATE_CACHE=${FAIRBENCH_WEAVIATE_CACHE:-$HOME/.cache/fairbench/weaviate}
WEAVIATE_BIN=$WEAVIATE_CACHE/bin/weaviate-server

_weaviate_go() {
  if command -v go >/dev/null 2>&1; then command -v go; elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; fi
}

install_weaviate() {
  [ -x "$WEAVIATE_BIN" ] && [ -f "$WEAVIATE_CACHE/ready-$WEAVIATE_VERSION" ] && return 0
  local go
  go=$(_weaviate_go)
  if [ -z "$go" ]; then
    log "no Go toolchain: Weaviate is not installed (its tests are skipped)"
    return 0
  fi
  log "building Weaviate $WEAVIATE_VERSION (go install, about 8.5 minutes on 2 cores) into $WEAVIATE_CACHE"
  mkdir -p "$WEAVIATE_CACHE"
  # cgo as Go's default leaves it (Weaviate's own Dockerfile builds with CGO_ENABLED=1).
  GOBIN="$WEAVIATE_CACHE/bin" GOPATH="$WEAVIATE_CACHE/go" GOFLAGS=-modcacherw \
    "$go" install "github.com/weaviate/weaviate/cmd/weaviate-server@$WEAVIATE_VERSION" >&2 \
    || die "go install of Weaviate $WEAVIATE_VERSION failed"
  touch "$WEAVIATE_CACHE/ready-$WEAVIATE_VERSION"
}

weaviate_ready() { curl -fsS "http://127.0.0.1:$1/v1/.well-known/ready"; }

start_weaviate() {
  local state=$1 dir=$1/weaviate port grpc gossip data raft raft_rpc
  if [ ! -x "$WEAVIATE_BIN" ]; then
    log "Weaviate is not installed; not started"
    return 0
  fi
  command -v curl >/dev/null 2>&1 || ensure_packages curl
  # A fresh store each start: collections of an earlier run would otherwise come back.
  rm -rf "$dir/data"
  mkdir -p "$dir/data"
  # Bases ten apart: free_port searches upwards, and two searches must not meet.
  port=$(free_port "${FAIRBENCH_WEAVIATE_PORT:-58080}")
  grpc=$(free_port "${FAIRBENCH_WEAVIATE_GRPC_PORT:-58051}")
  gossip=$(free_port 57946)
  data=$(free_port 57956)
  raft=$(free_port 58300)
  raft_rpc=$(free_port 58310)
  # CLUSTER_ADVERTISE_ADDR: without it the node advertises the host's first address (an IPv6
  # one here, which it cannot parse). The disk thresholds: by default a shard turns read-only
  # at 90% disk use, which a full development disk reaches; the server is throwaway.
  PERSISTENCE_DATA_PATH="$dir/data" AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true \
    DEFAULT_VECTORIZER_MODULE=none DISABLE_TELEMETRY=true GO_PROFILING_DISABLE=true \
    DISK_USE_WARNING_PERCENTAGE=99 DISK_USE_READONLY_PERCENTAGE=100 \
    CLUSTER_HOSTNAME=node1 CLUSTER_ADVERTISE_ADDR=127.0.0.1 CLUSTER_BIND_ADDR=127.0.0.1 \
    CLUSTER_GOSSIP_BIND_PORT="$gossip" CLUSTER_DATA_BIND_PORT="$data" \
    RAFT_PORT="$raft" RAFT_INTERNAL_RPC_PORT="$raft_rpc" RAFT_BOOTSTRAP_EXPECT=1 RAFT_JOIN=node1 \
    GRPC_PORT="$grpc" \
    "$WEAVIATE_BIN" --host 127.0.0.1 --port "$port" --scheme http >"$dir/server.log" 2>&1 &
  echo $! >"$state/weaviate.pid"
  wait_until Weaviate 90 "$dir/server.log" weaviate_ready "$port"
  log "Weaviate $WEAVIATE_VERSION on 127.0.0.1:$port, gRPC on *:$grpc (pid $(cat "$state/weaviate.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_WEAVIATE_URL=weaviate://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_WEAVIATE_PID=$(cat "$state/weaviate.pid")"
}

stop_weaviate() {
  stop_pid Weaviate "$1/weaviate.pid"
}
