# HiveMQ Community Edition 2025.5 (Apache-2.0), one broker in one JVM, built from Maven Central
# by the small launcher in scripts/hivemq-launcher (HiveMQ's embedded jar, 56 jars in all): MQTT
# 3.1.1 and 5 on loopback, a TLS listener (mqtts://) with the state folder's test certificate on a
# second port of the same broker, in-memory persistence (as Mosquitto runs with persistence
# false), HiveMQ's default queue of 1,000 QoS 1/2 messages per client written out in its
# config.xml, anonymous usage statistics off. The launcher's HTTP monitor on loopback
# (GET /hivemq) gives HiveMQ's version, its effective settings and its metric registry
# (com.hivemq.messages.dropped.count among them): HiveMQ publishes no $SYS topics. mqtt-bench
# finds the monitor through the broker's PID (the launcher's command line) or `?monitor=`.
# Exports FAIRBENCH_TEST_HIVEMQ_URL, FAIRBENCH_TEST_HIVEMQ_PID, FAIRBENCH_TEST_HIVEMQ_TLS_URL
# (mqtts://, with the test CA as cacert=; the same broker and PID) and
# FAIRBENCH_TEST_HIVEMQ_MONITOR (the monitor's root URL).

HIVEMQ_CACHE=${FAIRBENCH_HIVEMQ_CACHE:-$HOME/.cache/fairbench/hivemq}

# The build is keyed by the launcher's sources, so a changed pom or class rebuilds it.
hivemq_build_dir() {
  local sources key
  sources=$(cd "$here/hivemq-launcher" && pwd)
  key=$(cat "$sources/pom.xml" "$sources"/src/main/java/org/fairbench/hivemq/*.java | sha256sum | cut -c1-16)
  echo "$HIVEMQ_CACHE/$key"
}

install_hivemq() {
  ensure_packages openjdk-17-jdk-headless maven openssl curl
  local build
  build=$(hivemq_build_dir)
  [ -f "$build/ready" ] && return 0
  log "building the HiveMQ launcher in $build"
  rm -rf "$build"
  mkdir -p "$build"
  cp -r "$here/hivemq-launcher/." "$build/src-copy"
  # Offline first: a local Maven repository that already holds every jar needs no network.
  if ! (cd "$build/src-copy" && mvn -B -q -o package >"$build/build.log" 2>&1); then
    (cd "$build/src-copy" && mvn -B -q package >"$build/build.log" 2>&1) \
      || { tail -30 "$build/build.log" >&2; die "building the HiveMQ launcher failed (log: $build/build.log)"; }
  fi
  mv "$build/src-copy/target/lib" "$build/lib"
  mv "$build/src-copy/target/hivemq-launcher-1.jar" "$build/launcher.jar"
  rm -rf "$build/src-copy"
  touch "$build/ready"
}

hivemq_java() {
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    echo /usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    command -v java
  fi
}

# Ready when the monitor answers (the launcher starts it once the broker has started) and the
# MQTT port accepts, or when the JVM is gone (the caller tells which).
hivemq_ready() {
  ! kill -0 "$1" 2>/dev/null && return 0
  curl -sf "http://127.0.0.1:$3/hivemq" >/dev/null && bash -c "exec 3<>/dev/tcp/127.0.0.1/$2"
}

start_hivemq() {
  local state=$1 dir=$1/hivemq build port tls_port monitor pid
  build=$(hivemq_build_dir)
  [ -f "$build/ready" ] || die "HiveMQ is not built (scripts/install-servers hivemq)"
  mkdir -p "$dir"
  test_tls "$state"
  port=$(free_port "${FAIRBENCH_HIVEMQ_PORT:-43883}")
  tls_port=$(free_port $((port + 1)))
  monitor=$(free_port $((tls_port + 1)))
  # HiveMQ's own start script opens these to its netty and its metrics; -Xms = -Xmx so the heap
  # is committed up front and does not grow during a measurement.
  "$(hivemq_java)" -Xms1g -Xmx1g -XX:+UseG1GC -Djava.net.preferIPv4Stack=true \
    --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
    -Dfairbench.tls.keystore="$TLS_DIR/server.p12" -Dfairbench.tls.password=fairbench \
    -cp "$build/lib/*:$build/launcher.jar" org.fairbench.hivemq.Launcher "$dir" "$port" "$tls_port" "$monitor" \
    >"$dir/server.log" 2>&1 &
  pid=$!
  echo "$pid" >"$state/hivemq.pid"
  wait_until HiveMQ 120 "$dir/server.log" hivemq_ready "$pid" "$port" "$monitor"
  if ! kill -0 "$pid" 2>/dev/null; then
    tail -30 "$dir/server.log" >&2
    die "HiveMQ exited during start-up (log: $dir/server.log)"
  fi
  log "HiveMQ $(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' "$dir/hivemq.json") on 127.0.0.1:$port and TLS on :$tls_port (pid $pid, monitor http://127.0.0.1:$monitor/hivemq, data $dir/data)"
  echo "export FAIRBENCH_TEST_HIVEMQ_URL=mqtt://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_HIVEMQ_PID=$pid"
  echo "export FAIRBENCH_TEST_HIVEMQ_TLS_URL='mqtts://127.0.0.1:$tls_port?cacert=$TLS_DIR/ca.pem'"
  echo "export FAIRBENCH_TEST_HIVEMQ_MONITOR=http://127.0.0.1:$monitor"
}
