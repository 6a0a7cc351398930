# Shared shell helpers of the scripts: logging, free loopback ports, running servers as their
# own user, Debian packages, stopping a process by the PID it was started with, and the test
# certificates of the TLS servers.

log() { echo "services: $*" >&2; }
die() { echo "services: $*" >&2; exit 1; }

# The first port from $1 upwards that this process can bind on loopback (bounded search): a
# port an outgoing connection holds as its local end cannot be listened on either, though
# nothing answers on it.
free_port() {
  local port=$1
  for _ in $(seq 1 200); do
    if python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
      echo "$port"
      return 0
    fi
    port=$((port + 1))
  done
  die "no free port from $1"
}

# Runs a command as USER when we are root (servers refuse to run as root), else as ourselves.
as_user() {
  local user=$1
  shift
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$user" -- "$@"
  else
    "$@"
  fi
}

# Installs the Debian packages that are missing; `apt-get update` runs at most once per call
# chain. Never starts the packages' system-wide services.
ensure_packages() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "install: ${missing[*]}" >&2
  if [ -z "${FAIRBENCH_APT_UPDATED:-}" ]; then
    $sudo apt-get update -q >&2
    export FAIRBENCH_APT_UPDATED=1
  fi
  # policy-rc.d keeps the packages from starting their own system-wide servers.
  if [ ! -e /usr/sbin/policy-rc.d ] && [ "$(id -u)" = 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    FAIRBENCH_REMOVE_POLICY=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  if [ -n "${FAIRBENCH_REMOVE_POLICY:-}" ]; then rm -f /usr/sbin/policy-rc.d; fi
}

# Waits (bounded) until "$@" succeeds, failing with the log file's tail.
# A probe must not call die: its output is hidden here, so a message would be lost. A probe
# that can see its server is gone answers "ready" and the caller checks the process.
wait_until() {
  local what=$1 seconds=$2 logfile=$3
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      [ -f "$logfile" ] && tail -30 "$logfile" >&2
      die "$what did not become ready within ${seconds}s"
    fi
    sleep 0.25
  done
}

# Stops the process whose PID is in PIDFILE: SIGNAL first, SIGKILL after 30 s.
stop_pid() {
  local name=$1 pidfile=$2 signal=${3:-TERM}
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$signal" "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) did not stop; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

# The throwaway CA and server certificates of this state folder's TLS servers, made once by
# scripts/tls-certs into STATE/tls (certificates for IP:127.0.0.1 and DNS:localhost, and a wrong
# CA); sets TLS_DIR, and the first time in one `services start` prints their exports.
test_tls() {
  local state=$1
  TLS_DIR=$state/tls
  if [ ! -f "$TLS_DIR/server.pem" ]; then
    "$(dirname "${BASH_SOURCE[0]}")/tls-certs" "$TLS_DIR" || die "scripts/tls-certs could not make the test certificates"
    chmod 755 "$TLS_DIR"
  fi
  if [ -z "${FAIRBENCH_TLS_EXPORTED:-}" ]; then
    echo "export FAIRBENCH_TEST_TLS_CA=$TLS_DIR/ca.pem"
    echo "export FAIRBENCH_TEST_TLS_WRONG_CA=$TLS_DIR/wrong-ca.pem"
    FAIRBENCH_TLS_EXPORTED=1
  fi
}
