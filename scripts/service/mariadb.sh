# MariaDB from Debian, on loopback, binlog on with sync_binlog=1 (seed 000's C0 "binlog only").
# Exports FAIRBENCH_TEST_MYSQL_URL.

install_mariadb() {
  ensure_packages mariadb-server mariadb-client
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
  /usr/sbin/mariadbd --no-defaults --user="$user" --datadir="$dir/data" --bind-address=127.0.0.1 \
    --port="$port" --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" \
    --tmpdir="$dir/tmp" --skip-name-resolve --log-bin="$dir/data/binlog" --server-id=1 --sync-binlog=1 \
    --innodb-flush-log-at-trx-commit=1 --max-connections=200 >/dev/null 2>&1 &
  echo $! >"$state/mariadb.pid"
  wait_until MariaDB 60 "$dir/error.log" mariadb-admin --no-defaults --socket="$dir/mariadb.sock" -u root ping
  mariadb --no-defaults --socket="$dir/mariadb.sock" -u root -e "
    CREATE USER 'fairbench'@'127.0.0.1' IDENTIFIED BY '$PASSWORD';
    GRANT ALL PRIVILEGES ON *.* TO 'fairbench'@'127.0.0.1';" \
    || die "MariaDB did not accept the fairbench user"
  log "MariaDB on 127.0.0.1:$port (pid $(cat "$state/mariadb.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_MYSQL_URL=mysql://fairbench:$PASSWORD@127.0.0.1:$port/mysql"
}
