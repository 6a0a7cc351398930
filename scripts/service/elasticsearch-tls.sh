# Elasticsearch 8.18 as elasticsearch.sh starts it, in a JVM of its own, speaking HTTPS only:
# TLS in the server's own netty4 HTTP transport through the launcher's TlsPlugin (the TLS
# configuration Elasticsearch's security plugin would hand it, built by Elasticsearch's
# ssl-config library; no security plugin, no terminator), with the state folder's test
# certificate. A service of its own, as opensearch-tls.sh is, so `scripts/services start DIR
# elasticsearch` stays as fast. Exports FAIRBENCH_TEST_ELASTICSEARCH_TLS_URL (https://, with
# the test CA as cacert=). Needs the helpers of elasticsearch.sh.

install_elasticsearch-tls() {
  declare -F install_elasticsearch >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/elasticsearch.sh"
  ensure_packages openssl
  install_elasticsearch
}

start_elasticsearch-tls() {
  local state=$1 dir=$1/elasticsearch-tls
  declare -F _run_elasticsearch >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/elasticsearch.sh"
  test_tls "$state"
  _run_elasticsearch "$state" elasticsearch-tls "$dir" "${FAIRBENCH_ELASTICSEARCH_TLS_PORT:-59750}" "$TLS_DIR/ca.pem" -- \
    -Dfairbench.tls.cert="$TLS_DIR/server.pem" -Dfairbench.tls.key="$TLS_DIR/server.key"
  log "Elasticsearch, HTTPS only, on 127.0.0.1:$ELASTICSEARCH_PORT (pid $(cat "$state/elasticsearch-tls.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_ELASTICSEARCH_TLS_URL='https://127.0.0.1:$ELASTICSEARCH_PORT?cacert=$TLS_DIR/ca.pem'"
}
