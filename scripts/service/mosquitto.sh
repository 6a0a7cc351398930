# Mosquitto from Debian, on loopback, configured as seed 000 measured it (persistence off,
# max_inflight_messages 64, max_queued_messages 1000), plus a second instance that requires a
# password and takes packets of at most 4 KiB, for the bad-credentials and payload-size checks.
# The first instance also has a TLS listener (a second port of the same process: the certificate
# options belong to the listener they follow) with the state folder's test certificate.
# Exports FAIRBENCH_TEST_MOSQUITTO_URL, FAIRBENCH_TEST_MOSQUITTO_PID,
# FAIRBENCH_TEST_MOSQUITTO_AUTH_URL and FAIRBENCH_TEST_MOSQUITTO_TLS_URL (mqtts://, with the
# test CA as cacert=; the same broker and PID as FAIRBENCH_TEST_MOSQUITTO_URL).

install_mosquitto() {
  ensure_packages mosquitto mosquitto-clients openssl
}

# Writes a config file and starts one instance; its PID goes to $state/$name.pid.
_start_mosquitto_instance() {
  local state=$1 name=$2 port=$3 extra=$4 dir=$1/mosquitto
  cat >"$dir/$name.conf" <<CONF
listener $port 127.0.0.1
persistence false
max_inflight_messages 64
max_queued_messages 1000
log_dest stderr
$extra
CONF
  chmod 644 "$dir/$name.conf"
  /usr/sbin/mosquitto -c "$dir/$name.conf" >"$dir/$name.log" 2>&1 &
  echo $! >"$state/$name.pid"
  wait_until "Mosquitto ($name)" 20 "$dir/$name.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
}

start_mosquitto() {
  local state=$1 dir=$1/mosquitto port auth_port tls_port
  [ -x /usr/sbin/mosquitto ] || die "Mosquitto is not installed (scripts/install-servers mosquitto)"
  mkdir -p "$dir"
  chmod 755 "$dir"
  test_tls "$state"
  port=$(free_port "${FAIRBENCH_MOSQUITTO_PORT:-41883}")
  tls_port=$(free_port "${FAIRBENCH_MOSQUITTO_TLS_PORT:-48883}")
  _start_mosquitto_instance "$state" mosquitto "$port" "allow_anonymous true
listener $tls_port 127.0.0.1
cafile $TLS_DIR/ca.pem
certfile $TLS_DIR/server.pem
keyfile $TLS_DIR/server.key
tls_version tlsv1.2"
  auth_port=$(free_port $((port + 1)))
  : >"$dir/passwords"
  mosquitto_passwd -b "$dir/passwords" fairbench "$PASSWORD" >/dev/null 2>&1 \
    || die "mosquitto_passwd could not write $dir/passwords"
  chmod 644 "$dir/passwords"
  _start_mosquitto_instance "$state" mosquitto-auth "$auth_port" \
    "allow_anonymous false
password_file $dir/passwords
max_packet_size 4096"
  log "Mosquitto on 127.0.0.1:$port and TLS on :$tls_port (pid $(cat "$state/mosquitto.pid")), with a password on :$auth_port"
  echo "export FAIRBENCH_TEST_MOSQUITTO_URL=mqtt://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_MOSQUITTO_PID=$(cat "$state/mosquitto.pid")"
  echo "export FAIRBENCH_TEST_MOSQUITTO_AUTH_URL=mqtt://fairbench:$PASSWORD@127.0.0.1:$auth_port"
  echo "export FAIRBENCH_TEST_MOSQUITTO_TLS_URL='mqtts://127.0.0.1:$tls_port?cacert=$TLS_DIR/ca.pem'"
}

stop_mosquitto() {
  stop_pid Mosquitto "$1/mosquitto.pid"
  stop_pid "Mosquitto (password)" "$1/mosquitto-auth.pid"
}

crash_mosquitto() {
  stop_pid Mosquitto "$1/mosquitto.pid" KILL
  stop_pid "Mosquitto (password)" "$1/mosquitto-auth.pid" KILL
}
