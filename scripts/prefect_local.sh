#!/usr/bin/env bash
# Local Prefect server + process work pool + worker for scheduled retraining (Prefect 3.9).
#
#   scripts/prefect_local.sh server   start the server in the background, wait until healthy
#   scripts/prefect_local.sh pool     create the process work pool named in prefect.yaml (idempotent)
#   scripts/prefect_local.sh deploy [ARGS]   prefect deploy --all (the scheduled and smoke deployments),
#                                     or with ARGS, e.g. --name smoke, only those
#   scripts/prefect_local.sh worker   start a worker on the pool in the background
#   scripts/prefect_local.sh up       all four, in that order
#   scripts/prefect_local.sh run [DEPLOYMENT]   prefect deployment run ... --watch (default retrain/smoke)
#   scripts/prefect_local.sh env      print the exports for your shell: eval "$(scripts/prefect_local.sh env)"
#   scripts/prefect_local.sh cli ARGS any prefect command against this server, e.g. cli deployment ls
#   scripts/prefect_local.sh alerts --webhook URL | --block TYPE/NAME
#                                     automations that tell the owner of a failed night or a kept champion
#   scripts/prefect_local.sh status   server health and the pids this script started
#   scripts/prefect_local.sh stop     stop the worker and the server this script started
#
# State lives in $PREFECT_HOME (default .prefect/ at the repository root): the SQLite database,
# server.log / worker.log and the pid files. PREFECT_PORT picks the port (default 4200).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

export PREFECT_HOME="${PREFECT_HOME:-$ROOT/.prefect}"
PORT="${PREFECT_PORT:-4200}"
export PREFECT_API_URL="http://127.0.0.1:${PORT}/api"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
export PREFECT_SERVER_ALLOW_EPHEMERAL_MODE=false   # fail fast instead of starting a temporary server
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
POOL="${PREFECT_POOL:-rlvrflow-process}"
BIN="$ROOT/.venv/bin"
[ -x "$BIN/prefect" ] || { echo "prefect_local: $BIN/prefect not found; run scripts/setup.sh first" >&2; exit 2; }
export PATH="$BIN:$PATH"   # the worker runs flows under this Python
mkdir -p "$PREFECT_HOME"

# A process that exited but was not reaped yet (a zombie) still answers kill -0: it counts as stopped.
# It stays a zombie when its parent is a Python process that made itself a child subreaper (the
# verifier pool does, for the sandbox's orphans) and never waits for it.
running() { kill -0 "$1" 2>/dev/null && ! grep -qs '^State:[[:space:]]*Z' "/proc/$1/status"; }
# Whether the process group PGID (a server started under set -m leads its own) has a member that is
# not a zombie: its leader may be gone while a child it started still runs.
group_running() { ps -eo pgid=,stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {found = 1} END {exit !found}'; }
pid_alive() { [ -f "$1" ] && running "$(cat "$1")"; }

start_bg() {  # start_bg NAME CMD...: own process group (set -m) so one signal stops it and its children
    local name="$1"; shift
    local pidfile="$PREFECT_HOME/$name.pid"
    if pid_alive "$pidfile"; then echo "prefect_local: $name already running (pid $(cat "$pidfile"))"; return 0; fi
    set -m
    nohup "$@" >"$PREFECT_HOME/$name.log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    set +m
    echo "prefect_local: $name started (pid $!, log $PREFECT_HOME/$name.log)"
}

stop_bg() {  # stop_bg NAME: SIGTERM the process group, then SIGKILL after 30 s
    local pidfile="$PREFECT_HOME/$1.pid"
    local pid; pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [ -z "$pid" ] || ! { running "$pid" || group_running "$pid"; }; then rm -f "$pidfile"; return 0; fi
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 60); do running "$pid" || group_running "$pid" || break; sleep 0.5; done
    if running "$pid" || group_running "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$pidfile"
    echo "prefect_local: $1 stopped (pid $pid)"
}

cmd_server() {
    start_bg server prefect server start --host 127.0.0.1 --port "$PORT"
    if ! prefect server status --wait --timeout 180 >/dev/null; then
        echo "prefect_local: server not healthy after 180 s; see $PREFECT_HOME/server.log" >&2
        tail -n 20 "$PREFECT_HOME/server.log" >&2 || true
        exit 1
    fi
    echo "prefect_local: server up at http://127.0.0.1:${PORT} (UI) / $PREFECT_API_URL"
}

cmd_pool() {
    if prefect work-pool inspect "$POOL" >/dev/null 2>&1; then
        echo "prefect_local: work pool $POOL exists"
    else
        prefect work-pool create "$POOL" --type process
    fi
}

cmd_deploy() {
    if [ $# -gt 0 ]; then prefect deploy --no-prompt "$@"; else prefect deploy --all --no-prompt; fi
}

cmd_worker() { start_bg worker prefect worker start --pool "$POOL" --type process; }

cmd_env() {
    echo "export PREFECT_HOME='$PREFECT_HOME' PREFECT_API_URL='$PREFECT_API_URL'"
    echo "export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PATH='$BIN':\"\$PATH\""
}

case "${1:-}" in
    server) cmd_server ;;
    pool) cmd_pool ;;
    deploy) cmd_deploy "${@:2}" ;;
    worker) cmd_worker ;;
    up) cmd_server; cmd_pool; cmd_deploy; cmd_worker ;;
    run) prefect deployment run "${2:-retrain/smoke}" --watch "${@:3}" ;;
    env) cmd_env ;;
    cli) prefect "${@:2}" ;;
    alerts) "$BIN/python" "$ROOT/scripts/prefect_alerts.py" "${@:2}" ;;
    status)
        prefect server status || true
        for n in server worker; do
            if pid_alive "$PREFECT_HOME/$n.pid"; then echo "$n: pid $(cat "$PREFECT_HOME/$n.pid")"; else echo "$n: not running"; fi
        done ;;
    stop) stop_bg worker; stop_bg server ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
esac
