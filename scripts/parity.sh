# Shared helpers of the *-parity scripts: where the fairbench binaries are, the parts of a URL,
# one cell of a results.json, CPU time of a command, interleaved legs and the ratio of medians.
# Sourced, never run. Every script that sources it prints one summary line per comparison:
#   LABEL: fairbench median A/s, CLIENT median B/s, ratio A/B (CPU per op: fairbench X µs,
#   CLIENT Y µs); legs MEDIAN [MIN–MAX] (the ratio of each leg's two runs)

parity_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# This comparison cannot run here: one loud line naming what is missing, and exit 77, which
# scripts/parity-all reports as SKIPPED (never as passed). Only for an independent client or tool
# that is not installed and could not be installed; anything else that fails is a failure.
parity_skip() {
  echo "SKIPPED $(basename "$0"): $*" >&2
  exit 77
}

# Installs Debian packages when a command is missing (scripts/lib.sh's ensure_packages: needs
# root or sudo), or skips: parity_need_command COMMAND PACKAGE…
parity_need_command() {
  local command=$1
  shift
  command -v "$command" >/dev/null && return 0
  (. "$parity_root/scripts/lib.sh" && ensure_packages "$@") || true
  command -v "$command" >/dev/null || parity_skip "$command is missing and Debian's $* could not be installed (needs root or sudo and apt)"
}

# A virtual environment under ~/.cache/fairbench with PyPI wheels, made when the import fails,
# or skips: parity_venv DIR IMPORT PIP_SPEC…
parity_venv() {
  local venv=$1 import=$2
  shift 2
  "$venv/bin/python" -c "import $import" 2>/dev/null && return 0
  echo "installing $* into $venv" >&2
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q "$@"; } >&2 \
    || parity_skip "$* could not be installed into $venv (needs python3-venv and PyPI)"
  "$venv/bin/python" -c "import $import" 2>/dev/null || parity_skip "$venv has no module $import after installing $*"
}

# Each leg of a parity script is one process of each client, interleaved leg by leg: the
# legs are the replicates, so fairbench runs as one process per leg (not --forks).
export FAIRBENCH_FORKS=${FAIRBENCH_FORKS:-1}

# The built binary of a tool: $FAIRBENCH_BIN_DIR/TOOL (default the release build in
# $CARGO_TARGET_DIR, or ./target). CI points FAIRBENCH_BIN_DIR at its debug build.
parity_bin() {
  local dir=${FAIRBENCH_BIN_DIR:-${CARGO_TARGET_DIR:-$parity_root/target}/release}
  [ -x "$dir/$1" ] || {
    echo "no build of $1 in $dir (cargo build --release -p $1, or set FAIRBENCH_BIN_DIR)" >&2
    exit 2
  }
  echo "$dir/$1"
}

# Splits scheme://user:password@host:port/db?… into url_user, url_password, url_host, url_port,
# url_db, and libpq's url_sslmode and url_sslrootcert (each empty when absent).
parity_url() {
  local rest=${1#*://} auth="" hostport
  if [[ $rest == *@* ]]; then auth=${rest%%@*} rest=${rest#*@}; fi
  url_user=${auth%%:*} url_password=""
  [[ $auth == *:* ]] && url_password=${auth#*:}
  hostport=${rest%%/*}
  hostport=${hostport%%\?*}
  url_host=${hostport%%:*} url_port=${hostport##*:}
  url_db=""
  [[ $rest == */* ]] && url_db=${rest#*/} && url_db=${url_db%%\?*}
  url_sslmode="" url_sslrootcert=""
  if [[ $rest == *\?* ]]; then
    local pair
    IFS='&' read -r -a pairs <<<"${rest#*\?}"
    for pair in "${pairs[@]}"; do
      case $pair in
        sslmode=*) url_sslmode=${pair#*=} ;;
        sslrootcert=*) url_sslrootcert=${pair#*=} ;;
      esac
    done
  fi
  return 0
}

# libpq's environment for the URL parity_url read: host, port, user, password, database and its
# TLS (sslmode, sslrootcert), so psql and pgbench reach the server as the tool does.
parity_libpq_env() {
  export PGHOST=$url_host PGPORT=$url_port PGUSER=$url_user PGPASSWORD=$url_password
  export PGDATABASE=${url_db:-postgres}
  if [ -n "$url_sslmode" ]; then export PGSSLMODE=$url_sslmode; fi
  if [ -n "$url_sslrootcert" ]; then export PGSSLROOTCERT=$url_sslrootcert; fi
  return 0
}

# Prints "THROUGHPUT CPU_US_PER_OP" of the first cell of DIR/results.json whose workload starts
# with PREFIX and whose status is ok; fails (with the cell's status and reason) otherwise.
parity_cell() {
  python3 - "$1/results.json" "$2" <<'PY'
import json, sys
path, prefix = sys.argv[1], sys.argv[2]
cells = [c for c in json.load(open(path))["cells"] if c["workload"].startswith(prefix)]
if not cells:
    sys.exit(f"no cell {prefix!r} in {path}")
c = cells[0]
if c["status"] != "ok":
    sys.exit(f"cell {c['workload']!r} of {c['system']} is {c['status']}: {c.get('reason', '')}")
print("%.1f %.2f" % (c["throughput"]["median"], c["client_cpu_ns_per_op"] / 1000))
PY
}

# With PARITY_CLIENT_CPUS set (say 0), parity_pin is `taskset -c CPUS`, for a script to put
# before both clients' commands; empty otherwise. Pin the server to the other cores yourself
# (`taskset -a -p -c 1 PID` for each of its processes): client and server then stop sharing
# cores, and where the kernel places the server's processes no longer moves the legs.
parity_pin=()
if [ -n "${PARITY_CLIENT_CPUS:-}" ]; then parity_pin=(taskset -c "$PARITY_CLIENT_CPUS"); fi

# Runs a command, its output in FILE, and prints the user+system CPU seconds it took.
parity_cpu() {
  local out=$1
  shift
  /usr/bin/time -f "%U %S" -o "$out.cpu" "$@" >"$out" 2>&1 || {
    echo "failed: $* (output in $out):" >&2
    tail -20 "$out" >&2
    return 1
  }
  awk '{print $1 + $2}' "$out.cpu"
}

# CPU µs per operation from CPU seconds and an operation count.
parity_per_op() { python3 -c "print('%.2f' % ($1 * 1e6 / max($2, 1)))"; }

# parity_legs LABEL CLIENT LEGS OURS_FN THEIRS_FN: runs the two functions in LEGS interleaved
# legs, alternating which goes first (A B, B A, …). Each prints "OPS_PER_S CPU_US_PER_OP".
# Prints every leg and the summary line; appends the summary to $PARITY_SUMMARY when set.
parity_legs() {
  local label=$1 client=$2 legs=$3 ours_fn=$4 theirs_fn=$5 a b leg
  local -a ours_ops ours_cpu theirs_ops theirs_cpu
  for leg in $(seq 1 "$legs"); do
    if [ $((leg % 2)) = 1 ]; then a=$($ours_fn) && b=$($theirs_fn) || return 1
    else b=$($theirs_fn) && a=$($ours_fn) || return 1; fi
    echo "$label leg $leg (load $(cut -d' ' -f1 /proc/loadavg)): fairbench ${a% *}/s (${a#* } µs CPU/op), $client ${b% *}/s (${b#* } µs CPU/op)"
    ours_ops+=("${a% *}") ours_cpu+=("${a#* }") theirs_ops+=("${b% *}") theirs_cpu+=("${b#* }")
  done
  local line
  line=$(python3 - "$label" "$client" "${ours_ops[*]}" "${theirs_ops[*]}" "${ours_cpu[*]}" "${theirs_cpu[*]}" <<'PY'
import statistics as s, sys
label, client = sys.argv[1:3]
ours, theirs, ours_cpu, theirs_cpu = ([float(x) for x in a.split()] for a in sys.argv[3:7])
ratio = s.median(ours) / s.median(theirs) if s.median(theirs) else float("nan")
# Each leg's two runs are next to each other in time, so a change of the machine's state
# between legs moves both: the ratios of the legs show the spread the medians hide.
legs = [o / t for o, t in zip(ours, theirs) if t]
spread = f"; legs {s.median(legs):.3f} [{min(legs):.3f}–{max(legs):.3f}]" if legs else ""
print(f"{label}: fairbench median {s.median(ours):,.1f}/s, {client} median {s.median(theirs):,.1f}/s, "
      f"ratio {ratio:.3f} (CPU per op: fairbench {s.median(ours_cpu):.1f} µs, {client} {s.median(theirs_cpu):.1f} µs){spread}")
PY
  )
  echo "$line"
  if [ -n "${PARITY_SUMMARY:-}" ]; then echo "$line" >>"$PARITY_SUMMARY"; fi
}

# The path of one of the Go clients in scripts/parity-clients/go (cqlkv, mqttpub), built into
# ~/.cache/fairbench/parity-clients when missing or older than its source (modules from the
# Go module proxy, cached there too).
parity_go_client() {
  local src=$parity_root/scripts/parity-clients/go cache=$HOME/.cache/fairbench/parity-clients
  local bin=$cache/bin/$1
  if [ ! -x "$bin" ] || [ "$src/$1/main.go" -nt "$bin" ] || [ "$src/go.sum" -nt "$bin" ]; then
    command -v go >/dev/null || parity_skip "building $1 needs Go (https://go.dev/dl/), which is not on PATH"
    echo "building $1 (Go) into $cache/bin" >&2
    (cd "$src" && GOPATH=$cache/go GOFLAGS=-modcacherw go build -p 1 -trimpath -o "$cache/bin/" "./$1") >&2
  fi
  echo "$bin"
}
