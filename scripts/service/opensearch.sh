# OpenSearch 2.19 (the newest that runs on Java 17), one node in one JVM, built from Maven
# Central by the small launcher in scripts/opensearch-launcher; HTTP on loopback, 512 MB heap.
# Exports FAIRBENCH_TEST_OPENSEARCH_URL. (opensearch-tls.sh starts an HTTPS node the same way.)

OPENSEARCH_CACHE=${FAIRBENCH_OPENSEARCH_CACHE:-$HOME/.cache/fairbench/opensearch}

# The build is keyed by the launcher's sources, so a changed pom or class rebuilds it.
opensearch_build_dir() {
  local sources key
  sources=$(cd "$here/opensearch-launcher" && pwd)
  key=$(cat "$sources/pom.xml" "$sources"/src/main/java/org/fairbench/opensearch/*.java | sha256sum | cut -c1-16)
  echo "$OPENSEARCH_CACHE/$key"
}

install_opensearch() {
  ensure_packages openjdk-17-jdk-headless maven curl
  local build
  build=$(opensearch_build_dir)
  [ -f "$build/ready" ] && return 0
  log "building the OpenSearch launcher in $build"
  rm -rf "$build"
  mkdir -p "$build"
  cp -r "$here/opensearch-launcher/." "$build/src-copy"
  # Offline first: a local Maven repository that already holds every jar needs no network.
  if ! (cd "$build/src-copy" && mvn -B -q -o package >"$build/build.log" 2>&1); then
    (cd "$build/src-copy" && mvn -B -q package >"$build/build.log" 2>&1) \
      || { tail -30 "$build/build.log" >&2; die "building the OpenSearch launcher failed (log: $build/build.log)"; }
  fi
  mv "$build/src-copy/target/lib" "$build/lib"
  mv "$build/src-copy/target/opensearch-launcher-1.jar" "$build/launcher.jar"
  rm -rf "$build/src-copy"
  touch "$build/ready"
}

opensearch_java() {
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    echo /usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    command -v java
  fi
}

# Ready when the cluster is yellow or green, or the JVM is gone (the caller tells which).
# opensearch_ready PID PORT [CA]: with CA, over https.
opensearch_ready() {
  ! kill -0 "$1" 2>/dev/null && return 0
  if [ -n "${3:-}" ]; then
    curl -sf --cacert "$3" "https://127.0.0.1:$2/_cluster/health?wait_for_status=yellow&timeout=5s"
  else
    curl -sf "http://127.0.0.1:$2/_cluster/health?wait_for_status=yellow&timeout=5s"
  fi
}

# Starts one node's JVM in the background (NAME, its folder, its port, extra JVM flags).
_launch_opensearch() {
  local state=$1 name=$2 dir=$3 port=$4 build
  shift 4
  build=$(opensearch_build_dir)
  mkdir -p "$dir"
  # -Xms = -Xmx so the heap is committed up front and does not grow during a measurement.
  "$(opensearch_java)" -Xms512m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dopensearch.set.netty.runtime.available.processors=false -Dlog4j2.formatMsgNoLookups=true "$@" \
    -cp "$build/lib/*:$build/launcher.jar" org.fairbench.opensearch.Launcher "$dir" "$port" \
    >"$dir/server.log" 2>&1 &
  echo $! >"$state/$name.pid"
}

# Waits for one node (NAME, its folder, its port, [CA]) and fails if its JVM is gone. Returns 2
# when the JVM could not bind its port: the ports we pick lie in the kernel's ephemeral range,
# and a connection made between picking and binding may take it.
_await_opensearch() {
  local state=$1 name=$2 dir=$3 port=$4 ca=${5:-}
  wait_until "OpenSearch ($name)" 180 "$dir/server.log" opensearch_ready "$(cat "$state/$name.pid")" "$port" "$ca"
  if ! kill -0 "$(cat "$state/$name.pid")" 2>/dev/null; then
    grep -q "Failed to bind to 127.0.0.1:$port" "$dir/server.log" && return 2
    tail -30 "$dir/server.log" >&2
    die "OpenSearch ($name) exited during start-up (log: $dir/server.log)"
  fi
}

# Launches and awaits one node (NAME, its folder, the first port to try, [CA], -- extra JVM
# flags), on the next free port when its port was taken meanwhile (three tries). Sets
# OPENSEARCH_PORT to the port it listens on.
_run_opensearch() {
  local state=$1 name=$2 dir=$3 port=$4 ca=$5 status
  shift 6
  for _ in 1 2 3; do
    port=$(free_port "$port")
    _launch_opensearch "$state" "$name" "$dir" "$port" "$@"
    status=0
    _await_opensearch "$state" "$name" "$dir" "$port" "$ca" || status=$?
    if [ "$status" -eq 0 ]; then
      OPENSEARCH_PORT=$port
      return 0
    fi
    log "OpenSearch ($name): port $port was taken while it started; trying the next one"
    port=$((port + 1))
  done
  die "OpenSearch ($name) found no port it could bind (log: $dir/server.log)"
}

start_opensearch() {
  local state=$1 dir=$1/opensearch port
  [ -f "$(opensearch_build_dir)/ready" ] || die "OpenSearch is not built (scripts/install-servers opensearch)"
  _run_opensearch "$state" opensearch "$dir" "${FAIRBENCH_OPENSEARCH_PORT:-59200}" "" --
  port=$OPENSEARCH_PORT
  log "OpenSearch on 127.0.0.1:$port (pid $(cat "$state/opensearch.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_OPENSEARCH_URL=http://127.0.0.1:$port"
}
