# OpenSearch 2.19 as opensearch.sh starts it, in a JVM of its own, speaking HTTPS only: TLS in
# the server itself through the launcher's TlsPlugin (OpenSearch's secure-transport extension
# point, the one its security plugin uses; no security plugin, no terminator), with the state
# folder's test certificate as PKCS#12. A service of its own because a second JVM is the
# slowest TLS server to start (about 10-25 s more on 2 cores); `scripts/services start DIR
# opensearch` stays as fast as before. Exports FAIRBENCH_TEST_OPENSEARCH_TLS_URL (https://, with
# the test CA as cacert=). Needs the helpers of opensearch.sh.

install_opensearch-tls() {
  declare -F install_opensearch >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/opensearch.sh"
  ensure_packages openssl
  install_opensearch
}

start_opensearch-tls() {
  local state=$1 dir=$1/opensearch-tls port
  declare -F _launch_opensearch >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/opensearch.sh"
  [ -f "$(opensearch_build_dir)/ready" ] || die "OpenSearch is not built (scripts/install-servers opensearch)"
  test_tls "$state"
  _run_opensearch "$state" opensearch-tls "$dir" "${FAIRBENCH_OPENSEARCH_TLS_PORT:-59700}" "$TLS_DIR/ca.pem" -- \
    -Dfairbench.tls.keystore="$TLS_DIR/server.p12" -Dfairbench.tls.password=fairbench
  port=$OPENSEARCH_PORT
  log "OpenSearch, HTTPS only, on 127.0.0.1:$port (pid $(cat "$state/opensearch-tls.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_OPENSEARCH_TLS_URL='https://127.0.0.1:$port?cacert=$TLS_DIR/ca.pem'"
}
