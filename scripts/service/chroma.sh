# Chroma from PyPI (`chromadb`; its Rust server is in the wheel), on loopback, with its own data
# folder and telemetry off. Exports FAIRBENCH_TEST_CHROMA_URL.

CHROMA_WHEEL=chromadb==1.5.9
CHROMA_VENV=${CHROMA_VENV:-$HOME/.cache/fairbench/chroma-venv}

install_chroma() {
  if [ ! -x "$CHROMA_VENV/bin/chroma" ]; then
    log "installing $CHROMA_WHEEL into $CHROMA_VENV"
    python3 -m venv "$CHROMA_VENV" || die "cannot create the virtual environment $CHROMA_VENV"
    "$CHROMA_VENV/bin/pip" install -q "$CHROMA_WHEEL" >&2 || die "pip could not install $CHROMA_WHEEL"
  fi
}

chroma_ready() { curl -fsS "http://127.0.0.1:$1/api/v2/heartbeat"; }

# _launch_chroma STATE NAME DIR PORT: one Chroma server, its pid in STATE/NAME.pid, ready.
_launch_chroma() {
  local state=$1 name=$2 dir=$3 port=$4
  [ -x "$CHROMA_VENV/bin/chroma" ] || die "Chroma is not installed (scripts/install-servers chroma)"
  mkdir -p "$dir"
  ANONYMIZED_TELEMETRY=False "$CHROMA_VENV/bin/chroma" run --path "$dir/data" --host 127.0.0.1 \
    --port "$port" >"$dir/server.log" 2>&1 &
  echo $! >"$state/$name.pid"
  wait_until Chroma 60 "$dir/server.log" chroma_ready "$port"
}

start_chroma() {
  local state=$1 dir=$1/chroma port
  port=$(free_port "${FAIRBENCH_CHROMA_PORT:-58000}")
  _launch_chroma "$state" chroma "$dir" "$port"
  log "Chroma on 127.0.0.1:$port (pid $(cat "$state/chroma.pid"), data $dir/data)"
  echo "export FAIRBENCH_TEST_CHROMA_URL=chroma://127.0.0.1:$port"
  echo "export FAIRBENCH_TEST_CHROMA_PID=$(cat "$state/chroma.pid")"
}
