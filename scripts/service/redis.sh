# Redis from Debian, on loopback, twice: volatile (no persistence) and durable (AOF with
# appendfsync always). Exports FAIRBENCH_TEST_REDIS_URL and FAIRBENCH_TEST_REDIS_DURABLE_URL.
# redis-benchmark comes with the same package.

install_redis() {
  ensure_packages redis-server redis-tools
}

# start_redis_server BIN CLI NAME DIR PORT EXTRA… starts one server and waits for PING.
start_redis_server() {
  local bin=$1 cli=$2 name=$3 dir=$4 port=$5
  shift 5
  mkdir -p "$dir"
  "$bin" --bind 127.0.0.1 --port "$port" --dir "$dir" --logfile "$dir/server.log" \
    --daemonize no --protected-mode yes "$@" >/dev/null 2>&1 &
  echo $! >"$state_dir/$name.pid"
  wait_until "$name" 30 "$dir/server.log" "$cli" -h 127.0.0.1 -p "$port" ping
  log "$name on 127.0.0.1:$port (pid $(cat "$state_dir/$name.pid"), data $dir)"
}

start_redis() {
  local state_dir=$1 port durable_port
  command -v redis-server >/dev/null || die "Redis is not installed (scripts/install-servers redis)"
  port=$(free_port "${FAIRBENCH_REDIS_PORT:-56379}")
  start_redis_server redis-server redis-cli redis "$state_dir/redis" "$port" --save '' --appendonly no
  durable_port=$(free_port $((port + 1)))
  start_redis_server redis-server redis-cli redis-durable "$state_dir/redis-durable" "$durable_port" \
    --save '' --appendonly yes --appendfsync always
  echo "export FAIRBENCH_TEST_REDIS_URL=redis://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_REDIS_DURABLE_URL=redis://127.0.0.1:$durable_port"
}

stop_redis() {
  stop_pid Redis "$1/redis.pid"
  stop_pid "Redis (durable)" "$1/redis-durable.pid"
}

crash_redis() {
  stop_pid Redis "$1/redis.pid" KILL
  stop_pid "Redis (durable)" "$1/redis-durable.pid" KILL
}
