# A PostgreSQL 15 primary with two streaming standbys (s1, s2) on loopback, for scripts/cluster.
# Layout under STATE/pg: NODE/data, NODE/server.log, NODE.pid, NODE.port for primary, s1, s2.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

pg_port() { cat "$2/pg/$1.port"; }

# psql on the primary over its Unix socket (trust for local connections).
pg_sql() {
  local state=$1
  shift
  as_user postgres "$PG_BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h "$state/pg/primary" \
    -p "$(pg_port primary "$state")" -U fairbench -d postgres -c "$@"
}

pg_running() { [ -f "$2/pg/$1.pid" ] && kill -0 "$(cat "$2/pg/$1.pid")" 2>/dev/null; }

pg_start_node() {
  local node=$1 state=$2 dir=$2/pg/$1
  as_user postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
    -o "-p $(pg_port "$node" "$state") -c listen_addresses=127.0.0.1 -k $dir" start >/dev/null \
    || { tail -30 "$dir/server.log" >&2; die "PostgreSQL $node did not start"; }
  head -1 "$dir/data/postmaster.pid" >"$state/pg/$node.pid"
}

# SIGINT is PostgreSQL's fast shutdown.
pg_stop_node() { stop_pid "PostgreSQL $1" "$2/pg/$1.pid" INT; }

# Copies the primary into a new standby on its own slot, named after the slot.
pg_make_standby() {
  local node=$1 state=$2 dir=$2/pg/$1 port
  port=$(free_port $(($(pg_port primary "$state") + 1)))
  echo "$port" >"$state/pg/$node.port"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  pg_sql "$state" "SELECT pg_create_physical_replication_slot('$node')" >/dev/null
  as_user postgres env PGPASSFILE="$state/pg/pgpass" "$PG_BIN/pg_basebackup" -h 127.0.0.1 \
    -p "$(pg_port primary "$state")" -U fairbench -D "$dir/data" -X stream -S "$node" -R -c fast \
    >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; die "pg_basebackup of $node failed"; }
  # Later lines win: the standby's own name and slot, the password from a file, not the config.
  cat >>"$dir/data/postgresql.auto.conf" <<CONF
primary_conninfo = 'host=127.0.0.1 port=$(pg_port primary "$state") user=fairbench passfile=$state/pg/pgpass application_name=$node'
primary_slot_name = '$node'
CONF
  pg_start_node "$node" "$state"
}

# Waits (bounded) until exactly the named standbys stream from the primary and nothing else does.
pg_wait_standbys() {
  local state=$1 want=$2 names=$3
  local deadline=$((SECONDS + 60)) got
  while :; do
    got=$(pg_sql "$state" "SELECT coalesce(string_agg(application_name, ' ' ORDER BY application_name), '')
      FROM pg_stat_replication WHERE state = 'streaming'")
    [ "$got" = "$want" ] && [ "$(pg_sql "$state" 'SHOW synchronous_standby_names')" = "$names" ] && return 0
    [ $SECONDS -ge $deadline ] && die "PostgreSQL standbys streaming: '$got', expected '$want'"
    sleep 0.25
  done
}

postgres_up() {
  local state=$1 dir=$1/pg/primary port
  [ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed (scripts/install-servers postgres)"
  [ -e "$state/pg/primary.pid" ] && die "a PostgreSQL cluster already runs in $state"
  mkdir -p "$dir"
  printf '%s\n' "$PASSWORD" >"$state/pg/password"
  printf '127.0.0.1:*:*:fairbench:%s\n' "$PASSWORD" >"$state/pg/pgpass"
  chmod 600 "$state/pg/pgpass"
  [ "$(id -u)" = 0 ] && chown -R postgres: "$state/pg"
  as_user postgres "$PG_BIN/initdb" -D "$dir/data" --username=fairbench --pwfile="$state/pg/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  cat >>"$dir/data/postgresql.conf" <<CONF
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
max_connections = 200
synchronous_standby_names = ''
CONF
  port=$(free_port "${FAIRBENCH_CLUSTER_PG_PORT:-56500}")
  echo "$port" >"$state/pg/primary.port"
  pg_start_node primary "$state"
  pg_make_standby s1 "$state"
  pg_make_standby s2 "$state"
  pg_wait_standbys "$state" "s1 s2" ""
  log "PostgreSQL primary on 127.0.0.1:$port, standbys s1 on 127.0.0.1:$(pg_port s1 "$state") and s2 on 127.0.0.1:$(pg_port s2 "$state") (asynchronous until configured)"
  {
    echo "export FAIRBENCH_CLUSTER_POSTGRES_URL=postgres://fairbench:$PASSWORD@127.0.0.1:$port/postgres"
    echo "export FAIRBENCH_CLUSTER_POSTGRES_REPLICA1=127.0.0.1:$(pg_port s1 "$state")"
    echo "export FAIRBENCH_CLUSTER_POSTGRES_REPLICA2=127.0.0.1:$(pg_port s2 "$state")"
  } | tee "$state/pg/env"
}

postgres_config() {
  local config=$1 state=$2 names want node
  [ -f "$state/pg/primary.port" ] || die "no PostgreSQL cluster in $state (scripts/cluster postgres up $state)"
  case "$config" in
    C0) names='' want='' ;;
    C1) names='FIRST 1 (s1)' want='s1' ;;
    C2) names='' want='s1' ;;
    C3) names='FIRST 2 (s1, s2)' want='s1 s2' ;;
    C4) names='ANY 1 (s1, s2)' want='s1 s2' ;;
  esac
  # Standbys a commit will wait for are started before the primary is told to wait for them.
  for node in $want; do pg_running "$node" "$state" || pg_start_node "$node" "$state"; done
  pg_sql "$state" "ALTER SYSTEM SET synchronous_standby_names = '$names'" >/dev/null
  pg_sql "$state" "SELECT pg_reload_conf()" >/dev/null
  for node in s1 s2; do
    case " $want " in *" $node "*) ;; *) pg_stop_node "$node" "$state" ;; esac
  done
  pg_wait_standbys "$state" "$want" "$names"
  log "PostgreSQL switched to $config: synchronous_standby_names='$names', standbys running: ${want:-none}"
}

postgres_stop_replica() { pg_stop_node "s$1" "$2"; }

postgres_down() {
  local state=$1 node
  for node in s2 s1 primary; do pg_stop_node "$node" "$state"; done
}
