# Elasticsearch 8.18 (offered under AGPL-3.0 among its licences), one node in one JVM, built
# from Maven Central by the small launcher in scripts/elasticsearch-launcher; HTTP on loopback
# without security, 512 MB heap. Exports FAIRBENCH_TEST_ELASTICSEARCH_URL and _PID.
# (elasticsearch-tls.sh starts an HTTPS node the same way.) Uses the readiness check and Java
# of opensearch.sh (the same launcher pattern).

ELASTICSEARCH_CACHE=${FAIRBENCH_ELASTICSEARCH_CACHE:-$HOME/.cache/fairbench/elasticsearch}

# The build is keyed by the launcher's sources, so a changed pom or class rebuilds it.
elasticsearch_build_dir() {
  local sources key
  sources=$(cd "$here/elasticsearch-launcher" && pwd)
  key=$(cd "$sources" && find pom.xml src -type f | sort | xargs cat | sha256sum | cut -c1-16)
  echo "$ELASTICSEARCH_CACHE/$key"
}

install_elasticsearch() {
  ensure_packages openjdk-17-jdk-headless maven curl
  local build
  build=$(elasticsearch_build_dir)
  [ -f "$build/ready" ] && return 0
  log "building the Elasticsearch launcher in $build"
  rm -rf "$build"
  mkdir -p "$build"
  cp -r "$here/elasticsearch-launcher/." "$build/src-copy"
  # Offline first: a local Maven repository that already holds every jar needs no network.
  if ! (cd "$build/src-copy" && mvn -B -q -o package >"$build/build.log" 2>&1); then
    (cd "$build/src-copy" && mvn -B -q package >"$build/build.log" 2>&1) \
      || { tail -30 "$build/build.log" >&2; die "building the Elasticsearch launcher failed (log: $build/build.log)"; }
  fi
  mv "$build/src-copy/target/lib" "$build/lib"
  mv "$build/src-copy/target/elasticsearch-launcher-1.jar" "$build/launcher.jar"
  rm -rf "$build/src-copy"
  touch "$build/ready"
}

# Starts one node's JVM in the background (NAME, its folder, its port, extra JVM flags).
_launch_elasticsearch() {
  local state=$1 name=$2 dir=$3 port=$4 build
  shift 4
  build=$(elasticsearch_build_dir)
  mkdir -p "$dir"
  # -Xms = -Xmx so the heap is committed up front and does not grow during a measurement.
  "$(opensearch_java)" -Xms512m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.formatMsgNoLookups=true "$@" \
    -cp "$build/lib/*:$build/launcher.jar" org.fairbench.elasticsearch.Launcher "$dir" "$port" \
    >"$dir/server.log" 2>&1 &
  echo $! >"$state/$name.pid"
}

# Launches and awaits one node (NAME, its folder, the first port to try, [CA], -- extra JVM
# flags), on the next free port when its port was taken meanwhile (three tries): the ports we
# pick lie in the kernel's ephemeral range. Sets ELASTICSEARCH_PORT to the port it listens on.
_run_elasticsearch() {
  local state=$1 name=$2 dir=$3 port=$4 ca=$5 pid
  shift 6
  declare -F opensearch_ready >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/opensearch.sh"
  [ -f "$(elasticsearch_build_dir)/ready" ] || die "Elasticsearch is not built (scripts/install-servers elasticsearch)"
  for _ in 1 2 3; do
    port=$(free_port "$port")
    _launch_elasticsearch "$state" "$name" "$dir" "$port" "$@"
    pid=$(cat "$state/$name.pid")
    wait_until "Elasticsearch ($name)" 180 "$dir/server.log" opensearch_ready "$pid" "$port" "$ca"
    if kill -0 "$pid" 2>/dev/null; then
      ELASTICSEARCH_PORT=$port
      return 0
    fi
    grep -q "Failed to bind to 127.0.0.1:$port" "$dir/server.log" || {
      tail -30 "$dir/server.log" >&2
      die "Elasticsearch ($name) exited during start-up (log: $dir/server.log)"
    }
    log "Elasticsearch ($name): port $port was taken while it started; trying the next one"
    port=$((port + 1))
  done
  die "Elasticsearch ($name) found no port it could bind (log: $dir/server.log)"
}

start_elasticsearch() {
  local state=$1 dir=$1/elasticsearch
  _run_elasticsearch "$state" elasticsearch "$dir" "${FAIRBENCH_ELASTICSEARCH_PORT:-59250}" "" --
  log "Elasticsearch on 127.0.0.1:$ELASTICSEARCH_PORT (pid $(cat "$state/elasticsearch.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_ELASTICSEARCH_URL=http://127.0.0.1:$ELASTICSEARCH_PORT"
  echo "export FAIRBENCH_TEST_ELASTICSEARCH_PID=$(cat "$state/elasticsearch.pid")"
}
