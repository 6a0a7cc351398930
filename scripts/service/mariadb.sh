# MariaDB from Debian, on loopback, binlog on with sync_binlog=1 (seed 000's C0 "binlog only");
# plus a second instance with the state folder's test certificate and require_secure_transport=ON
# (TLS only over TCP), its data directory a cold copy of the first one's fresh install.
# Exports FAIRBENCH_TEST_MYSQL_URL and FAIRBENCH_TEST_MYSQL_TLS_URL (ssl-mode=VERIFY_IDENTITY with
# the test CA).

install_mariadb() {
  ensure_packages mariadb-server mariadb-client openssl
}

# Starts mariadbd on DIR/data (as USER), waits for it, and creates the fairbench user; the PID
# goes to STATE/NAME.pid. Extra arguments go to mariadbd.
_start_mariadbd() {
  local state=$1 name=$2 dir=$3 port=$4 user=$5
  shift 5
  /usr/sbin/mariadbd --no-defaults --user="$user" --datadir="$dir/data" --bind-address=127.0.0.1 \
    --port="$port" --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" \
    --tmpdir="$dir/tmp" --skip-name-resolve --max-connections=200 "$@" >/dev/null 2>&1 &
  echo $! >"$state/$name.pid"
  wait_until "MariaDB ($name)" 60 "$dir/error.log" mariadb-admin --no-defaults --socket="$dir/mariadb.sock" -u root ping
  mariadb --no-defaults --socket="$dir/mariadb.sock" -u root -e "
    CREATE USER 'fairbench'@'127.0.0.1' IDENTIFIED BY '$PASSWORD';
    GRANT ALL PRIVILEGES ON *.* TO 'fairbench'@'127.0.0.1';" \
    || die "MariaDB ($name) did not accept the fairbench user"
}

start_mariadb() {
  local state=$1 dir=$1/mariadb port user=mysql
  [ -x /usr/sbin/mariadbd ] || die "MariaDB is not installed (scripts/install-servers mariadb)"
  port=$(free_port "${FAIRBENCH_MARIADB_PORT:-53306}")
  # Its own temporary folder: a MariaDB starting with the shared /tmp removes other servers'
  # #sql temporary tables there.
  mkdir -p "$dir/tmp"
  if [ "$(id -u)" = 0 ]; then chown -R mysql: "$dir"; else user=$(id -un); fi
  mariadb-install-db --user="$user" --datadir="$dir/data" --tmpdir="$dir/tmp" --auth-root-authentication-method=socket \
    --skip-test-db >"$dir/install.log" 2>&1 \
    || { cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
  _prepare_mariadb_tls "$state" "$user"
  _start_mariadbd "$state" mariadb "$dir" "$port" "$user" --log-bin="$dir/data/binlog" --server-id=1 \
    --sync-binlog=1 --innodb-flush-log-at-trx-commit=1
  log "MariaDB on 127.0.0.1:$port (pid $(cat "$state/mariadb.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_MYSQL_URL=mysql://fairbench:$PASSWORD@127.0.0.1:$port/mysql"
  _start_mariadb_tls "$state" "$user"
}

# The TLS instance's folder: a cold copy of the fresh install, its key and certificate.
_prepare_mariadb_tls() {
  local state=$1 user=$2 dir=$1/mariadb-tls
  test_tls "$state"
  mkdir -p "$dir/tmp"
  cp -a "$state/mariadb/data" "$dir/data"
  cp "$TLS_DIR/server.pem" "$TLS_DIR/server.key" "$TLS_DIR/ca.pem" "$dir/"
  if [ "$(id -u)" = 0 ]; then chown -R "$user": "$dir"; fi
}

_start_mariadb_tls() {
  local state=$1 user=$2 dir=$1/mariadb-tls port
  port=$(free_port "${FAIRBENCH_MARIADB_TLS_PORT:-53326}")
  _start_mariadbd "$state" mariadb-tls "$dir" "$port" "$user" --ssl-cert="$dir/server.pem" \
    --ssl-key="$dir/server.key" --ssl-ca="$dir/ca.pem" --require-secure-transport=ON
  log "MariaDB, TLS only, on 127.0.0.1:$port (pid $(cat "$state/mariadb-tls.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_MYSQL_TLS_URL='mysql://fairbench:$PASSWORD@127.0.0.1:$port/mysql?ssl-mode=VERIFY_IDENTITY&ssl-ca=$TLS_DIR/ca.pem'"
}

stop_mariadb() {
  stop_pid MariaDB "$1/mariadb.pid"
  stop_pid "MariaDB (TLS)" "$1/mariadb-tls.pid"
}

crash_mariadb() {
  stop_pid MariaDB "$1/mariadb.pid" KILL
  stop_pid "MariaDB (TLS)" "$1/mariadb-tls.pid" KILL
}
