# Chroma behind a TLS terminator: Chroma's server speaks plaintext HTTP only, so a Chroma of its
# own (as chroma.sh starts it, on a loopback port nothing else is told of) is reached through
# Debian's stunnel4, which holds the state folder's test certificate and forwards the decrypted
# bytes. Exports FAIRBENCH_TEST_CHROMA_TLS_URL (chroma://…?sslmode=verify-full&cacert=, the
# terminator's port, which accepts TLS only).

install_chroma-tls() {
  declare -F install_chroma >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/chroma.sh"
  ensure_packages stunnel4 openssl curl
  install_chroma
}

start_chroma-tls() {
  local state=$1 dir=$1/chroma-tls port chroma_port
  declare -F _launch_chroma >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/chroma.sh"
  command -v stunnel4 >/dev/null || die "stunnel4 is not installed (scripts/install-servers chroma-tls)"
  test_tls "$state"
  chroma_port=$(free_port "${FAIRBENCH_CHROMA_TLS_BACKEND_PORT:-58100}")
  _launch_chroma "$state" chroma-tls-backend "$dir" "$chroma_port"
  port=$(free_port "${FAIRBENCH_CHROMA_TLS_PORT:-58443}")
  cat >"$dir/stunnel.conf" <<CONF
foreground = yes
pid =
debug = notice
[chroma]
accept = 127.0.0.1:$port
connect = 127.0.0.1:$chroma_port
cert = $TLS_DIR/server.pem
key = $TLS_DIR/server.key
CONF
  stunnel4 "$dir/stunnel.conf" >>"$dir/stunnel.log" 2>&1 &
  echo $! >"$state/chroma-tls.pid"
  wait_until "stunnel in front of Chroma" 30 "$dir/stunnel.log" \
    curl -fsS --cacert "$TLS_DIR/ca.pem" "https://127.0.0.1:$port/api/v2/heartbeat"
  log "Chroma (HTTPS through stunnel) on 127.0.0.1:$port (stunnel pid $(cat "$state/chroma-tls.pid"), Chroma pid $(cat "$state/chroma-tls-backend.pid") on 127.0.0.1:$chroma_port)"
  echo "export FAIRBENCH_TEST_CHROMA_TLS_URL='chroma://127.0.0.1:$port?sslmode=verify-full&cacert=$TLS_DIR/ca.pem'"
}

stop_chroma-tls() {
  stop_pid "stunnel (Chroma TLS)" "$1/chroma-tls.pid"
  stop_pid "Chroma (behind TLS)" "$1/chroma-tls-backend.pid"
}

crash_chroma-tls() {
  stop_pid "stunnel (Chroma TLS)" "$1/chroma-tls.pid" KILL
  stop_pid "Chroma (behind TLS)" "$1/chroma-tls-backend.pid" KILL
}
