# Apache Cassandra 5.0 from Maven Central (cassandra-all and its dependencies, copied by Maven
# into ~/.cache/fairbench/cassandra), one node in one JVM with a 1 GB heap, our own minimal
# cassandra.yaml: loopback only, commitlog_sync: batch (a write is acknowledged after its
# commit-log fsync, seed 000's C0). Its clients reach it on two ports: the plaintext one of
# FAIRBENCH_TEST_CASSANDRA_URL, and a TLS-only one (client_encryption_options with the state
# folder's test certificate as PKCS#12, on native_transport_port_ssl: a second native-transport
# server in the same JVM, so no second Cassandra start) of FAIRBENCH_TEST_CASSANDRA_TLS_URL
# (cql://…?sslmode=verify-full&cacert=). The plaintext port has no TLS handler at all.

CASSANDRA_VERSION=5.0.4
CASSANDRA_CACHE=${FAIRBENCH_CASSANDRA_CACHE:-$HOME/.cache/fairbench/cassandra/$CASSANDRA_VERSION}
# How long start-up may take on a busy 2-core machine (measured: 40–90 s).
CASSANDRA_START_SECONDS=${FAIRBENCH_CASSANDRA_START_SECONDS:-240}

install_cassandra() {
  [ -f "$CASSANDRA_CACHE/ready" ] && return 0
  ensure_packages openjdk-17-jdk-headless maven
  log "fetching Apache Cassandra $CASSANDRA_VERSION and its dependencies into $CASSANDRA_CACHE"
  rm -rf "$CASSANDRA_CACHE"
  mkdir -p "$CASSANDRA_CACHE"
  cat >"$CASSANDRA_CACHE/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>org.fairbench</groupId>
  <artifactId>cassandra-server</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$CASSANDRA_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  (cd "$CASSANDRA_CACHE" && mvn -B -q dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$CASSANDRA_CACHE/lib" >"$CASSANDRA_CACHE/install.log" 2>&1) \
    || { tail -30 "$CASSANDRA_CACHE/install.log" >&2; die "fetching Cassandra from Maven Central failed"; }
  touch "$CASSANDRA_CACHE/ready"
}

cassandra_java() {
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    echo /usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    command -v java
  fi
}

# The module flags of Cassandra's conf/jvm17-server.options.
cassandra_jvm_flags() {
  local m
  echo -Djdk.attach.allowAttachSelf=true -Dio.netty.tryReflectionSetAccessible=true
  for m in java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi \
    java.rmi/sun.rmi.registry java.rmi/sun.rmi.server java.sql/java.sql java.base/java.lang.ref \
    jdk.unsupported/sun.misc jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach; do
    echo "--add-exports=$m=ALL-UNNAMED"
  done
  for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
    java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
    java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal java.base/sun.nio.ch \
    java.base/java.io java.base/java.lang.reflect jdk.compiler/com.sun.tools.javac java.base/java.lang \
    java.base/java.util java.base/java.nio; do
    echo "--add-opens=$m=ALL-UNNAMED"
  done
}

# Ready when CQL answers on both ports (the TLS one starts second), or the JVM is gone (the
# caller tells which).
cassandra_ready() {
  ! kill -0 "$1" 2>/dev/null || grep -q "Starting listening for CQL clients on .* (encrypted)" "$2"
}

start_cassandra() {
  local state=$1 dir=$1/cassandra port tls_port storage jmx
  [ -f "$CASSANDRA_CACHE/ready" ] || die "Cassandra is not installed (scripts/install-servers cassandra)"
  test_tls "$state"
  local started=$SECONDS attempt pid
  # The ports are free when chosen but lie in the ephemeral range: a client socket can take one
  # before the JVM binds it, so a start that fails on a taken port is retried on others.
  for attempt in 1 2 3; do
    port=$(free_port "${FAIRBENCH_CASSANDRA_PORT:-49042}")
    storage=$(free_port $((port + 1)))
    jmx=$(free_port $((storage + 1)))
    tls_port=$(free_port $((jmx + 1)))
    mkdir -p "$dir/data" "$dir/commitlog" "$dir/saved_caches" "$dir/hints" "$dir/cdc" "$dir/logs" "$dir/tmp"
    cat >"$dir/cassandra.yaml" <<EOF
cluster_name: fairbench
num_tokens: 1
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
commitlog_sync: batch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $storage
native_transport_port: $port
native_transport_port_ssl: $tls_port
start_native_transport: true
client_encryption_options:
  enabled: true
  optional: false
  keystore: $TLS_DIR/server.p12
  keystore_password: fairbench
  store_type: PKCS12
  require_client_auth: false
data_file_directories: [$dir/data]
commitlog_directory: $dir/commitlog
saved_caches_directory: $dir/saved_caches
hints_directory: $dir/hints
cdc_raw_directory: $dir/cdc
EOF
    cat >"$dir/logback.xml" <<EOF
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$dir/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
    # shellcheck disable=SC2046
    "$(cassandra_java)" -Xms1g -Xmx1g -XX:+UseG1GC $(cassandra_jvm_flags) \
      -Djava.net.preferIPv4Stack=true -Djava.io.tmpdir="$dir/tmp" -Djna.tmpdir="$dir/tmp" \
      -Dcassandra.config="file://$dir/cassandra.yaml" -Dcassandra.storagedir="$dir" \
      -Dcassandra.logdir="$dir/logs" -Dlogback.configurationFile="$dir/logback.xml" \
      -Dcassandra.jmx.local.port="$jmx" -Dcassandra-foreground=yes \
      -Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=1000 \
      -cp "$CASSANDRA_CACHE/lib/*" org.apache.cassandra.service.CassandraDaemon \
      >"$dir/logs/stdout.log" 2>&1 &
    echo $! >"$state/cassandra.pid"
    wait_until Cassandra "$CASSANDRA_START_SECONDS" "$dir/logs/system.log" \
      cassandra_ready "$(cat "$state/cassandra.pid")" "$dir/logs/system.log"
    pid=$(cat "$state/cassandra.pid")
    kill -0 "$pid" 2>/dev/null && break
    if [ "$attempt" -lt 3 ] && grep -q "Port already in use" "$dir/logs/system.log"; then
      log "Cassandra: a port was taken during start-up, trying others"
      rm -rf "$dir"
      continue
    fi
    tail -30 "$dir/logs/system.log" >&2
    die "Cassandra exited during start-up (log: $dir/logs/system.log)"
  done
  log "Cassandra $CASSANDRA_VERSION on 127.0.0.1:$port (pid $(cat "$state/cassandra.pid"), data $dir, started in $((SECONDS - started)) s)"
  log "Cassandra's TLS-only native transport on 127.0.0.1:$tls_port"
  echo "export FAIRBENCH_TEST_CASSANDRA_URL=cql://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_CASSANDRA_TLS_URL='cql://127.0.0.1:$tls_port?sslmode=verify-full&cacert=$TLS_DIR/ca.pem'"
}
