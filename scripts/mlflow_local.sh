#!/usr/bin/env bash
# A local MLflow tracking server with a SQLite backend, for `registry: {backend: mlflow}` and its tests.
#
#   scripts/mlflow_local.sh start    start it in the background on a free port, wait until healthy,
#                                    print its tracking URI (also in $MLFLOW_HOME/uri)
#   scripts/mlflow_local.sh env      print the export for your shell: eval "$(scripts/mlflow_local.sh env)"
#   scripts/mlflow_local.sh status   its URI and pid, or "not running"
#   scripts/mlflow_local.sh stop     stop the server this script started
#
# State lives in $MLFLOW_HOME (default .mlflow/ at the repository root): mlflow.db (runs, registered models,
# aliases), artifacts/ (the uploaded model folders, served by the server), server.log and the pid file.
# MLFLOW_PORT picks the port (default: the first free one from 5000). Needs the `mlflow` extra:
# pip install -e '.[mlflow]'.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export MLFLOW_HOME="${MLFLOW_HOME:-$ROOT/.mlflow}"
PY="${MLFLOW_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || { echo "mlflow_local: $PY not found; run scripts/setup.sh first" >&2; exit 2; }
PIDFILE="$MLFLOW_HOME/server.pid"
mkdir -p "$MLFLOW_HOME"

# A process that exited but was not reaped yet (a zombie) still answers kill -0: it counts as stopped.
# It stays a zombie when its parent is a Python process that made itself a child subreaper (the
# verifier pool does, for the sandbox's orphans) and never waits for it.
running() { kill -0 "$1" 2>/dev/null && ! grep -qs '^State:[[:space:]]*Z' "/proc/$1/status"; }
# Whether the process group PGID (a server started under set -m leads its own) has a member that is
# not a zombie: its leader may be gone while a child it started still runs.
group_running() { ps -eo pgid=,stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {found = 1} END {exit !found}'; }
pid_alive() { [ -f "$PIDFILE" ] && running "$(cat "$PIDFILE")"; }

free_port() {
    "$PY" - <<'EOF'
import socket
for port in range(5000, 5100):
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) != 0:
            print(port)
            break
EOF
}

cmd_start() {
    if pid_alive; then echo "mlflow_local: already running (pid $(cat "$PIDFILE")) at $(cat "$MLFLOW_HOME/uri")"; return 0; fi
    "$PY" -c "import mlflow" 2>/dev/null || { echo "mlflow_local: mlflow is not installed; pip install -e '.[mlflow]'" >&2; exit 2; }
    local port="${MLFLOW_PORT:-$(free_port)}"
    local uri="http://127.0.0.1:$port"
    set -m  # own process group, so stop reaches the server's workers too
    nohup "$PY" -m mlflow server --host 127.0.0.1 --port "$port" --workers 1 \
        --backend-store-uri "sqlite:///$MLFLOW_HOME/mlflow.db" \
        --artifacts-destination "$MLFLOW_HOME/artifacts" >"$MLFLOW_HOME/server.log" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    set +m
    echo "$uri" >"$MLFLOW_HOME/uri"
    for _ in $(seq 240); do
        if "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$uri" 2>/dev/null; then
            echo "mlflow_local: server up at $uri (pid $(cat "$PIDFILE"), log $MLFLOW_HOME/server.log)"
            return 0
        fi
        pid_alive || break
        sleep 0.5
    done
    echo "mlflow_local: server not healthy at $uri after 120 s; see $MLFLOW_HOME/server.log" >&2
    tail -n 20 "$MLFLOW_HOME/server.log" >&2 || true
    cmd_stop >/dev/null
    exit 1
}

cmd_stop() {  # SIGTERM the process group, then SIGKILL after 30 s
    local pid; pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [ -z "$pid" ] || ! { running "$pid" || group_running "$pid"; }; then
        rm -f "$PIDFILE"; echo "mlflow_local: not running"; return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 60); do running "$pid" || group_running "$pid" || break; sleep 0.5; done
    if running "$pid" || group_running "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$PIDFILE"
    echo "mlflow_local: stopped (pid $pid)"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    env) echo "export MLFLOW_TRACKING_URI='$(cat "$MLFLOW_HOME/uri" 2>/dev/null || echo http://127.0.0.1:5000)'" ;;
    status) if pid_alive; then echo "running: $(cat "$MLFLOW_HOME/uri") (pid $(cat "$PIDFILE"))"; else echo "not running"; fi ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
esac
