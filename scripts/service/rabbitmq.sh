# RabbitMQ from Debian with its MQTT plugin, on loopback (AMQP, MQTT, Erlang distribution and
# epmd all on 127.0.0.1), with its own data directory. It takes about 20 s to start. Its epmd
# is started here, on a port of its own, so it can be stopped by its PID like the node.
# Exports FAIRBENCH_TEST_RABBITMQ_URL and FAIRBENCH_TEST_RABBITMQ_PID.

install_rabbitmq() {
  ensure_packages rabbitmq-server
}

start_rabbitmq() {
  local state=$1 dir=$1/rabbitmq amqp mqtt epmd_port
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || die "RabbitMQ is not installed (scripts/install-servers rabbitmq)"
  mkdir -p "$dir/mnesia" "$dir/log" "$dir/home"
  amqp=$(free_port "${FAIRBENCH_RABBITMQ_PORT:-25672}")
  mqtt=$(free_port $((amqp + 1)))
  epmd_port=$(free_port $((mqtt + 1)))
  cat >"$dir/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$amqp
mqtt.listeners.tcp.1 = 127.0.0.1:$mqtt
mqtt.allow_anonymous = true
distribution.listener.interface = 127.0.0.1
loopback_users = none
CONF
  echo "[rabbitmq_mqtt]." >"$dir/enabled_plugins"
  if [ "$(id -u)" = 0 ]; then chown -R rabbitmq: "$dir"; fi
  # epmd runs as whoever starts it (it only maps node names to ports), so $! is its own PID.
  epmd -address 127.0.0.1 -port "$epmd_port" >"$dir/log/epmd.log" 2>&1 &
  echo $! >"$state/rabbitmq-epmd.pid"
  (
    export HOME=$dir/home RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf \
      RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins RABBITMQ_MNESIA_BASE=$dir/mnesia \
      RABBITMQ_LOG_BASE=$dir/log RABBITMQ_NODENAME=rabbit@localhost \
      RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$amqp RABBITMQ_DIST_PORT=$((amqp + 20000)) \
      RABBITMQ_PID_FILE=$dir/rabbit.pid ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=$epmd_port
    # runuser resets HOME to the rabbitmq user's; env puts it back, so the Erlang cookie stays
    # in the state directory.
    as_user rabbitmq env HOME="$dir/home" /usr/lib/rabbitmq/bin/rabbitmq-server
  ) >"$dir/log/server.out" 2>&1 </dev/null &
  # (The whole launcher is redirected: one left holding the caller's stdout would keep
  # `eval "$(scripts/services start …)"` waiting for ever.)
  echo $! >"$state/rabbitmq-launcher.pid"
  wait_until RabbitMQ 180 "$dir/log/server.out" bash -c "exec 3<>/dev/tcp/127.0.0.1/$mqtt"
  wait_until "RabbitMQ's pid file" 20 "$dir/log/server.out" test -s "$dir/rabbit.pid"
  cp "$dir/rabbit.pid" "$state/rabbitmq.pid"
  log "RabbitMQ MQTT on 127.0.0.1:$mqtt (pid $(cat "$state/rabbitmq.pid"), data $dir/mnesia)"
  echo "export FAIRBENCH_TEST_RABBITMQ_URL=mqtt://127.0.0.1:$mqtt"
  echo "export FAIRBENCH_TEST_RABBITMQ_PID=$(cat "$state/rabbitmq.pid")"
}

stop_rabbitmq() {
  stop_pid RabbitMQ "$1/rabbitmq.pid"
  stop_pid "RabbitMQ launcher" "$1/rabbitmq-launcher.pid"
  stop_pid "RabbitMQ epmd" "$1/rabbitmq-epmd.pid"
}

crash_rabbitmq() {
  stop_pid RabbitMQ "$1/rabbitmq.pid" KILL
  stop_rabbitmq "$1"
}
