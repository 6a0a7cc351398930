# A MariaDB primary with two GTID replicas (r1, r2) on loopback, for scripts/cluster. Every node
# keeps seed 000's C0 settings (binlog with sync_binlog=1, innodb_flush_log_at_trx_commit=1);
# the replicas ask for semi-sync and sync their relay log per event, so a semi-sync
# acknowledgement means the transaction is on the replica's disk.
# Layout under STATE/mdb: NODE/data, NODE/error.log, NODE/mariadb.sock, NODE.pid, NODE.port.

mdb_port() { cat "$2/mdb/$1.port"; }

# SQL as root over a node's Unix socket.
mdb_sql() {
  local node=$1 state=$2
  shift 2
  mariadb --no-defaults --socket="$state/mdb/$node/mariadb.sock" -u root -N -B -e "$@"
}

mdb_start_node() {
  local node=$1 state=$2 id=$3 dir=$2/mdb/$1 user=mysql port
  shift 3
  port=$(mdb_port "$node" "$state")
  [ "$(id -u)" = 0 ] || user=$(id -un)
  /usr/sbin/mariadbd --no-defaults --user="$user" --datadir="$dir/data" --bind-address=127.0.0.1 \
    --port="$port" --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" \
    --tmpdir="$dir/tmp" --skip-name-resolve --server-id="$id" --log-bin="$dir/data/binlog" --relay-log="$dir/data/relay" \
    --binlog-format=ROW --sync-binlog=1 --innodb-flush-log-at-trx-commit=1 --max-connections=200 \
    --report-host=127.0.0.1 --report-port="$port" "$@" >/dev/null 2>&1 &
  echo $! >"$state/mdb/$node.pid"
  wait_until "MariaDB $node" 60 "$dir/error.log" \
    mariadb-admin --no-defaults --socket="$dir/mariadb.sock" -u root ping
  # Not binlogged: each node has the same user without replicating its creation.
  mdb_sql "$node" "$state" "SET sql_log_bin = 0;
    CREATE USER IF NOT EXISTS 'fairbench'@'127.0.0.1' IDENTIFIED BY '$PASSWORD';
    GRANT ALL PRIVILEGES ON *.* TO 'fairbench'@'127.0.0.1';" || die "MariaDB $node did not accept the fairbench user"
}

# Waits (bounded) until the primary serves exactly `want` replicas, `clients` of them semi-sync.
mdb_wait_replicas() {
  local state=$1 want=$2 clients=$3
  local deadline=$((SECONDS + 60)) dumps semi
  while :; do
    dumps=$(mdb_sql primary "$state" "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
    semi=$(mdb_sql primary "$state" "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'" | cut -f2)
    [ "$dumps" = "$want" ] && { [ -z "$clients" ] || [ "$semi" = "$clients" ]; } && return 0
    [ $SECONDS -ge $deadline ] && die "MariaDB replicas connected: $dumps ($semi semi-sync), expected $want ($clients)"
    sleep 0.25
  done
}

# Waits (bounded) until a replica has applied everything in the primary's binlog.
mdb_wait_caught_up() {
  local node=$1 state=$2 deadline=$((SECONDS + 120)) primary replica
  while :; do
    primary=$(mdb_sql primary "$state" "SELECT @@gtid_binlog_pos")
    replica=$(mdb_sql "$node" "$state" "SELECT @@gtid_slave_pos")
    [ "$primary" = "$replica" ] && return 0
    [ $SECONDS -ge $deadline ] && die "MariaDB $node is at GTID '$replica', the primary at '$primary'"
    sleep 0.25
  done
}

mariadb_up() {
  local state=$1 port node id=1
  [ -x /usr/sbin/mariadbd ] || die "MariaDB is not installed (scripts/install-servers mariadb)"
  [ -e "$state/mdb/primary.pid" ] && die "a MariaDB cluster already runs in $state"
  # Every node keeps its temporary files in its own folder: a MariaDB starting with the shared
  # /tmp removes other servers' #sql temporary tables there (and a concurrent install fails).
  mkdir -p "$state/mdb/primary/tmp" "$state/mdb/r1/tmp" "$state/mdb/r2/tmp"
  [ "$(id -u)" = 0 ] && chown -R mysql: "$state/mdb"
  # One installed data directory, copied to every node before any starts.
  mariadb-install-db --user="$([ "$(id -u)" = 0 ] && echo mysql || id -un)" --datadir="$state/mdb/primary/data" \
    --tmpdir="$state/mdb/primary/tmp" \
    --auth-root-authentication-method=socket --skip-test-db >"$state/mdb/install.log" 2>&1 \
    || { cat "$state/mdb/install.log" >&2; die "mariadb-install-db failed"; }
  for node in r1 r2; do cp -a "$state/mdb/primary/data" "$state/mdb/$node/"; done
  [ "$(id -u)" = 0 ] && chown -R mysql: "$state/mdb"
  port=${FAIRBENCH_CLUSTER_MARIADB_PORT:-53500}
  for node in primary r1 r2; do
    port=$(free_port "$port")
    echo "$port" >"$state/mdb/$node.port"
    if [ "$node" = primary ]; then
      mdb_start_node primary "$state" 1 --rpl-semi-sync-master-enabled=OFF
    else
      mdb_start_node "$node" "$state" "$id" --rpl-semi-sync-slave-enabled=ON --sync-relay-log=1 --read-only=ON
      mdb_sql "$node" "$state" "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$(mdb_port primary "$state"),
        MASTER_USER='fairbench', MASTER_PASSWORD='$PASSWORD', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
        START SLAVE;"
    fi
    id=$((id + 1))
    port=$((port + 1))
  done
  mdb_wait_replicas "$state" 2 ""
  log "MariaDB primary on 127.0.0.1:$(mdb_port primary "$state"), replicas r1 on 127.0.0.1:$(mdb_port r1 "$state") and r2 on 127.0.0.1:$(mdb_port r2 "$state") (asynchronous until configured)"
  {
    echo "export FAIRBENCH_CLUSTER_MARIADB_URL=mysql://fairbench:$PASSWORD@127.0.0.1:$(mdb_port primary "$state")/mysql"
    echo "export FAIRBENCH_CLUSTER_MARIADB_REPLICA1=127.0.0.1:$(mdb_port r1 "$state")"
    echo "export FAIRBENCH_CLUSTER_MARIADB_REPLICA2=127.0.0.1:$(mdb_port r2 "$state")"
  } | tee "$state/mdb/env"
}

mariadb_config() {
  local config=$1 state=$2 semi want node clients
  [ -f "$state/mdb/primary.port" ] || die "no MariaDB cluster in $state (scripts/cluster mariadb up $state)"
  case "$config" in
    C0) semi=OFF want='' ;;
    C1) semi=ON want='r1' ;;
    C2) semi=OFF want='r1' ;;
    C3 | C4) semi=ON want='r1 r2' ;;
  esac
  mdb_sql primary "$state" "SET GLOBAL rpl_semi_sync_master_enabled = $semi"
  # Replicas reconnect so that each registers with the primary's current semi-sync setting.
  for node in r1 r2; do
    case " $want " in
      *" $node "*) mdb_sql "$node" "$state" "STOP SLAVE; SET GLOBAL rpl_semi_sync_slave_enabled = ON; START SLAVE" ;;
      *) mdb_sql "$node" "$state" "STOP SLAVE" ;;
    esac
  done
  set -- $want
  clients=""
  [ "$semi" = ON ] && clients=$#
  mdb_wait_replicas "$state" "$#" "$clients"
  # A replica stopped for a while first replays what it missed; until it has, the primary's
  # commits would wait for acknowledgements of events it has not reached and time out.
  for node in $want; do mdb_wait_caught_up "$node" "$state"; done
  log "MariaDB switched to $config: semi-sync $semi at the primary, replicating to: ${want:-none}"
}

mariadb_stop_replica() { mdb_sql "r$1" "$2" "STOP SLAVE"; }

mariadb_down() {
  local state=$1 node
  for node in r2 r1 primary; do stop_pid "MariaDB $node" "$state/mdb/$node.pid"; done
}
