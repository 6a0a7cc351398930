# Redis from Debian, on loopback, twice: volatile (no persistence) and durable (AOF with
# appendfsync always). The volatile one also listens with TLS on a second port (Debian's Redis
# is built with TLS; tls-auth-clients no: no client certificate asked) with the state folder's
# test certificate. Exports FAIRBENCH_TEST_REDIS_URL, FAIRBENCH_TEST_REDIS_DURABLE_URL and
# FAIRBENCH_TEST_REDIS_TLS_URL (rediss://, with the test CA as cacert=).
# redis-benchmark comes with the same package.

install_redis() {
  ensure_packages redis-server redis-tools openssl
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
  local state_dir=$1 port durable_port tls_port
  command -v redis-server >/dev/null || die "Redis is not installed (scripts/install-servers redis)"
  test_tls "$state_dir"
  port=$(free_port "${FAIRBENCH_REDIS_PORT:-56379}")
  tls_port=$(free_port "${FAIRBENCH_REDIS_TLS_PORT:-56979}")
  start_redis_server redis-server redis-cli redis "$state_dir/redis" "$port" --save '' --appendonly no \
    --tls-port "$tls_port" --tls-cert-file "$TLS_DIR/server.pem" --tls-key-file "$TLS_DIR/server.key" \
    --tls-ca-cert-file "$TLS_DIR/ca.pem" --tls-auth-clients no
  log "Redis (TLS) on 127.0.0.1:$tls_port (the same process)"
  durable_port=$(free_port $((port + 1)))
  start_redis_server redis-server redis-cli redis-durable "$state_dir/redis-durable" "$durable_port" \
    --save '' --appendonly yes --appendfsync always
  echo "export FAIRBENCH_TEST_REDIS_URL=redis://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_REDIS_DURABLE_URL=redis://127.0.0.1:$durable_port"
  echo "export FAIRBENCH_TEST_REDIS_TLS_URL='rediss://127.0.0.1:$tls_port?cacert=$TLS_DIR/ca.pem'"
}

stop_redis() {
  stop_pid Redis "$1/redis.pid"
  stop_pid "Redis (durable)" "$1/redis-durable.pid"
}

crash_redis() {
  stop_pid Redis "$1/redis.pid" KILL
  stop_pid "Redis (durable)" "$1/redis-durable.pid" KILL
}
